"""The strategy record: where it lives, how it is keyed, and that runs sharing a store learn.

The generator is a scripted chat model whose refinements either always fall below the
attempt they refine or always raise it; the evaluator reads the score the model wrote.
Every entry point here shares one real LangGraph store over several runs (in memory,
SQLite and PostgreSQL), and the tests check both what the store holds and what later
runs do with it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_refine import (
    Attempt,
    Evaluation,
    arefine,
    astrategy_records,
    create_refine_graph,
    refine,
    strategy_records,
)
from langgraph_refine._decisions._strategy import (
    MoveStats,
    round_stats,
    score_counts,
    score_kind,
    state_kind,
    state_stats,
)
from langgraph_refine._records._record import (
    RECORD_NAMESPACE,
    StrategyRecord,
    evaluator_kind,
    model_name,
    read_records,
    record_key,
)
from langgraph_refine._records._record_items import record_namespace
from langgraph_refine.evaluators import combine, contains_all, word_count
from tests.conftest import POSTGRES_URI_ENV, postgres_uri
from tests.fakes import ScriptedChatModel

TASK = "Write a short note."
SCORE = re.compile(r"score=([0-9.]+)")
LOOP = {"max_iterations": 3, "patience": None, "target_score": 1.0}


def scripted(step: float, *, fresh: float = 0.5, spread: float = 0.0) -> ScriptedChatModel:
    """A model that writes `score=<x>`: the refined score + `step` for a refinement; for a
    new sample `fresh`, then `fresh + spread`, `fresh - spread`, `fresh`, ... in turn."""
    samples = itertools.cycle([fresh, fresh + spread, fresh - spread])

    def reply(messages: Sequence[BaseMessage]) -> str:
        text = messages[-1].text
        if "<answer>" in text:  # a refinement prompt: it shows the attempt refined
            refined = float(SCORE.findall(text)[-1])
            return f"score={min(0.95, max(0.0, refined + step)):.2f}"
        return f"score={next(samples):.2f}"

    return ScriptedChatModel(replies=[reply])


def judge(response: str, state: Any) -> Evaluation:
    """Reads the score the scripted model wrote."""
    found = SCORE.search(response)
    assert found, response
    return Evaluation(score=float(found.group(1)), feedback="make it better")


def falling() -> ScriptedChatModel:
    """Refinements fall by 0.2; a run's second fresh sample raises its first by 0.2."""
    return scripted(-0.2, spread=0.2)


def helping() -> ScriptedChatModel:
    return scripted(+0.1, fresh=0.3)


def move(attempt: Attempt) -> str:
    """The attempt's kind of move."""
    return attempt.move or ("sample" if attempt.parent is None else "refine")


def fresh(attempt: Attempt) -> bool:
    """True for a fresh answer (a sample of any kind), not a refinement of an attempt."""
    return attempt.parent is None and move(attempt) not in ("refine", "revise")


def stored(store: BaseStore, key: str) -> StrategyRecord:
    records = read_records(store)
    assert key in records, f"no record {key!r} in the store: {list(records)}"
    return records[key]


def keys(store: BaseStore) -> list[str]:
    """The record keys in a store."""
    return list(strategy_records(store))


def rounds(record: StrategyRecord) -> int:
    return sum(stats.rounds for stats in record.moves.values())


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[BaseStore]:
    """A real store of each kind LangGraph ships."""
    if request.param == "memory":
        yield InMemoryStore()
    elif request.param == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as sqlite:
            sqlite.setup()
            yield sqlite
    else:
        uri = postgres_uri()
        if not uri:
            pytest.fail(f"{POSTGRES_URI_ENV} is not set; `make test` sets it")
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(uri) as postgres:
            postgres.setup()
            yield postgres


@pytest.fixture
def key() -> str:
    """A record key of its own, so tests sharing a database do not share a record."""
    return f"test-{uuid.uuid4().hex}"


# -- where the record lives and how it is keyed -------------------------------------------


def test_a_run_is_one_item_in_its_records_namespace_keyed_by_model_and_evaluator() -> None:
    store = InMemoryStore()
    first = refine(falling(), TASK, judge, store=store, **LOOP)
    items = store.search(("langgraph_refine",))
    namespace = ("langgraph_refine", "strategy", "ScriptedChatModel|judge")
    assert [tuple(i.namespace) for i in items] == [namespace]
    [item] = items  # the run's latest counts; its earlier items were deleted
    loop_id = item.value["run"]
    assert item.key == f"run:{loop_id}:3" and item.value["n"] == 3
    assert item.value["moves"] == {k: v.to_dict() for k, v in round_stats(first.attempts).items()}
    # Beside the totals, each round counted under the state it started from.
    states = {
        s: {k: v.to_dict() for k, v in kinds.items()}
        for s, kinds in state_stats(first.attempts).items()
    }
    assert item.value["states"] == states
    # And each answer's outcome: a fresh one's score, a refinement's move, in tenths.
    assert item.value["scores"] == score_counts(first.attempts)
    assert item.value["scores"] == {"sample": {"5": 1, "7": 1, "3": 1}, "refine@b2": {"-2": 1}}
    records = strategy_records(store)
    assert list(records) == ["ScriptedChatModel|judge"]
    record = records["ScriptedChatModel|judge"]
    assert record.pop("states") == states
    assert record.pop("scores") == item.value["scores"]
    for stats in record.values():
        assert set(stats) == {"rounds", "raised", "fell"}
        assert all(isinstance(n, int) for n in stats.values())
    assert sum(s["rounds"] for s in record.values()) == 3


def test_a_record_key_with_dots_and_stars_gets_a_namespace_of_its_own() -> None:
    store = InMemoryStore()
    for key in ["openai:gpt-4.1|judge", "a*b%2E", "a"]:
        refine(falling(), TASK, judge, store=store, record_key=key, **LOOP)
    assert record_namespace("openai:gpt-4.1|judge")[-1] == "openai:gpt-4%2E1|judge"
    assert keys(store) == ["a", "a*b%2E", "openai:gpt-4.1|judge"]
    assert all(rounds(r) == 3 for r in read_records(store).values())


def test_model_name_is_provider_and_model_as_langchain_reports_them() -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4o-mini", api_key="sk-test")  # type: ignore[arg-type]
    assert model_name(model) == "openai:gpt-4o-mini"
    assert model_name(model.bind(temperature=0.2)) == "openai:gpt-4o-mini"  # a binding
    assert model_name(falling()) == "ScriptedChatModel"  # no model name: the class

    def write_draft(state: Any) -> str:
        return "draft"

    assert model_name(write_draft) == "write_draft"


def test_evaluator_kind_is_the_factory_or_callable_name_not_its_arguments() -> None:
    assert evaluator_kind(contains_all(["a", "b"])) == evaluator_kind(contains_all(["c"]))
    assert evaluator_kind(word_count(1, 9)) == "word_count"
    kind = evaluator_kind(combine(contains_all(["a"]), word_count(1, 5)))
    assert kind == "combined(contains_all+word_count)"
    from langgraph_refine.evaluators._combine import as_evaluator

    assert evaluator_kind(as_evaluator(judge)) == "judge"


def test_default_key_of_a_graph_names_model_and_evaluator() -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4o-mini", api_key="sk-test")  # type: ignore[arg-type]
    assert record_key(model, contains_all(["x"])) == "openai:gpt-4o-mini|contains_all"


def test_record_key_overrides_the_default() -> None:
    store = InMemoryStore()
    refine(falling(), TASK, judge, store=store, record_key="my-model/my-check", **LOOP)
    assert keys(store) == ["my-model/my-check"]


def test_record_key_per_run_context() -> None:
    store = InMemoryStore()
    graph = create_refine_graph(falling(), judge, **LOOP).compile(store=store)
    graph.invoke({"task": TASK}, context={"record_key": "from-context"})
    assert keys(store) == ["from-context"]


def test_a_runs_own_check_names_its_record() -> None:
    store = InMemoryStore()
    graph = create_refine_graph(falling(), judge, **LOOP).compile(store=store)
    graph.invoke({"task": TASK}, context={"evaluator": "contains:score,note"})
    assert keys(store) == ["ScriptedChatModel|contains_all"]


def test_a_custom_topology_keeps_a_record_only_with_a_key() -> None:
    from langgraph_refine import EvaluatorNode

    assert EvaluatorNode(judge).record_key(EvaluatorNode(judge).options) is None
    node = EvaluatorNode(judge, record_key="mine")
    assert node.record_key(node.options) == "mine"


@pytest.mark.parametrize("bad", ["", "   ", 3])
def test_bad_record_key_fails_at_build_time(bad: Any) -> None:
    with pytest.raises(ValueError, match="record_key must be a non-empty string"):
        create_refine_graph(falling(), judge, record_key=bad)


def test_store_must_be_a_langgraph_store() -> None:
    with pytest.raises(ValueError, match="store must be a LangGraph BaseStore"):
        refine(falling(), TASK, judge, store={"not": "a store"})  # type: ignore[arg-type]


# -- without a store, or without explore: nothing changes -------------------------------


def test_without_a_store_nothing_is_kept_and_runs_are_unchanged() -> None:
    plain = refine(falling(), TASK, judge, **LOOP)
    store = InMemoryStore()
    with_store = refine(falling(), TASK, judge, store=store, **LOOP)  # a first run: empty record
    assert [(a.parent, a.score) for a in plain.attempts] == [
        (a.parent, a.score) for a in with_store.attempts
    ]
    assert move(plain.attempts[1]) == "refine"  # cold: round 1 refines attempt 0


@pytest.mark.parametrize("strategy", ["chain", "sample"])
def test_only_explore_keeps_a_record(strategy: str) -> None:
    store = InMemoryStore()
    refine(falling(), TASK, judge, store=store, strategy=strategy, **LOOP)
    assert store.search(RECORD_NAMESPACE) == []
    assert strategy_records(store) == {}


# -- runs sharing a store learn --------------------------------------------------------------


def test_repeated_refine_calls_learn_that_refinements_fall(store: BaseStore, key: str) -> None:
    first = refine(falling(), TASK, judge, store=store, record_key=key, **LOOP)
    assert move(first.attempts[1]) == "refine"  # nothing learned yet
    for _ in range(3):
        later = refine(falling(), TASK, judge, store=store, record_key=key, **LOOP)
    assert fresh(later.attempts[1])  # sampled from round 1
    record = stored(store, key)
    assert record.moves["refine"].fell == record.moves["refine"].rounds > 0


def test_repeated_refine_calls_learn_that_refinements_help(store: BaseStore, key: str) -> None:
    for _ in range(4):
        later = refine(helping(), TASK, judge, store=store, record_key=key, **LOOP)
    assert [move(a) for a in later.attempts[1:]] == ["refine"] * 3  # refined from round 1
    record = stored(store, key)
    refinements = record.moves["refine"]
    assert refinements.raised == refinements.rounds >= 9 and refinements.fell == 0


async def test_arefine_keeps_the_record_in_any_store(store: BaseStore, key: str) -> None:
    # The sync SQLite and Postgres stores have no async methods: their calls run in a
    # worker thread, so `arefine` works with whatever store it is given.
    for _ in range(2):
        await arefine(helping(), TASK, judge, store=store, record_key=key, **LOOP)
    record = stored(store, key)
    assert sum(stats.rounds for stats in record.moves.values()) == 6
    assert record.moves["refine"].raised == record.moves["refine"].rounds >= 3
    assert len(record.runs) == 2


class UnhashableStore(InMemoryStore):
    """A store that cannot be a dict key (it defines equality without a hash)."""

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = None  # type: ignore[assignment]


def test_a_store_that_cannot_be_hashed_still_keeps_the_record() -> None:
    store = UnhashableStore()
    refine(falling(), TASK, judge, store=store, **LOOP)
    asyncio.run(arefine(falling(), TASK, judge, store=store, **LOOP))
    assert rounds(stored(store, "ScriptedChatModel|judge")) == 6


async def test_repeated_arefine_calls_learn(store: BaseStore, key: str) -> None:
    # The sync SQLite and Postgres stores have no async methods: their calls run in a
    # worker thread, so `arefine` works with whatever store it is given.
    for _ in range(4):
        later = await arefine(falling(), TASK, judge, store=store, record_key=key, **LOOP)
    assert fresh(later.attempts[1])
    assert rounds(stored(store, key)) == 12


def attempts_of(app: Any, config: Any) -> list[Attempt]:
    """The attempts of a finished run on a thread."""
    return [Attempt.model_validate(a) for a in app.get_state(config).values["attempts"]]


def threads(n: int) -> list[Any]:
    return [{"configurable": {"thread_id": str(uuid.uuid4())}} for _ in range(n)]


def test_a_compiled_graph_learns_through_its_store() -> None:
    store = InMemoryStore()
    app = create_refine_graph(falling(), judge, **LOOP).compile(
        store=store, checkpointer=InMemorySaver()
    )
    configs = threads(4)
    for config in configs:
        app.invoke({"task": TASK}, config)
    assert move(attempts_of(app, configs[0])[1]) == "refine"
    assert fresh(attempts_of(app, configs[-1])[1])
    assert rounds(stored(store, "ScriptedChatModel|judge")) == 12


def test_each_choice_gets_the_other_runs_pooled_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_refine._decisions import _round

    seen: list[dict[str, MoveStats] | None] = []
    real = _round.choose_next

    def spy(strategy: Any, attempts: Any, task: str, record: Any = None, **kw: Any) -> Any:
        seen.append(None if record is None else dict(record))
        return real(strategy, attempts, task, record=record, **kw)

    monkeypatch.setattr(_round, "choose_next", spy)
    store = InMemoryStore()
    first = refine(falling(), TASK, judge, store=store, **LOOP)
    assert seen[:3] == [{}, {}, {}]  # the first run: nothing pooled (its own rounds excluded)
    seen.clear()
    refine(falling(), TASK, judge, store=store, **LOOP)
    # Every choice of the second run, round 1's included, sees the first run's counts,
    # pooled and by the state each round started from.
    by_state = {
        state_kind(kind, state): stats
        for state, kinds in state_stats(first.attempts).items()
        for kind, stats in kinds.items()
    }
    scores = {
        score_kind(kind, outcome): MoveStats(rounds=n)
        for kind, bins in score_counts(first.attempts).items()
        for outcome, n in bins.items()
    }
    assert scores == {
        "sample#5": MoveStats(1),
        "sample#7": MoveStats(1),
        "sample#3": MoveStats(1),
        "refine@b2#-2": MoveStats(1),
    }
    assert by_state and seen == [{**round_stats(first.attempts), **by_state, **scores}] * 3
    seen.clear()
    refine(falling(), TASK, judge, **LOOP)  # no store: no record
    assert seen == [None] * 3


# -- concurrency and replays ---------------------------------------------------------------


class SlowStore(InMemoryStore):
    """An in-memory store whose operations take a moment, as a database's do.

    Concurrent read-modify-writes then overlap, as they would on a real server.
    """

    def batch(self, ops: Any) -> Any:
        time.sleep(0.002)
        return super().batch(ops)

    async def abatch(self, ops: Any) -> Any:
        await asyncio.sleep(0.002)
        return await super().abatch(ops)


async def test_concurrent_runs_lose_no_counts() -> None:
    store = SlowStore()
    app = create_refine_graph(falling(), judge, **LOOP).compile(
        store=store, checkpointer=InMemorySaver()
    )
    configs = threads(8)
    await app.abatch([{"task": TASK}] * 8, configs)
    record = stored(store, "ScriptedChatModel|judge")
    assert rounds(record) == sum(len(attempts_of(app, c)) - 1 for c in configs) == 24
    assert len(record.runs) == 8


def test_concurrent_sync_runs_lose_no_counts() -> None:
    store = SlowStore()
    app = create_refine_graph(falling(), judge, **LOOP).compile(
        store=store, checkpointer=InMemorySaver()
    )
    configs = threads(8)
    app.batch([{"task": TASK}] * 8, configs)
    assert rounds(stored(store, "ScriptedChatModel|judge")) == sum(
        len(attempts_of(app, c)) - 1 for c in configs
    )


def test_a_resumed_run_does_not_double_count(checkpointer: Any, key: str) -> None:
    calls = {"n": 0}

    def reply(messages: Sequence[BaseMessage]) -> str:
        calls["n"] += 1
        if calls["n"] == 3:  # round 2's generation fails once
            raise ValueError("provider went away")
        return "score=0.50"

    store = InMemoryStore()
    model = ScriptedChatModel(replies=[reply])
    graph = create_refine_graph(model, judge, record_key=key, retry_policy=None, **LOOP)
    app = graph.compile(checkpointer=checkpointer, store=store)
    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
    with pytest.raises(ValueError, match="provider went away"):
        app.invoke({"task": TASK}, config)
    assert rounds(stored(store, key)) == 1  # round 1 counted before the crash
    app.invoke(None, config)  # resume
    attempts = attempts_of(app, config)
    assert len(attempts) == 4
    assert stored(store, key).moves == round_stats(attempts)  # rounds 1-3, each once


def test_a_replayed_round_does_not_double_count() -> None:
    judged: list[str] = []

    def counting_judge(response: str, state: Any) -> Evaluation:
        judged.append(response)
        return judge(response, state)

    store = InMemoryStore()
    app = create_refine_graph(falling(), counting_judge, **LOOP).compile(
        checkpointer=InMemorySaver(), store=store
    )
    config: Any = {"configurable": {"thread_id": "replayed"}}
    app.invoke({"task": TASK}, config)
    before = stored(store, "ScriptedChatModel|counting_judge").moves
    # Replay the run from the checkpoint before its last evaluation (as after a crash).
    history = list(app.get_state_history(config))
    last_evaluate = next(s for s in history if s.next == ("evaluate",))
    app.invoke(None, last_evaluate.config)
    assert len(judged) == 5  # the last round was evaluated (and written) again
    after = stored(store, "ScriptedChatModel|counting_judge")
    assert after.moves == before
    assert len(after.runs) == 1


# -- the stored value ------------------------------------------------------------------------


def test_an_unreadable_item_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryStore()
    namespace = record_namespace("ScriptedChatModel|judge")
    store.put(namespace, "run:x:1", {"run": "x", "n": 1, "moves": {"refine": "many"}})
    store.put(namespace, "other", {"unrelated": True})
    with caplog.at_level(logging.WARNING, logger="langgraph_refine"):
        refine(falling(), TASK, judge, store=store, **LOOP)
    assert "unreadable" in caplog.text
    assert rounds(stored(store, "ScriptedChatModel|judge")) == 3


class BrokenStore(InMemoryStore):
    """A store whose every operation fails (a database gone away)."""

    def batch(self, ops: Any) -> Any:
        raise OSError("database is locked")

    async def abatch(self, ops: Any) -> Any:
        raise OSError("database is locked")


def test_a_failing_store_is_logged_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="langgraph_refine"):
        result = refine(falling(), TASK, judge, store=BrokenStore(), **LOOP)
        again = asyncio.run(arefine(falling(), TASK, judge, store=BrokenStore(), **LOOP))
    assert len(result.attempts) == len(again.attempts) == 4
    assert "the store failed (OSError: database is locked)" in caplog.text


class UnreadableStore(InMemoryStore):
    """A store whose searches fail (and whose writes work) while `failing` is set."""

    failing = True

    def batch(self, ops: Any) -> Any:
        from langgraph.store.base import SearchOp

        ops = list(ops)
        if self.failing and any(isinstance(op, SearchOp) for op in ops):
            raise OSError("read timed out")
        return super().batch(ops)

    async def abatch(self, ops: Any) -> Any:
        return self.batch(ops)


def test_a_failed_read_still_writes_the_rounds(caplog: pytest.LogCaptureFixture) -> None:
    store = UnreadableStore()
    with caplog.at_level(logging.WARNING, logger="langgraph_refine"):
        result = refine(falling(), TASK, judge, store=store, **LOOP)
        asyncio.run(arefine(falling(), TASK, judge, store=store, **LOOP))
    assert "the store failed (OSError: read timed out)" in caplog.text
    assert move(result.attempts[1]) == "refine"  # no record read: explore acts as cold
    store.failing = False
    assert rounds(stored(store, "ScriptedChatModel|judge")) == 6  # every round written


def test_read_records_lists_every_record() -> None:
    store = InMemoryStore()
    refine(falling(), TASK, judge, store=store, record_key="b", **LOOP)
    refine(helping(), TASK, judge, store=store, record_key="a", **LOOP)
    store.put(("langgraph_refine", "other"), "x", {"unrelated": True})
    store.put(RECORD_NAMESPACE, "stray", {"moves": {}})  # not in a record's namespace
    records = read_records(store)
    assert list(records) == ["a", "b"]
    assert records["a"].moves["refine"].raised == 3
    record = strategy_records(store)["a"]
    assert record.pop("states") == {
        state: {"refine": {"rounds": 1, "raised": 1, "fell": 0}}
        for state in ("b1/start", "b1/up", "b2/up")
    }
    assert record.pop("scores") == {
        "sample": {"3": 1},
        "refine@b1": {"+1": 2},
        "refine@b2": {"+1": 1},
    }
    assert record == {"refine": {"rounds": 3, "raised": 3, "fell": 0}}
    assert asyncio.run(astrategy_records(store)) == strategy_records(store)


def test_a_run_that_passes_at_once_still_counts_its_answers_score() -> None:
    store = InMemoryStore()
    done = scripted(0.0, fresh=0.95)
    result = refine(done, TASK, judge, store=store, record_key="k", target_score=0.9)
    assert len(result.attempts) == 1 and result.stop_reason == "target_reached"
    # No round was made; the answer's score still tells later runs what a fresh answer does.
    assert strategy_records(store)["k"] == {"scores": {"sample": {"10": 1}}}
    refine(done, TASK, judge, store=store, record_key="k", target_score=0.9)  # another run
    assert strategy_records(store)["k"] == {"scores": {"sample": {"10": 2}}}


# -- a record that generalizes: thin evidence borrows, this run's fall counts at once -----------


def climbing(refined: float | None) -> ScriptedChatModel:
    """Fresh answers score 0.30, 0.31, 0.32, ... over every run sharing the model; a
    refinement scores `refined` (None: the refined score + 0.1)."""
    fresh_scores = itertools.count()

    def reply(messages: Sequence[BaseMessage]) -> str:
        text = messages[-1].text
        if "<answer>" in text:  # a refinement prompt: it shows the attempt refined
            start = float(SCORE.findall(text)[-1])
            return f"score={start + 0.1 if refined is None else refined:.2f}"
        return f"score={0.3 + 0.01 * next(fresh_scores):.2f}"

    return ScriptedChatModel(replies=[reply])


def refined_bands(store: BaseStore, key: str) -> set[str]:
    """The bands refinements in the record started from (`"b1"`, ...)."""
    scores_ = strategy_records(store).get(key, {}).get("scores", {})
    return {kind.split("@")[1] for kind in scores_ if kind.startswith("refine@")}


FEW = 5
"""Runs that may still try a refinement from a band where the record saw few of them."""


def test_runs_whose_refinements_fall_sample_from_round_one_even_from_a_band_never_refined(
    key: str,
) -> None:
    model, store = climbing(0.02), InMemoryStore()
    runs, new_band = [], []
    for _ in range(8):
        known = refined_bands(store, key)
        result = refine(model, TASK, judge, strategy="explore", store=store, record_key=key, **LOOP)
        runs.append([move(a) for a in result.attempts])
        first = result.attempts[0].evaluation
        assert first is not None
        new_band.append(f"b{min(3, int(first.score * 4))}" not in known)
    assert runs[0][1] == "refine"  # nothing learned yet: the first run refines and sees it fall
    # After the first few runs, every round of every run is a fresh answer...
    for moves in runs[FEW:]:
        assert all(m in ("sample", "guided") for m in moves), runs
    # ...also in a run whose first answer lands in a band no refinement started from.
    assert any(new_band[FEW:]), new_band


def test_runs_whose_refinements_raise_keep_refining(key: str) -> None:
    model, store = climbing(None), InMemoryStore()
    for _ in range(8):
        result = refine(model, TASK, judge, strategy="explore", store=store, record_key=key, **LOOP)
    assert [move(a) for a in result.attempts[1:]] == ["refine"] * 3
