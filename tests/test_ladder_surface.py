# ruff: noqa: F811 - pytest fixtures are imported from the CLI helper module
"""A ladder of models around the loop: stream events, and the served graphs' run context."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_refine import RefineResult, create_refine_graph, strategy_records
from langgraph_refine._calls._run_models import MODELS_ENV, _model
from tests.test_cli_helpers import openai_server  # noqa: F401 - fixture
from tests.test_cli_ladder import by_model
from tests.test_ladder import Named, good


def test_round_events_name_the_model_and_rung_of_each_attempt() -> None:
    cheap, strong = Named(name_="cheap", replies=["weak"]), Named(name_="strong", replies=["good"])
    graph = create_refine_graph([cheap, strong], good, strategy="chain").compile()
    events = [
        e
        for e in graph.stream({"task": "t"}, stream_mode="custom")
        if isinstance(e, dict) and e.get("type") == "round"
    ]
    assert [(e["model"], e["rung"]) for e in events] == [
        ("test:cheap", 0),
        ("test:cheap", 0),
        ("test:strong", 1),
    ]


def test_without_a_ladder_round_events_name_the_model_and_no_rung() -> None:
    graph = create_refine_graph(Named(name_="only", replies=["good"]), good).compile()
    events: list[Any] = list(graph.stream({"task": "t"}, stream_mode="custom"))
    rounds = [e for e in events if e.get("type") == "round"]
    assert [(e["model"], e["rung"]) for e in rounds] == [("test:only", None)]


# -- a run's own models (the run context's `models`) ---------------------------------------


@pytest.fixture
def openai_env(openai_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A scripted OpenAI-compatible server the run's model strings resolve to."""
    server = openai_server(by_model)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.delenv(MODELS_ENV, raising=False)
    monkeypatch.delenv("REFINE_MODEL", raising=False)
    _model.cache_clear()  # each test's server has its own address
    yield server
    _model.cache_clear()


def served_graph(**kwargs: Any) -> Any:
    """A graph built on one model, as the served graphs are (its judge: the callable)."""
    return create_refine_graph(
        Named(name_="served", replies=["weak"]), good_answer, **kwargs
    ).compile(checkpointer=InMemorySaver())


def run(graph: Any, context: dict[str, Any] | None = None) -> RefineResult:
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph.invoke({"task": "t"}, config, context=context)
    return RefineResult.from_state(graph.get_state(config).values)


def good_answer(response: str, state: Any) -> float:
    return 1.0 if "good" in response else 0.2


def test_a_runs_models_make_its_generator_a_ladder(openai_env: Any) -> None:
    graph = served_graph(strategy="chain")
    result = run(graph, {"models": ["cheap", "strong"]})
    assert [(a.model, a.rung) for a in result.attempts] == [
        ("openai:cheap", 0),
        ("openai:cheap", 0),
        ("openai:strong", 1),
    ]
    assert [r["model"] for r in openai_env.generator_requests] == ["cheap", "cheap", "strong"]
    served = graph.get_graph().nodes["generate"].data.generator  # type: ignore[union-attr]
    assert served.calls == []  # the graph's own generator is not used by this run
    # The next run without `models` is back on the graph's generator.
    plain = run(graph)
    assert {a.model for a in plain.attempts} == {"test:served"}


async def test_one_model_in_models_replaces_the_generator_async(
    openai_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    from langgraph_refine._calls import _run_models

    # LangChain's default async client is one per process, and its pool may hold a
    # connection an earlier test's (closed) event loop opened: this run gets its own.
    real = _run_models.resolve_chat_model

    def own_client(name: str, **kwargs: Any) -> Any:
        return real(name, http_async_client=httpx.AsyncClient(), **kwargs)

    monkeypatch.setattr(_run_models, "resolve_chat_model", own_client)
    graph = served_graph()
    config = {"configurable": {"thread_id": "async"}}
    await graph.ainvoke({"task": "t"}, config, context={"models": ["strong"]})
    result = RefineResult.from_state((await graph.aget_state(config)).values)
    assert [(a.model, a.rung) for a in result.attempts] == [("openai:strong", None)]


def test_a_runs_ladder_keeps_its_own_strategy_record(openai_env: Any) -> None:
    store = InMemoryStore()
    graph = create_refine_graph(Named(name_="served"), good_answer, strategy="explore").compile(
        store=store
    )
    graph.invoke({"task": "t"}, context={"models": ["cheap", "strong"]})
    assert any(key.startswith("openai:cheap>openai:strong|") for key in strategy_records(store))


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ([], "models must be a non-empty list of model strings"),
        (["cheap", " "], "models must be a non-empty list"),
        (3, "models must be a non-empty list"),
        (["cheap", "cheap"], "models names 'cheap' more than once"),
        (["cheap", "mistralai:x"], "models: 'mistralai:x' cannot be used: .*needs its package"),
    ],
)
def test_bad_models_fail_before_any_model_call(openai_env: Any, models: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run(served_graph(), {"models": models})
    assert openai_env.requests == []


def test_the_deployment_limits_which_models_a_run_may_name(
    openai_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODELS_ENV, "cheap, strong")
    monkeypatch.setenv("REFINE_MODEL", "served")
    graph = served_graph(max_iterations=0)
    with pytest.raises(ValueError, match=r"models: 'dear' is not one this deployment allows"):
        run(graph, {"models": ["cheap", "dear"]})
    assert openai_env.requests == []
    run(graph, {"models": ["served", "strong"]})  # REFINE_MODEL is always allowed
    assert [r["model"] for r in openai_env.generator_requests] == ["served"]
