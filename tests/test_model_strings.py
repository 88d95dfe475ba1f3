"""Model strings: one resolver for every surface, and each model built once per command."""

# ruff: noqa: F811 - pytest fixtures are imported from the helper module

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langgraph_refine import create_refine_graph
from langgraph_refine._calls._models import ModelPackageError, ModelStringError
from langgraph_refine.evaluators import checklist, llm_judge
from tests.fakes import ScriptedChatModel
from tests.test_cli_helpers import (  # noqa: F401
    assert_one_line_error,
    cli,
    drafts_and_judge,
    openai_server,
)


class Resolved(ScriptedChatModel):
    """What the stand-in `init_chat_model` builds (a name apart from a ladder's other rung)."""


def _middleware(**kwargs: Any) -> Any:
    from langgraph_refine import RefineMiddleware

    return RefineMiddleware(**kwargs)


SURFACES = [
    pytest.param("generator", lambda name: create_refine_graph(name), id="graph generator"),
    pytest.param(
        "generator[1]",
        lambda name: create_refine_graph([ScriptedChatModel(), name]),
        id="graph ladder",
    ),
    pytest.param(
        "judge_model",
        lambda name: create_refine_graph(ScriptedChatModel(), judge_model=name),
        id="graph judge_model",
    ),
    pytest.param(
        "comparer",
        lambda name: create_refine_graph(ScriptedChatModel(), select="pairwise", comparer=name),
        id="graph comparer",
    ),
    pytest.param("llm_judge model", lambda name: llm_judge(name), id="llm_judge"),
    pytest.param("checklist model", lambda name: checklist(name), id="checklist"),
    pytest.param("models[0]", lambda name: _middleware(models=[name]), id="middleware models"),
    pytest.param(
        "judge_model", lambda name: _middleware(judge_model=name), id="middleware judge_model"
    ),
    pytest.param(
        "comparer",
        lambda name: _middleware(select="pairwise", comparer=name),
        id="middleware comparer",
    ),
]
"""Each way a user names a model in the library, by the option its message names."""


@pytest.mark.parametrize(("option", "surface"), SURFACES)
def test_every_surface_asks_the_one_resolver(
    monkeypatch: pytest.MonkeyPatch, option: str, surface: Callable[[str], Any]
) -> None:
    import langchain.chat_models

    asked: list[tuple[str, str, int]] = []

    def init_chat_model(name: str, *, model_provider: str, **kwargs: Any) -> Any:
        asked.append((name, model_provider, kwargs["max_retries"]))
        return Resolved()

    monkeypatch.setattr(langchain.chat_models, "init_chat_model", init_chat_model)
    surface("ollama:qwen2.5:7b")
    # The same rule everywhere: the provider prefix, and the loop's retries, not the client's.
    assert asked == [("qwen2.5:7b", "ollama", 0)]


@pytest.mark.parametrize(("option", "surface"), SURFACES)
def test_every_surface_says_which_option_named_a_model_without_a_key(
    monkeypatch: pytest.MonkeyPatch, option: str, surface: Callable[[str], Any]
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelStringError) as caught:
        surface("gpt-test")
    message = str(caught.value)
    assert message.startswith(f"{option}='gpt-test': the openai client refuses its settings: ")
    assert "OPENAI_API_KEY" in message  # what to set
    assert "pass a chat model built with your own settings" in message
    assert (caught.value.option, caught.value.value) == (option, "gpt-test")


@pytest.mark.parametrize(("option", "surface"), SURFACES)
def test_every_surface_names_a_missing_provider_package(
    option: str, surface: Callable[[str], Any]
) -> None:
    pytest.importorskip("langchain_openai")
    try:
        import langchain_groq  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - depends on the environment
        pytest.skip("langchain-groq is installed")
    with pytest.raises(ModelPackageError) as caught:
        surface("groq:llama")
    # Both kinds of error a caller may catch: a missing package, and a bad value.
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(
        f"{option}='groq:llama': model provider 'groq' needs its package: "
    )


def test_the_command_line_names_the_flag_the_same_way(cli: Any) -> None:
    run = cli("run", "Write.", "--model", "gpt-test")
    assert_one_line_error(
        run, "--model 'gpt-test': the openai client refuses its settings: ", "OPENAI_API_KEY"
    )
    assert run.err.count("gpt-test") == 1  # named once, not once per layer


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the models the command line builds by name, and the judges it decides."""
    from langgraph_refine.cli import _models

    built: Counter[str] = Counter()
    build = _models.build_chat_model
    decide = _models.ModelSettings._decide_judge

    def counted_build(name: str, settings: Any, *, option: str) -> Any:
        built[name] += 1
        return build(name, settings, option=option)

    def counted_decide(self: Any) -> Any:
        built["(judge decided)"] += 1
        return decide(self)

    monkeypatch.setattr(_models, "build_chat_model", counted_build)
    monkeypatch.setattr(_models.ModelSettings, "_decide_judge", counted_decide)
    return built


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("--judge-model", "judge"),
        ("-e", "judge", "--select", "pairwise"),
        ("-e", "judge", "--select", "pairwise", "--judge-model", "judge"),
    ],
    ids=["default judge", "judge model", "pairwise", "pairwise judge model"],
)
def test_run_builds_each_model_and_decides_its_judge_once(
    cli: Any, openai_server: Any, builds: Counter[str], extra: tuple[str, ...]
) -> None:
    server = openai_server(drafts_and_judge({"draft 1": 0.95}))
    run = cli("run", "Write.", "--model", "gen", "--base-url", server.base_url, "--json", *extra)
    assert run.code == 0, run.err
    names = {"gen", *(["judge"] if "judge" in extra[-1:] else [])}
    assert builds == {**dict.fromkeys(names, 1), "(judge decided)": 1}


def test_batch_builds_each_model_once_whichever_lines_name_it(
    cli: Any, openai_server: Any, builds: Counter[str], tmp_path: Path
) -> None:
    server = openai_server(drafts_and_judge({"draft 0": 0.95}))
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": 1, "task": "t"},
        {"id": 2, "task": "t", "max_iterations": 1},  # options of its own: a loop of its own
        {"id": 3, "task": "t", "model": ["gen", "other"]},
        {"id": 4, "task": "t", "model": "other", "max_iterations": 2},
    ]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    models = ("--model", "gen", "--judge-model", "judge", "--select", "pairwise")
    run = cli("batch", src, "--out", out, *models, "--base-url", server.base_url)
    assert run.code == 0, run.err
    assert len(out.read_text().splitlines()) == 4
    assert builds == {"gen": 1, "other": 1, "judge": 1, "(judge decided)": 1}
