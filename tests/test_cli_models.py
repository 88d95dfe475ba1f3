"""One model resolver for library, CLI and server, and the generation cap (`--max-tokens`)."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from langgraph_refine._calls._models import (
    DEFAULT_MAX_TOKENS,
    PROVIDERS,
    max_tokens_setting,
    model_route,
    resolve_chat_model,
)
from tests.test_cli_helpers import (  # noqa: F401
    assert_one_line_error,
    cli,
    drafts_and_judge,
    openai_server,
)


@pytest.mark.parametrize(
    ("name", "route"),
    [
        ("qwen2.5:7b", ("openai", "qwen2.5:7b")),
        ("smollm2:135m", ("openai", "smollm2:135m")),
        ("gpt-4o-mini", ("openai", "gpt-4o-mini")),
        ("claude-sonnet-4-5", ("openai", "claude-sonnet-4-5")),
        ("openai:gpt-4o-mini", ("openai", "gpt-4o-mini")),
        ("ollama:qwen2.5:7b", ("ollama", "qwen2.5:7b")),
        ("Google-GenAI:gemini-2.0", ("google_genai", "gemini-2.0")),
        (" anthropic : claude-x ", ("anthropic", "claude-x")),
        ("anthropic:", ("openai", "anthropic:")),
    ],
)
def test_model_route(name: str, route: tuple[str, str]) -> None:
    assert model_route(name) == route


def test_providers_are_the_ones_init_chat_model_documents() -> None:
    from langchain.chat_models import init_chat_model

    doc = inspect.getdoc(init_chat_model) or ""
    section = doc.split("Supported values", 1)[1].split("configurable_fields:", 1)[0]
    documented = set(re.findall(r"^\s*- `([a-z_]+)`\s+->", section, re.M))
    assert documented == PROVIDERS


def _openai(model: Any) -> ChatOpenAI:
    assert isinstance(model, ChatOpenAI), type(model)
    return model


def test_qwen_tag_resolves_the_same_in_library_cli_and_server(monkeypatch: Any) -> None:
    from langgraph_refine import create_refine_graph
    from langgraph_refine.cli._models import ModelSettings
    from langgraph_refine.server import build_graph

    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("REFINE_MAX_TOKENS", raising=False)
    name = "qwen2.5:7b"

    library = create_refine_graph(name).compile()
    cli_model = ModelSettings.from_options(name, None, None).generator()
    served = build_graph(environ={"REFINE_MODEL": name})

    models = [
        _openai(graph.get_graph().nodes["generate"].data.generator)  # type: ignore[union-attr]
        for graph in (library, served)
    ] + [_openai(cli_model)]
    assert [m.model_name for m in models] == [name] * 3
    assert {str(m.root_client.base_url).rstrip("/") for m in models} == {"http://127.0.0.1:9/v1"}
    assert {m.max_retries for m in models} == {0}  # the loop's retry policy retries


def test_resolver_passes_keyword_arguments() -> None:
    model = _openai(
        resolve_chat_model(
            "qwen2.5:7b",
            option="model",
            base_url="http://127.0.0.1:9/v1",
            api_key="unused",
            max_tokens=77,
            temperature=0.25,
        )
    )
    assert (model.max_tokens, model.temperature) == (77, 0.25)
    assert str(model.root_client.base_url).rstrip("/") == "http://127.0.0.1:9/v1"
    given = ChatOpenAI(model="x", api_key="unused")  # type: ignore[arg-type]
    assert resolve_chat_model(given, option="model", max_tokens=5) is given


def test_resolver_names_the_option_and_the_missing_package() -> None:
    with pytest.raises(ValueError, match="generator must be a chat model"):
        resolve_chat_model("  ", option="generator")
    with pytest.raises(ImportError, match=r"generator='groq:llama'.*'groq' needs its package"):
        resolve_chat_model("groq:llama", option="generator")


def test_max_tokens_setting_order_and_errors() -> None:
    assert max_tokens_setting(environ={}) == DEFAULT_MAX_TOKENS == 512
    assert max_tokens_setting(environ={"REFINE_MAX_TOKENS": " 200 "}) == 200
    assert max_tokens_setting(64, environ={"REFINE_MAX_TOKENS": "200"}) == 64
    with pytest.raises(ValueError, match=r"--max-tokens must be a whole number .* got 0"):
        max_tokens_setting(0)
    for bad in ("abc", "-5", "0", "1.5"):
        with pytest.raises(ValueError, match=rf"REFINE_MAX_TOKENS .* got '{re.escape(bad)}'"):
            max_tokens_setting(environ={"REFINE_MAX_TOKENS": bad})


def test_server_graphs_cap_generation(monkeypatch: Any) -> None:
    from langgraph_refine.server import build_graph

    monkeypatch.setenv("OPENAI_API_KEY", "local")

    def cap(environ: dict[str, str]) -> Any:
        graph = build_graph(environ={"REFINE_MODEL": "m", **environ})
        return graph.get_graph().nodes["generate"].data.generator.max_tokens  # type: ignore[union-attr]

    assert cap({}) == 512
    assert cap({"REFINE_MAX_TOKENS": "99"}) == 99
    with pytest.raises(ValueError, match="REFINE_MAX_TOKENS must be a whole number"):
        cap({"REFINE_MAX_TOKENS": "lots"})


def test_run_sends_max_tokens_to_every_model_call(
    cli: Any, openai_server: Any, monkeypatch: Any
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 1.0}))
    common = ("--model", "m", "--base-url", server.base_url, "--json")
    assert cli("run", "Say hi.", *common).code == 0
    assert {r.get("max_completion_tokens", r.get("max_tokens")) for r in server.requests} == {512}

    server.requests.clear()
    monkeypatch.setenv("REFINE_MAX_TOKENS", "300")
    assert cli("run", "Say hi.", *common).code == 0
    assert {r.get("max_completion_tokens", r.get("max_tokens")) for r in server.requests} == {300}

    server.requests.clear()
    assert cli("run", "Say hi.", *common, "--max-tokens", "64").code == 0
    assert {r.get("max_completion_tokens", r.get("max_tokens")) for r in server.requests} == {64}


def test_invalid_max_tokens_is_one_line(
    cli: Any, openai_server: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    server = openai_server(drafts_and_judge())
    common = ("--model", "m", "--base-url", server.base_url)
    assert_one_line_error(
        cli("run", "Say hi.", *common, "--max-tokens", "0"), "--max-tokens", "got 0"
    )
    assert_one_line_error(cli("run", "Say hi.", *common, "--max-tokens", "many"), "--max-tokens")
    monkeypatch.setenv("REFINE_MAX_TOKENS", "-1")
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "task": "t"}\n')
    assert_one_line_error(
        cli("batch", str(src), "--out", str(tmp_path / "out.jsonl"), *common),
        "REFINE_MAX_TOKENS must be a whole number",
        "'-1'",
    )
    assert server.requests == []


def test_demo_model_uses_the_resolver_and_the_cap(monkeypatch: Any) -> None:
    from tools.demo import demo_model

    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.setenv("REFINE_MODEL", "qwen2.5:7b")
    monkeypatch.setenv("REFINE_MAX_TOKENS", "99")
    with demo_model() as (model, label):
        chat = _openai(model)
        assert (chat.model_name, chat.max_tokens, chat.temperature) == ("qwen2.5:7b", 99, 0.7)
        assert label.startswith("qwen2.5:7b")
    with demo_model(33) as (model, _):
        assert _openai(model).max_tokens == 33
