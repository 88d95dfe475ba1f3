"""The benchmark harness: statistics, interleaving, RESULTS.md, and the fast benchmarks."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from benchmarks import _harness, prompt_growth
from benchmarks.__main__ import ORDER, main
from benchmarks._harness import BenchResult, Figure


def test_quartiles_and_ratio_figure() -> None:
    assert _harness.quartiles([5.0]) == (5.0, 5.0)
    assert _harness.quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 4.0)
    figure = _harness.ratio_figure("r", [1.0, 1.1, 1.3], target=1.2)
    assert figure.value == 1.1 and figure.passed is True
    assert figure.spread == "1.05-1.20 (n=3)" and figure.target == "<= 1.2x"
    assert _harness.ratio_figure("r", [1.3, 1.4], target=1.2).passed is False
    assert _harness.ratio_figure("r", [1.3], target=None).passed is None


def test_interleave_rotates_the_order_and_uses_reported_times() -> None:
    calls: list[str] = []
    variants = {
        "a": lambda: calls.append("a"),
        "b": lambda: calls.append("b"),
        "c": lambda: 0.25,
    }
    times = _harness.interleave(variants, repeats=3, warmup=0)
    assert calls == ["a", "b", "b", "a", "a", "b"]  # rep 0: a b c; rep 1: b c a; rep 2: c a b
    assert times["c"] == [0.25, 0.25, 0.25]
    assert len(times["a"]) == 3 and all(t >= 0 for t in times["a"])


def _result(name: str, passed: bool | None, date: str) -> BenchResult:
    return BenchResult(
        name=name,
        title=f"{name} title",
        figures=[
            Figure("speed", 1.5, target="<= 1.2x" if passed is not None else "", passed=passed)
        ],
        notes=[f"why {name}"],
        date=date,
        seconds=3.0,
        machine=_harness.machine(),
    )


def test_results_round_trip_and_render(tmp_path: Path) -> None:
    results = {
        "overhead": _result("overhead", False, "2026-01-02T00:00:00+00:00"),
        "quality": _result("quality", None, "2026-01-01T00:00:00+00:00"),
    }
    path = tmp_path / "results.json"
    _harness.save_results(results, path)
    loaded = _harness.load_results(path)
    assert loaded == results
    text = _harness.render(loaded, ORDER)
    assert "| `overhead` | speed | 1.50x | - | <= 1.2x | **MISS** |" in text
    assert "| `quality` | speed | 1.50x | - | - | (context) |" in text
    machine = _harness.machine()
    for fact in ("cores", "cpu", "ram_gb", "python", "langgraph"):
        assert f"| {fact} | {machine[fact]} |" in text
    assert "2026-01-02T00:00:00+00:00" in text and "why overhead" in text


def test_prompt_growth_measures_the_real_prompts() -> None:
    bounded = prompt_growth.prompt_sizes("best_and_last")
    everything = prompt_growth.prompt_sizes("all")
    assert bounded[0] == everything[0]  # the first prompt is the task alone
    assert bounded[10] / bounded[2] <= 1.2
    assert everything[10] / everything[2] > 3  # every attempt and its feedback


def test_unknown_benchmark_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["nope"])
    assert info.value.code == 2
    assert "unknown benchmark(s) nope; choose from overhead" in capsys.readouterr().err


def test_quick_run_leaves_results_alone(monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setattr(_harness, "RESULTS_JSON", tmp_path / "results.json")
    monkeypatch.setattr(_harness, "RESULTS_MD", tmp_path / "RESULTS.md")
    assert main(["--quick", "prompt_growth"]) == 0
    assert not (tmp_path / "RESULTS.md").exists()


def test_quality_verdict_reads_the_measured_numbers() -> None:
    from benchmarks import quality

    def columns(default: float, best_of_4: float) -> dict[str, Any]:
        means = {name: [0.5] for name in quality.METHODS}
        means["explore, single"] = [default]
        means["best-of-4 (by hand)"] = [best_of_4]
        return {c: {"means": means} for c in ["SmolLM2 (real)", *quality.SCRIPTED]}

    below = quality.verdict(columns(0.81, 0.85))
    assert "It does not reach best-of-4 on SmolLM2" in below
    assert "0.810 on SmolLM2" in below and "best-of-4 (0.850)" in below
    assert "It reaches best-of-4" in quality.verdict(columns(0.86, 0.85))


# -- strategies: the scripted drive, the statistics and the verdict --------------------------


def test_bootstrap_interval_and_win_tie_loss() -> None:
    from benchmarks import strategies

    low, high = strategies.bootstrap_interval([0.5] * 10)
    assert low == high == 0.5
    values = [0.0, 1.0] * 50
    low, high = strategies.bootstrap_interval(values)
    assert low < 0.5 < high and high - low < 0.3
    runs = [strategies.Run(s, 4) for s in (0.2, 0.6, 0.6)]
    base = [strategies.Run(s, 4) for s in (0.4, 0.6, 0.2)]
    assert strategies.win_tie_loss(runs, base) == (1, 1, 1)


def test_the_scripted_drive_learns_across_tasks_when_warm() -> None:
    from benchmarks import strategies

    weak = strategies.run_scripted(0.05, 0.45, calls=4, repeats=1, tasks=30)
    strong = strategies.run_scripted(0.9, 0.02, calls=4, repeats=1, tasks=30)
    assert all(set(r.moves) == {"sample"} for r in weak["best-of-N"])
    assert all(set(r.moves[1:]) <= {"refine"} for r in weak["chain"])
    # Cold, every run's round 1 refines; warm, later runs on the weak refiner answer
    # afresh from round 1, and on the strong one go on refining.
    assert all(r.moves[1] == "refine" for r in weak["explore, cold"] if len(r.moves) > 1)
    late = [r.moves[1] for r in weak["explore, warm"][10:] if len(r.moves) > 1]
    assert late.count("refine") <= len(late) // 5
    late = [r.moves[1] for r in strong["explore, warm"][10:] if len(r.moves) > 1]
    assert set(late) == {"refine"}
    assert any("guided" in r.moves for r in weak["explore, warm"])
    assert all("guided" not in r.moves for r in weak["explore, warm, sample only"])
    assert all(r.calls <= 4 for arm in weak.values() for r in arm)


def test_scripted_arms_draw_common_random_numbers() -> None:
    from benchmarks import strategies

    # The same move from the same start at the same call of the same run: the same answer;
    # so paired arms differ by their choices, not by unrelated luck.
    task = strategies.ScriptedTask(0.4, 0.2, "seed", p_word=0.5)
    start = frozenset({0, 1})
    for move in ("sample", "refine", "guided"):
        first = task.answer(move, start, frozenset({2, 3}), "task 1", 2)
        assert task.answer(move, start, frozenset({2, 3}), "task 1", 2) == first
    names = [f"task {i}" for i in range(20)]
    assert len({task.answer("sample", start, start, name, 0) for name in names}) > 1
    # Cold explore refines attempt 0 in round 1, as chain does: two calls, the same runs.
    for name in names:
        chain = strategies.scripted_run("chain", task, 2, name, None)
        explore = strategies.scripted_run("explore", task, 2, name, None)
        assert (chain.score, chain.moves) == (explore.score, explore.moves)


def test_a_warm_arm_starts_from_an_unscored_first_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import strategies

    task = strategies.ScriptedTask(0.05, 0.45, "warm-up seed")
    record = strategies.warmed_record("explore", task, calls=4, tasks=20, repeat=0)
    # Twenty runs of four calls at most, attempt 0 included, all in the record.
    assert 20 <= sum(s.rounds for k, s in record.items() if "#" in k) <= 80
    weak = strategies.run_scripted(0.05, 0.45, calls=4, repeats=1, tasks=20)
    assert len(weak["explore, warm"]) == 20  # the warm-up runs are not scored
    # Warm from its first measured run: on a weak refiner round 1 answers afresh at once.
    assert weak["explore, warm"][0].moves[1] != "refine"
    monkeypatch.setattr(strategies, "WARM_UP", False)
    assert strategies.warmed_record("explore", task, calls=4, tasks=20, repeat=0) == {}
    cold_start = strategies.run_scripted(0.05, 0.45, calls=4, repeats=1, tasks=20)
    assert cold_start["explore, warm"][0].moves[1] == "refine"


def test_strategies_verdict_reads_the_measured_numbers() -> None:
    from benchmarks import strategies

    def arms(scores: dict[str, float]) -> Any:
        return {arm: [strategies.Run(scores.get(arm, 0.5), 4)] for arm in strategies.ARMS}

    real = {calls: arms({"explore, warm": 0.9, "best-of-N": 0.8}) for calls in (4, 8)}
    scripted = {("weak", 4): arms({"explore, warm": 0.66, "best-of-N": 0.68, "chain": 0.4})}
    text = strategies.verdict(real, scripted)
    assert "warm explore scores 0.900 against best-of-4 0.800 (chain 0.500" in text
    assert "largest shortfall against the better of chain and best-of-N is -0.020 (weak" in text


def test_edits_benchmark_documents_and_scripted_arms() -> None:
    from benchmarks import edits

    text = edits.document(0)
    assert abs(len(text.split()) - edits.WORDS) < 40  # about 1,500 words
    assert edits.defects_left(text) == list(range(1, edits.DEFECTS + 1))
    assert max(len(line) for line in text.split("\n")) <= 80 + 20
    rewrite, edited = edits.scripted_run(0, edits=False), edits.scripted_run(0, edits=True)
    assert rewrite.score == edited.score == 1.0
    assert set(rewrite.outcomes) == {"rewrite"} and edited.outcomes["applied"] >= 4
    per_round = sum(edited.round_tokens) / len(edited.round_tokens)
    assert per_round / (sum(rewrite.round_tokens) / len(rewrite.round_tokens)) < 0.15


# -- random mixes: the floor and the draws ------------------------------------------------------


def test_the_floor_mixes_arms_per_class_at_the_least_cost_for_a_quality() -> None:
    from benchmarks._mixes import cheapest_mix

    classes = {
        "easy": (0.5, {"cheap": (1.0, 1.0), "strong": (1.0, 10.0)}),
        "hard": (0.5, {"cheap": (0.2, 1.0), "strong": (1.0, 10.0), "worse": (0.1, 5.0)}),
    }
    # Cheap on easy tasks, strong on hard ones reaches 1.0 at (1 + 10) / 2.
    assert cheapest_mix(classes, 1.0) == pytest.approx(5.5)
    # Half way from 0.6 (cheap everywhere) to 1.0: strong on half the hard tasks.
    assert cheapest_mix(classes, 0.8) == pytest.approx(0.5 * 1.0 + 0.5 * (1.0 + 9.0 / 2))
    assert cheapest_mix(classes, 0.3) == pytest.approx(1.0)  # the cheapest already reaches it
    assert cheapest_mix(classes, 2.0) == pytest.approx(5.5)  # capped at the best reachable


def test_random_mixes_are_drawn_from_their_seed_within_the_stated_ranges() -> None:
    from benchmarks import ladder, strategies

    assert ladder.draw_mix(7) == ladder.draw_mix(7) != ladder.draw_mix(8)
    for seed in range(50):
        mix = ladder.draw_mix(seed)
        assert 0.2 <= mix.easy <= 0.8 and 0.3 <= mix.fix <= 0.9 and 5 <= mix.ratio <= 50
        refiner = strategies.draw_refiner(seed)
        assert 0.05 <= refiner.fix <= 0.9 and 0.3 <= refiner.p_word <= 0.6


def test_the_ladder_bench_reads_each_mix_against_its_goals() -> None:
    from benchmarks import ladder

    mix = ladder.draw_mix(ladder.FIRST_SEED)
    verdict = ladder.read_mix(mix, ladder.run_mix(mix, 30))
    assert verdict.q["strong alone"] >= verdict.q["cheap alone"]
    assert verdict.c["cheap alone"] < verdict.c["strong alone"]
    # The floor at the warm ladder's quality is never above strong alone's cost.
    assert verdict.floor <= verdict.c["strong alone"] + 1e-12
    assert len(ladder.row(verdict)) == len(ladder.HEADER)


def test_the_demo_bench_counts_raises_by_refinements_and_by_fresh_answers() -> None:
    from benchmarks import demo

    from langgraph_refine import Attempt, Evaluation

    def scored(index: int, score: float, parent: int | None = None) -> Attempt:
        return Attempt(index=index, response="r", parent=parent, evaluation=Evaluation(score=score))

    # 0.5; a refinement falls (0.4); a fresh answer raises (0.6); a refinement of it raises
    # (0.7); an unevaluated attempt counts for nothing.
    run = [scored(0, 0.5), scored(1, 0.4, 0), scored(2, 0.6), scored(3, 0.7, 2)]
    run.append(Attempt(index=4, response="r", parent=3))
    assert demo.raises(run) == (2, 1, 1, 1)
    assert demo.refinement_raised(run)
    assert not demo.refinement_raised(run[:3])  # only the fresh answer raised
    refined, fresh = demo.floor_figures([demo.raises(run), demo.raises(run[:2])])
    assert (refined.value, refined.spread) == (100 / 3, "1 of 3")
    assert (fresh.value, fresh.spread) == (100.0, "1 of 1")


def test_the_quality_benchs_warm_arm_keeps_one_store_over_its_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import quality
    from benchmarks._harness import run_async
    from benchmarks._scripted_refiner import ScriptedRefiner
    from langgraph.store.memory import InMemoryStore

    stores: list[InMemoryStore] = []

    class Kept(InMemoryStore):
        def __init__(self) -> None:
            super().__init__()
            stores.append(self)

    monkeypatch.setattr(quality, "InMemoryStore", Kept)
    arms = quality.methods()
    assert len(stores) == 1  # the warm arm's, and no other arm's
    model = ScriptedRefiner(p_fix=0.1, p_forget=0.4, seed=0)
    tasks = quality.load_tasks()[:3]
    run_async(quality.run_repeat(model, tasks, {quality.WARM: arms[quality.WARM]}))
    found = stores[0].search(("langgraph_refine", "strategy"), limit=100)
    assert found  # the record the next tasks read
    quality.methods()
    assert len(stores) == 2  # a new column starts from an empty record


def test_the_cascade_bench_prices_and_counts_every_call() -> None:
    from benchmarks import cascade as bench

    task = bench.load_tasks()[3]  # drafts usually miss its word range
    for build in bench.VARIANTS.values():
        outcome = bench.run_task(task, build, 1, {"max_iterations": 4})
        expected = (
            outcome.judge_calls * bench.JUDGE_CALL_COST
            + outcome.writer_calls * bench.WRITER_CALL_COST
        )
        assert outcome.cost == pytest.approx(expected)
        assert 1 <= outcome.writer_calls <= 5
    # The same draft of the wrong length: combine pays the judge, the cascade does not.
    combined = bench.run_task(task, bench.combine, 1, {})
    cascaded = bench.run_task(task, bench.cascade, 1, {})
    assert cascaded.judge_calls < cascaded.writer_calls
    assert combined.judge_calls == combined.writer_calls


def test_the_cascade_bench_writer_and_judge_follow_the_feedback() -> None:
    from benchmarks import cascade as bench
    from langchain_core.messages import HumanMessage

    task = bench.Task(("owl", "lamp"), 10, 20, skill=1.0, fix=1.0)
    judge = bench.Judge()
    rated = "# Task\n" + task.text + "\n<response_to_rate>\nAn owl sat.\n</response_to_rate>"
    reply = json.loads(str(judge.invoke([HumanMessage(rated)]).content))
    assert (reply["score"], reply["verdict"]) == (0.5, "NEEDS_IMPROVEMENT")
    assert reply["feedback"] == 'Missing required words: "lamp". Use each of them.'

    writer = bench.Writer(skill=1.0, seed=0)
    first = str(writer.invoke([HumanMessage(task.text)]).content)
    assert 10 <= bench.count_words(first) <= 20
    refine_prompt = (
        f"# Task\n{task.text}\n<answer>\n{first}\n</answer>\nFeedback on this attempt:\n"
        'Missing required words: "owl", "lamp". Use each of them.\n\n# What to do'
    )
    fixed = [
        str(bench.Writer(seed=s).invoke([HumanMessage(refine_prompt)]).content) for s in range(20)
    ]
    assert sum({"owl", "lamp"} <= bench._words(f) for f in fixed) >= 10
    assert all(bench.count_words(f) == bench.count_words(first) for f in fixed)  # length kept
    assert task.quality(first) < 1.0 <= task.quality("owl lamp " + " ".join(["x"] * 10))


def test_the_faults_bench_counts_what_the_server_received() -> None:
    from benchmarks import faults
    from benchmarks._fault_proxy import Received

    from langgraph_refine import Attempt, RefineResult

    attempt = Attempt(index=0, response="a", evaluation={"score": 0.5})
    state = {"task": "t", "attempts": [attempt], "usage": {"calls": 2}, "stop_reason": "plateau"}
    paid = RefineResult.from_state(state)

    def sent(*times: tuple[float, float, str]) -> list[Received]:
        return [Received("r", "draft", "", at, ended, outcome) for at, ended, outcome in times]

    answered = (1.0, 1.1, "answered")
    outcomes = [
        # finished at 5 s, its 2 requests reported
        faults.Outcome("a", paid, None, 5.0, 5.0, sent(answered, answered)),
        # raised without .result after a paid reply; 12 requests (2 over max_calls)
        faults.Outcome("b", None, RuntimeError("x"), 1.0, 5.0, sent(*[answered] * 12)),
        # raised at once, nothing paid: no .result to keep
        faults.Outcome("c", None, RuntimeError("x"), 0.1, 5.0, sent((1.0, 1.2, "failed"))),
        # raised with .result reporting 2 of its 4 requests: one still open at the return,
        # one arriving after it and answered (paid for nothing); 4.7 s past max_seconds
        faults.Outcome(
            "d", paid, RuntimeError("x"), faults.MAX_SECONDS + 4.7, 5.0,
            sent(answered, answered, (4.9, 0.0, ""), (6.0, 6.1, "answered")),
        ),
    ]  # fmt: skip
    counts = faults.tally(outcomes)
    assert (counts["finished"], counts["raised"], counts["raised with .result"]) == (1, 3, 1)
    assert counts["raised without .result after a paid reply"] == 1
    assert counts["requests"] == 2 + 12 + 1 + 4
    assert counts["requests over max_calls"] == 2 and counts["runs over max_calls"] == 1
    assert counts["requests missing from usage"] == 2  # only runs with a result are read
    assert counts["requests after return"] == 1 and counts["replies paid after return"] == 1
    assert counts["requests left open"] == 1
    assert counts["overshoot"] == pytest.approx(4.7)
    worst = faults.worst_overshoot(outcomes)  # its timeline, from its start: 5.0 - 8.7 s
    assert worst.startswith(f"The run that ended latest: `d` raised RuntimeError after {8.7:.2f} s")
    assert "draft ok at 8.60 s (never ended), draft ok at 9.70 s (answered at 9.80 s)" in worst
    names = [f.name for f in faults.figures([counts], [])]
    assert [f.passed for f in faults.figures([counts], [])] == [False] * 5 + [False, True]
    assert names[0] == "requests over max_calls (all runs)"


def test_the_same_seed_draws_the_same_faults_on_every_path() -> None:
    from benchmarks._fault_proxy import FAULTS, Schedule

    def draws(seed: int) -> list[tuple[str, float]]:
        schedule = Schedule(rate=0.3, seed=seed)
        return [schedule.next(kind) for kind in ["draft", "judge"] * 50]

    assert draws(4) == draws(4) != draws(5)
    faults = [fault for fault, _ in draws(4) if fault]
    assert 15 <= len(faults) <= 45 and set(faults) <= set(FAULTS)
    held = Schedule(hold_at=3, hold_for=7.0)
    assert [held.next("draft") for _ in range(4)] == [("", 0.0), ("", 0.0), ("", 7.0), ("", 0.0)]


@pytest.mark.parametrize(
    ("fault", "status"),
    [("500", 500), ("429", 429), ("408", 408), ("malformed", 200), ("unreadable", 200)],
)
def test_the_fault_server_answers_with_its_fault(fault: str, status: int) -> None:
    import httpx
    from benchmarks._fault_proxy import UNREADABLE, FaultProxy, Schedule

    with FaultProxy().serve() as proxy:
        proxy.schedules["m"] = Schedule(always={"judge": fault})
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(
            f"{proxy.base_url}/chat/completions", json={**body, "response_format": {}}
        )
        assert reply.status_code == status
        if fault == "429":
            assert reply.headers["retry-after"] == "1"
        if fault == "malformed":
            with pytest.raises(json.JSONDecodeError):
                reply.json()
        if fault == "unreadable":
            assert reply.json()["choices"][0]["message"]["content"] == UNREADABLE
        draft = httpx.post(f"{proxy.base_url}/chat/completions", json=body)  # drafts: no fault
        assert draft.json()["choices"][0]["message"]["content"].startswith("The sea, draft 0.")
        assert [(r.kind, r.fault) for r in proxy.of("m")] == [("judge", fault), ("draft", "")]
        paid = "answered" if fault == "unreadable" else "failed"  # a completion, unreadable
        # The server notes an outcome once its reply is written: the client may read it first.
        deadline = time.monotonic() + 5
        while any(not r.outcome for r in proxy.of("m")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [r.outcome for r in proxy.of("m")] == [paid, "answered"]


@pytest.mark.parametrize("fault", ["reset", "truncated", "hang"])
def test_the_fault_server_breaks_the_connection(
    fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    from benchmarks import _fault_proxy
    from benchmarks._fault_proxy import FaultProxy, Schedule

    monkeypatch.setattr(_fault_proxy, "HANG", 0.3)
    with FaultProxy().serve() as proxy:
        proxy.schedules["m"] = Schedule(always={"draft": fault})
        started = time.monotonic()
        with pytest.raises(httpx.TransportError):
            httpx.post(f"{proxy.base_url}/chat/completions", json={"model": "m", "messages": []})
        assert (time.monotonic() - started >= 0.3) == (fault == "hang")
        assert [r.fault for r in proxy.of("m")] == [fault]


def test_the_fault_server_sees_a_client_close_a_held_request() -> None:
    import httpx
    from benchmarks._fault_proxy import FaultProxy, Schedule

    with FaultProxy().serve() as proxy:
        proxy.schedules["m"] = Schedule(hold_at=1, hold_for=10)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                f"{proxy.base_url}/chat/completions",
                json={"model": "m", "messages": []},
                timeout=0.3,
            )
        closed = time.monotonic()
        (request,) = proxy.of("m")
        assert proxy.schedules["m"].held.is_set()
        deadline = closed + 2
        while not request.outcome and time.monotonic() < deadline:
            time.sleep(0.02)
        assert request.outcome == "client gone" and request.ended - closed < 0.5


@pytest.mark.parametrize(
    ("client", "path"), [("openai", "graph"), ("openai", "agent"), ("anthropic", "graph")]
)
def test_the_faults_bench_counts_a_real_run_through_the_server(client: str, path: str) -> None:
    from benchmarks import faults
    from benchmarks._fault_proxy import FaultProxy

    pytest.importorskip(f"langchain_{client}")  # the test extra brings both
    with FaultProxy().serve() as proxy:
        outcome = faults.run_sync(path, proxy.url, f"clean-{path}", client=client)
        outcome.requests = proxy.of(outcome.run)
    assert outcome.error is None and outcome.result is not None
    # Without faults: five drafts and five judgments, each one request, all reported.
    assert [r.kind for r in outcome.requests] == ["draft", "judge"] * 5
    counts = faults.tally([outcome])
    assert counts["requests"] == outcome.result.usage.calls == faults.MAX_CALLS
    assert counts["requests missing from usage"] == counts["requests after return"] == 0
    assert counts["requests left open"] == 0


@pytest.mark.parametrize("path", ["graph", "agent"])
def test_the_faults_bench_times_a_cancel_inside_a_request(path: str) -> None:
    from benchmarks import faults
    from benchmarks._fault_proxy import FaultProxy

    with FaultProxy().serve() as proxy:
        seconds, later = _harness.run_async(faults.cancelled(proxy, path, "openai"))
        requests = proxy.of(f"cancel-openai-{path}")
    # Cancelled inside the second draft, which the server held: it saw the client close it.
    assert [(r.kind, r.outcome) for r in requests] == [
        ("draft", "answered"),
        ("judge", "answered"),
        ("draft", "client gone"),
    ]
    assert 0 <= seconds <= faults.CANCEL_WITHIN and later == 0


@pytest.mark.slow
@pytest.mark.parametrize("saver", ["sqlite", "postgres"])
def test_the_faults_bench_kills_a_real_process_and_counts_its_repeats(
    saver: str, tmp_path: Path
) -> None:
    from benchmarks import faults
    from benchmarks._fault_proxy import FaultProxy

    with FaultProxy().serve() as proxy:
        clean = faults.clean_requests(proxy, "agent")
        workers = faults.Workers()
        try:
            kill = faults.kill_and_resume(proxy, workers, "agent", saver, 3, clean, tmp_path)
        finally:
            workers.close()
    assert clean == faults.MAX_CALLS
    assert kill.finished and 1 <= kill.at <= clean
    # The killed request reached the server; the resume sends it again, nothing more.
    assert kill.requests == clean + kill.repeats and kill.repeats <= 1
