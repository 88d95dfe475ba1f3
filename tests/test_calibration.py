"""A judge you can calibrate: the threshold statistics, the calibrated verdict, the loop's use.

`evaluators.calibrate` chooses the score a PASS needs from people's labels (a held-out
upper confidence bound on the false-PASS rate at most `alpha`); the loop's result says
whether its PASS was calibrated, `require_calibration` trusts no other, the human
reviews of the graph and the agent become labels, and a refinement that breaks a
criterion its parent passed is told so.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from langgraph_refine import Evaluation, RefineMiddleware, create_refine_graph, evaluators, refine
from langgraph_refine.evaluators import CalibratedEvaluator, CalibrationWarning
from langgraph_refine.evaluators._agreement import (
    agreement,
    choose_threshold,
    held_out,
    upper_bound,
)
from tests.fakes import AgentModel, ScriptedChatModel, judge_reply, lookup

THRESHOLD = 0.8  # 32 words: the strictest of the folds' choices (people pass 31 and more)


def lengths(response: str, state: Any) -> float:
    """A judge scoring by length: 40 words or more is a full score."""
    return min(1.0, len(response.split()) / 40)


def word_labels(n: int = 60, line: int = 30) -> list[dict[str, Any]]:
    """People pass responses of more than `line` words."""
    return [{"task": "t", "response": "good " * i, "passed": i > line} for i in range(n)]


# -- the statistics ------------------------------------------------------------------------


def test_the_upper_bound_is_clopper_pearson() -> None:
    # No errors in n trials: the bound is 1 - (1 - confidence)^(1/n), exactly.
    for n in (5, 22, 100):
        assert upper_bound(0, n, 0.9) == pytest.approx(1 - 0.1 ** (1 / n), abs=1e-9)
    assert upper_bound(3, 3, 0.9) == 1.0 and upper_bound(0, 0, 0.9) == 1.0
    assert upper_bound(2, 50, 0.9) > 2 / 50  # an upper bound sits above the rate seen
    assert upper_bound(2, 50, 0.95) > upper_bound(2, 50, 0.9)


def test_agreement_counts_kappa_and_both_error_rates() -> None:
    judge = [True, True, True, False, False, False]
    person = [True, True, False, False, False, True]
    a = agreement(judge, person)
    assert (a.n, a.passes, a.false_passes) == (6, 3, 1)
    assert a.accuracy == pytest.approx(4 / 6)
    assert a.false_pass == pytest.approx(1 / 3) and a.false_fail == pytest.approx(1 / 3)
    assert a.kappa == pytest.approx((4 / 6 - 0.5) / 0.5)


def test_in_sample_would_pass_but_the_bound_refuses() -> None:
    # Ten clean passes: no false PASS in sample, but ten passes cannot show <= 10%.
    scores = [0.9] * 10 + [0.2] * 10
    person = [True] * 10 + [False] * 10
    assert agreement([s >= 0.9 for s in scores], person).false_pass == 0.0
    assert upper_bound(0, 10, 0.9) > 0.1
    assert choose_threshold(scores, person, alpha=0.1, confidence=0.9) is None
    with pytest.warns(CalibrationWarning, match=r"alpha=0.1 not met .* bound 0.21 at threshold"):
        calibrated = evaluators.calibrate(
            lambda response, state: 0.9 if response.startswith("good") else 0.2,
            [{"task": "t", "response": f"good {i}", "passed": True} for i in range(10)]
            + [{"task": "t", "response": f"bad {i}", "passed": False} for i in range(10)],
        )
    report = calibrated.report
    assert report.met is False and calibrated.threshold is None
    assert report.candidate is None
    # The best bound reached, with its threshold: not a placeholder of 1.0.
    assert report.bound == upper_bound(0, 10, 0.9) and report.best_threshold == 0.9
    assert report.bound_held_out is False
    # A judge that separates, short of labels: told about how many more.
    assert report.diagnosis == "too_few_labels"
    assert "only 10 labels score 0.90 or more" in report.advice
    assert "Add about 36 more labels (about 18 more" in report.advice
    # It never passes: not even a perfect score.
    assert calibrated.evaluate("good 0", {"task": "t"}).verdict == "NEEDS_IMPROVEMENT"


def test_the_threshold_is_the_lowest_of_the_first_run_meeting_the_bound() -> None:
    scores = [0.95] * 30 + [0.7] * 10 + [0.5] * 10
    person = [True] * 30 + [False] * 10 + [True] * 10
    # 0.95 meets the bound; 0.7 adds ten false passes; 0.5's lower rate does not count.
    assert choose_threshold(scores, person, alpha=0.1, confidence=0.9) == 0.95


def test_the_held_out_check_chooses_on_training_folds_and_counts_on_the_rest() -> None:
    scores = [i / 100 for i in range(100)]
    person = [i > 40 for i in range(100)]
    checked = held_out(scores, person, alpha=0.1, confidence=0.9, folds=5)
    assert checked.folds == 5 and len(checked.thresholds) == 5
    # Each fold's threshold was chosen without it; a few false passes are within alpha.
    assert all(t is not None and 0.3 < t <= 0.45 for t in checked.thresholds)
    assert checked.passes >= 55 and checked.false_passes / checked.passes <= 0.1
    assert checked.bound == upper_bound(checked.false_passes, checked.passes, 0.9)


def test_too_few_labels_is_met_false_with_a_warning() -> None:
    with pytest.warns(CalibrationWarning, match=r"n=4"):
        calibrated = evaluators.calibrate(lengths, word_labels(4, 1))
    assert calibrated.report.met is False and calibrated.report.n == 4


# -- calibrate -----------------------------------------------------------------------------


def test_calibrate_reports_agreement_and_the_threshold() -> None:
    calibrated = evaluators.calibrate(lengths, word_labels(), alpha=0.1)
    report = calibrated.report
    assert report.met and calibrated.threshold == pytest.approx(THRESHOLD)
    assert (report.n, report.alpha, report.confidence) == (60, 0.1, 0.9)
    assert report.bound <= 0.1 and report.folds == 5 and report.rule_alpha == 0.1
    assert report.candidate == pytest.approx(31 / 40)  # all labels' choice; a fold's is stricter
    assert report.accuracy == pytest.approx(59 / 60) and 0.9 < report.kappa < 1.0
    assert report.false_pass == 0.0 and report.false_fail == pytest.approx(1 / 32)
    # The judge alone passes only a full score (no verdict): it fails people's 31-39 words.
    assert report.judge["false_fail"] > 0 and report.judge["kappa"] < 1.0
    assert report.curve[0].threshold == 0.0 and report.curve[-1].threshold == 1.0


def test_the_calibrated_verdict_is_the_threshold() -> None:
    calibrated = evaluators.calibrate(lengths, word_labels())
    threshold = calibrated.threshold
    assert threshold is not None
    at = calibrated.evaluate("good " * 32, {"task": "t"})
    below = calibrated.evaluate("good " * 31, {"task": "t"})
    assert (at.verdict, below.verdict) == ("PASS", "NEEDS_IMPROVEMENT")
    assert at.details["calibration"] == calibrated.report.summary()
    assert set(at.details["calibration"]) == {"n", "kappa", "alpha", "threshold", "bound", "met"}


def test_a_judge_pass_under_the_threshold_is_not_a_pass_and_a_fail_stays_a_fail() -> None:
    def verdicts(response: str, state: Any) -> Evaluation:
        score = float(response)
        verdict = "PASS" if score >= 0.5 else "FAIL" if score < 0.2 else "NEEDS_IMPROVEMENT"
        return Evaluation(score=score, verdict=verdict, feedback="fine")

    labels = [
        {"task": "t", "response": str(i / 100), "passed": i >= 80} for i in range(0, 100, 2)
    ] * 3
    calibrated = evaluators.calibrate(verdicts, labels)
    assert calibrated.threshold == 0.8
    judged = calibrated.evaluate("0.6", {"task": "t"})
    assert judged.verdict == "NEEDS_IMPROVEMENT" and judged.score == 0.6
    # Told to improve, never shown the calibration's internals (its threshold).
    assert judged.feedback == "fine\n(Not passed yet: make it clearly better.)"
    assert calibrated.evaluate("0.1", {"task": "t"}).verdict == "FAIL"
    assert calibrated.evaluate("0.9", {"task": "t"}).verdict == "PASS"
    # The judge alone passed everything at 0.5 or more: false passes people would not make.
    assert calibrated.report.judge["false_pass"] > 0.3


def test_judge_calls_are_counted_and_each_distinct_response_is_judged_once() -> None:
    judge_model = ScriptedChatModel(
        replies=[
            lambda messages: judge_reply(
                0.9 if "good" in str(messages[-1].content) else 0.3,
                "PASS" if "good" in str(messages[-1].content) else "NEEDS_IMPROVEMENT",
            )
        ]
    )
    labels = [{"task": "t", "response": f"good {i}", "passed": True} for i in range(30)]
    labels += [{"task": "t", "response": f"bad {i}", "passed": False} for i in range(10)]
    calibrated = evaluators.calibrate(evaluators.llm_judge(judge_model), labels + labels[:5])
    assert len(judge_model.calls) == 40  # the five repeated labels were judged once
    assert calibrated.report.usage.calls == 40
    assert calibrated.report.usage.total_tokens == 40 * 15
    assert calibrated.report.n == 45 and calibrated.threshold == 0.9


def test_a_budget_leaves_the_labels_past_it_unjudged() -> None:
    judge_model = ScriptedChatModel(replies=[judge_reply(0.9, "PASS")])
    labels = [{"task": "t", "response": f"r{i}", "passed": True} for i in range(10)]
    with pytest.warns(CalibrationWarning):
        calibrated = evaluators.calibrate(
            evaluators.llm_judge(judge_model), labels, budget=evaluators_budget(3)
        )
    assert calibrated.report.usage.calls == 3
    assert (calibrated.report.n, calibrated.report.unjudged) == (3, 7)


def evaluators_budget(calls: int) -> Any:
    from langgraph_refine import Budget

    return Budget(max_calls=calls)


def test_an_async_judge_is_awaited() -> None:
    async def judge(response: str, state: Any) -> float:
        return lengths(response, state)

    calibrated = asyncio.run(evaluators.acalibrate(judge, word_labels()))
    assert calibrated.threshold == pytest.approx(THRESHOLD) and calibrated.is_async


def test_per_criterion_agreement_from_a_checklist_style_judge() -> None:
    def checks(response: str, state: Any) -> Evaluation:
        short = len(response) < 10
        items = [
            {"criterion": "Short", "passed": short},
            {"criterion": "Rhymes", "passed": True},  # a lenient grader
        ]
        return Evaluation(score=(short + 1) / 2, details={"criteria": items})

    labels = [
        {"task": "t", "response": text, "passed": False, "criteria": {"short": short, "Rhymes": rh}}
        for text, short, rh in [
            ("a rhyme", True, True),
            ("no", True, False),
            ("long " * 5, False, False),
        ]
    ]
    with pytest.warns(CalibrationWarning):
        report = evaluators.calibrate(checks, labels).report
    assert report.criteria["short"] == {"n": 3, "accuracy": 1.0, "kappa": 1.0}
    assert report.criteria["Rhymes"]["accuracy"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([], "no labels to calibrate with"),
        ([{"task": "t", "response": "r"}], r"label 1 has no 'passed'"),
        ([{"task": "t", "passed": True}], r"label 1 has no 'response'"),
        ([{"task": "t", "response": "r", "passed": "yes"}], "'passed' must be true or false"),
        (
            [{"task": "t", "response": "r", "passed": True, "criteria": ["x"]}],
            "'criteria' must map",
        ),
        ({"task": "t", "response": "r", "passed": True}, "wrap it in a list"),
    ],
)
def test_bad_labels_are_refused_clearly(labels: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evaluators.calibrate(lengths, labels)


@pytest.mark.parametrize("alpha", [0, 1, 1.5, -0.1, True, "0.1"])
def test_alpha_must_lie_strictly_between_0_and_1(alpha: Any) -> None:
    with pytest.raises(ValueError, match="alpha must be a number strictly between 0 and 1"):
        evaluators.calibrate(lengths, word_labels(), alpha=alpha)


def test_labels_from_jsonl_and_their_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(label) for label in word_labels()) + "\n\n")
    assert evaluators.calibrate(lengths, path).threshold == pytest.approx(THRESHOLD)
    assert evaluators.calibrate(lengths, str(path)).report.n == 60
    path.write_text(json.dumps(word_labels(1)[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"labels.jsonl line 2 is not JSON"):
        evaluators.read_labels(path)
    with pytest.raises(ValueError, match="does not exist"):
        evaluators.read_labels(tmp_path / "missing.jsonl")


def test_labels_from_a_langsmith_dataset() -> None:
    class Example:
        def __init__(self, i: int) -> None:
            self.id = i
            self.inputs = {"task": "t"}
            self.outputs = {"response": "good " * i, "passed": i > 30}

    class Client:
        def list_examples(self, dataset_name: str) -> list[Example]:
            assert dataset_name == "judged"
            return [Example(i) for i in range(60)]

    labels = evaluators.langsmith_labels("judged", client=Client())
    assert evaluators.calibrate(lengths, labels).threshold == pytest.approx(THRESHOLD)


def test_a_calibration_file_round_trips_and_a_bad_file_is_named(tmp_path: Path) -> None:
    calibrated = evaluators.calibrate(lengths, word_labels())
    path = tmp_path / "calibration.json"
    calibrated.save(path)
    loaded = CalibratedEvaluator.load(path, lengths)
    assert loaded.report == calibrated.report
    assert loaded.evaluate("good " * 35, {}).verdict == "PASS"
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match="is not a calibration file"):
        CalibratedEvaluator.load(tmp_path / "other.json", lengths)
    with pytest.raises(ValueError, match="does not exist"):
        CalibratedEvaluator.load(tmp_path / "none.json", lengths)


def test_recalibrating_a_calibrated_judge_calibrates_the_judge_underneath() -> None:
    first = evaluators.calibrate(lengths, word_labels())
    again = evaluators.calibrate(first, word_labels(90, line=35))
    assert again.judge is first.judge
    assert first.threshold is not None and again.threshold is not None
    assert again.threshold > first.threshold  # the people's line moved up: so did the PASS


# -- the loop uses it -----------------------------------------------------------------------


def test_refine_says_its_pass_was_calibrated() -> None:
    calibrated = evaluators.calibrate(lengths, word_labels())
    drafts = iter(["good " * 10, "good " * 32])
    result = refine(lambda state: next(drafts), "t", calibrated, max_iterations=3)
    assert result.stop_reason == "passed" and result.verdict == "PASS"
    assert result.metadata["calibration"] == calibrated.report.summary()
    plain = refine(lambda state: "x", "t", lambda r, s: 1.0)
    assert "calibration" not in plain.metadata and "untrusted_pass" not in plain.metadata


def test_require_calibration_refuses_an_uncalibrated_pass_in_the_graph() -> None:
    def lenient(response: str, state: Any) -> Evaluation:
        return Evaluation(score=0.95, verdict="PASS", feedback="great")

    result = refine(
        lambda state: "draft",
        "t",
        lenient,
        require_calibration=True,
        max_iterations=2,
        patience=None,
    )
    assert result.stop_reason == "max_iterations" and result.iterations == 2
    assert result.value == "draft"
    assert result.metadata["untrusted_pass"] == [{"attempt": i, "stop": "passed"} for i in range(3)]
    # Without the option the same judge stops at once.
    assert refine(lambda state: "draft", "t", lenient).stop_reason == "passed"


def test_require_calibration_refuses_a_target_stop_and_trusts_a_calibrated_pass() -> None:
    scored = refine(
        lambda state: "d",
        "t",
        lambda r, s: 0.95,
        require_calibration=True,
        max_iterations=1,
        patience=None,
    )
    assert scored.stop_reason == "max_iterations"
    assert scored.metadata["untrusted_pass"][0]["stop"] == "target_reached"
    calibrated = evaluators.calibrate(lengths, word_labels())
    drafts = iter(["good " * 10, "good " * 38, "good " * 39])
    result = refine(
        lambda state: next(drafts),
        "t",
        calibrated,
        require_calibration=True,
        target_score=0.2,
        max_iterations=3,
    )
    # The first draft reached the target (0.25 >= 0.2) but no calibrated PASS: refused.
    assert result.stop_reason == "passed" and result.iterations == 1
    assert result.metadata["untrusted_pass"] == [{"attempt": 0, "stop": "target_reached"}]
    assert result.metadata["calibration"]["threshold"] == pytest.approx(THRESHOLD)


def test_require_calibration_is_a_run_context_option() -> None:
    graph = create_refine_graph(lambda state: "d", lambda r, s: 1.0, max_iterations=1).compile(
        checkpointer=InMemorySaver()
    )
    config = thread()
    graph.invoke({"task": "t"}, config, context={"require_calibration": True})
    assert graph.get_state(config).values["stop_reason"] == "max_iterations"
    with pytest.raises(ValueError, match="require_calibration must be True or False"):
        graph.invoke({"task": "t"}, thread(), context={"require_calibration": "yes"})


def agent_with(middleware: RefineMiddleware, replies: list[str], **kwargs: Any) -> Any:
    return create_agent(
        AgentModel(replies=replies), tools=[lookup], middleware=[middleware], **kwargs
    )


def test_the_agent_says_its_pass_was_calibrated_and_requires_calibration() -> None:
    calibrated = evaluators.calibrate(lengths, word_labels())
    middleware = RefineMiddleware(calibrated, max_iterations=3)
    state = agent_with(middleware, ["good " * 5, "good " * 33]).invoke(
        {"messages": [HumanMessage("t")]}
    )
    result = middleware.result(state)
    assert result.stop_reason == "passed" and result.iterations == 1
    assert result.metadata["calibration"] == calibrated.report.summary()

    strict = RefineMiddleware(
        lambda r, s: Evaluation(score=1.0, verdict="PASS"),
        require_calibration=True,
        max_iterations=1,
        patience=None,
    )
    state = agent_with(strict, ["first", "second"]).invoke({"messages": [HumanMessage("t")]})
    result = strict.result(state)
    assert result.stop_reason == "max_iterations" and result.iterations == 1
    assert [n["attempt"] for n in result.metadata["untrusted_pass"]] == [0, 1]


# -- human reviews become labels --------------------------------------------------------------


def judged(response: str, state: Any) -> Evaluation:
    return Evaluation(score={"a": 0.6, "b": 0.4}.get(response, 0.3), feedback="more")


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def test_graph_reviews_become_labels_in_its_store() -> None:
    store = InMemoryStore()
    graph = create_refine_graph(
        ScriptedChatModel(replies=["a", "b", "c"]),
        judged,
        human_review="final",
        max_iterations=1,
        patience=None,
    ).compile(checkpointer=InMemorySaver(), store=store)
    config = thread()
    graph.invoke({"task": "Write a tagline."}, config)
    graph.invoke(Command(resume={"action": "revise", "feedback": "shorter"}), config)
    graph.invoke(Command(resume={"action": "approve"}), config)
    labels = evaluators.store_labels(store)
    assert [(label.task, label.response, label.passed) for label in labels] == [
        ("Write a tagline.", "a", False),  # revised: not passed
        ("Write a tagline.", "c", True),  # the revision shown, approved
    ]
    # A review answered again after a resume (same thread, attempt) is one label.
    other = thread()
    graph.invoke({"task": "Second."}, other)
    graph.invoke(Command(resume={"decisions": [{"type": "reject"}]}), other)
    assert [(label.task, label.passed) for label in evaluators.store_labels(store)][-1] == (
        "Second.",
        False,
    )
    assert len(evaluators.store_labels(store)) == 3


def test_agent_reviews_become_labels_in_its_store() -> None:
    store = InMemoryStore()
    middleware = RefineMiddleware(judged, human_review="final", max_iterations=1, patience=None)
    agent = agent_with(middleware, ["a", "b"], checkpointer=InMemorySaver(), store=store)
    config = thread()
    agent.invoke({"messages": [HumanMessage("Write a tagline.")]}, config)
    agent.invoke(Command(resume={"action": "edit", "response": "mine"}), config)
    labels = evaluators.store_labels(store)
    assert [(label.task, label.response, label.passed) for label in labels] == [
        ("Write a tagline.", "a", False)  # edited: the attempt shown did not pass
    ]


def test_no_store_no_record_and_the_review_still_works() -> None:
    graph = create_refine_graph(
        lambda state: "a", judged, human_review="final", max_iterations=0
    ).compile(checkpointer=InMemorySaver())
    config = thread()
    graph.invoke({"task": "t"}, config)
    graph.invoke(Command(resume={"action": "approve"}), config)
    assert graph.get_state(config).values["stop_reason"] == "approved"


# -- regressions named ----------------------------------------------------------------------


def test_a_refinement_that_breaks_a_criterion_its_parent_passed_is_told_so() -> None:
    def checks(response: str, state: Any) -> Evaluation:
        items = [
            {"criterion": "Cites a source", "passed": "source" in response},
            {"criterion": "Under 5 words", "passed": len(response.split()) < 5},
        ]
        met = sum(item["passed"] for item in items)
        failing = [item["criterion"] for item in items if not item["passed"]]
        return Evaluation(
            score=met / 2, feedback="Missing: " + ", ".join(failing), details={"criteria": items}
        )

    model = ScriptedChatModel(
        replies=["short, no cite", "a long answer that cites a source now", "final"]
    )
    result = refine(model, "t", checks, max_iterations=2, patience=None, strategy="chain")
    second = result.attempts[1]
    assert second.evaluation is not None
    assert second.evaluation.details["regressions"] == ["Under 5 words"]
    assert "It passed before: Under 5 words" in second.evaluation.feedback
    assert "It passed before: Under 5 words" in model.prompts[2]  # the next round is told
    assert "It passed before" not in (result.attempts[0].evaluation.feedback or "")


def test_a_served_graph_takes_its_judges_calibration_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from langchain_openai import ChatOpenAI

    from langgraph_refine.server import build_graph

    monkeypatch.setenv("OPENAI_API_KEY", "local")
    report = evaluators.calibrate(lengths, word_labels()).report
    # The served judge: the LLM judge on REFINE_MODEL.
    served = evaluators.llm_judge(ChatOpenAI(model="my-model"))
    CalibratedEvaluator(served, report).save(tmp_path / "judge.json", judge_spec="judge")
    environ = {"REFINE_MODEL": "my-model", "REFINE_CALIBRATION": str(tmp_path / "judge.json")}
    node = build_graph(environ=environ).get_graph().nodes["evaluate"].data
    judge = node.evaluator  # type: ignore[union-attr]
    assert isinstance(judge, CalibratedEvaluator) and judge.report == report
    # Another judge's calibration is refused when the graph is built: other checks, or
    # the LLM judge on another model.
    evaluators.calibrate(lengths, word_labels()).save(tmp_path / "words.json")
    with pytest.raises(ValueError, match="evaluator: calibrated with 'lengths'"):
        build_graph(environ={**environ, "REFINE_CALIBRATION": str(tmp_path / "words.json")})
    other = evaluators.llm_judge(ChatOpenAI(model="other-model"))
    CalibratedEvaluator(other, report).save(tmp_path / "other.json", judge_spec="judge")
    with pytest.raises(ValueError, match="model: calibrated with 'openai:other-model'"):
        build_graph(environ={**environ, "REFINE_CALIBRATION": str(tmp_path / "other.json")})
    with pytest.raises(ValueError, match=r"REFINE_CALIBRATION: calibration file .* does not exist"):
        build_graph(environ={**environ, "REFINE_CALIBRATION": str(tmp_path / "none.json")})


def test_the_calibration_benchmark_judges_have_their_faults() -> None:
    import random

    from benchmarks import calibration as bench

    rng = random.Random(0)
    middling = bench.response(rng, 0.55)
    assert not bench.person_passes(bench.response(random.Random(1), 0.5))
    assert bench.judge_for("lenient")(middling, None).verdict == "PASS"
    assert bench.judge_for("harsh")(bench.response(rng, 0.8), None).verdict != "PASS"
    first, last = "resp|0.6000|0.5000|1|0.1", "resp|0.6000|0.5000|0|0.1"
    biased = bench.judge_for("position-biased")
    assert biased(first, None).score - biased(last, None).score == pytest.approx(0.25, abs=0.15)
    pool = [bench.response(rng, rng.random()) for _ in range(400)]
    outcome, calibrated = bench.one_split("lenient", pool, rng, 300)
    assert outcome.judge_fp > bench.ALPHA  # the lenient judge alone passes what people fail
    assert outcome.met == calibrated.report.met
    assert outcome.met and outcome.calibrated_fp <= bench.ALPHA


def checklist_reply(*passed: bool) -> str:
    items = [
        {"number": i + 1, "gap": "" if ok else "missing", "passed": ok}
        for i, ok in enumerate(passed)
    ]
    return json.dumps({"criteria": items})


def test_a_checklist_judge_names_the_criterion_a_refinement_broke() -> None:
    grader = ScriptedChatModel(
        replies=[
            checklist_reply(True, False),
            checklist_reply(False, True),
            checklist_reply(True, True),
        ]
    )
    judge = evaluators.checklist(grader, ["Cites a source", "Under 50 words"])
    writer = ScriptedChatModel(replies=["first", "second", "third"])
    result = refine(writer, "t", judge, max_iterations=2, patience=None, strategy="chain")
    assert [a.score for a in result.attempts] == [0.5, 0.5, 1.0]
    second = result.attempts[1].evaluation
    assert second is not None and second.details["regressions"] == ["Cites a source"]
    assert "It passed before: Cites a source" in writer.prompts[2]


def test_the_agent_is_told_which_criterion_its_answer_broke() -> None:
    verdicts = iter([(True, False), (False, True), (True, True)])

    def checks(response: str, state: Any) -> Evaluation:
        first, second = next(verdicts)
        items = [
            {"criterion": "Cites a source", "passed": first},
            {"criterion": "Under 50 words", "passed": second},
        ]
        return Evaluation(score=(first + second) / 2, details={"criteria": items})

    model = AgentModel(replies=["first", "second", "third"])
    middleware = RefineMiddleware(checks, max_iterations=2, patience=None)
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("t")]})
    assert middleware.result(state).attempts[1].evaluation.details["regressions"] == [  # type: ignore[union-attr]
        "Cites a source"
    ]
    assert "It passed before: Cites a source" in str(model.calls[2][-1].content)


def test_an_async_run_with_a_reviewer_keeps_the_review_in_its_store() -> None:
    from langgraph_refine import arefine

    store = InMemoryStore()
    result = asyncio.run(
        arefine(
            lambda state: "draft",
            "Write it.",
            judged,
            human_review="final",
            max_iterations=0,
            checkpointer=InMemorySaver(),
            thread_id="one",
            store=store,
            reviewer=lambda payload: {"action": "reject"},
        )
    )
    assert result.stop_reason == "rejected"
    labels = evaluators.store_labels(store)
    assert [(label.response, label.passed) for label in labels] == [("draft", False)]


def test_each_request_of_a_chat_thread_keeps_its_own_review() -> None:
    store = InMemoryStore()
    middleware = RefineMiddleware(judged, human_review="final", max_iterations=0)
    agent = agent_with(middleware, ["a", "b"], checkpointer=InMemorySaver(), store=store)
    config = thread()
    for request in ("First request.", "Second request."):
        agent.invoke({"messages": [HumanMessage(request)]}, config)
        agent.invoke(Command(resume={"action": "approve"}), config)
    labels = evaluators.store_labels(store)
    assert [(label.task, label.passed) for label in labels] == [
        ("First request.", True),
        ("Second request.", True),
    ]


def test_the_stop_event_carries_the_calibration() -> None:
    calibrated = evaluators.calibrate(lengths, word_labels())
    drafts = iter(["good " * 10, "good " * 33])
    graph = create_refine_graph(lambda state: next(drafts), calibrated, max_iterations=2).compile()
    events = [e for e in graph.stream({"task": "t"}, stream_mode="custom") if e["type"] == "stop"]
    assert events[0]["stop_reason"] == "passed"
    assert events[0]["calibration"] == calibrated.report.summary()
    plain = create_refine_graph(lambda state: "x", lambda r, s: 1.0).compile()
    stop = [e for e in plain.stream({"task": "t"}, stream_mode="custom") if e["type"] == "stop"]
    assert "calibration" not in stop[0] and "untrusted_pass" not in stop[0]


def test_an_async_judge_is_calibrated_with_acalibrate_only() -> None:
    async def judge(response: str, state: Any) -> float:
        return 0.5

    with pytest.raises(TypeError, match="await acalibrate"):
        evaluators.calibrate(judge, word_labels())
