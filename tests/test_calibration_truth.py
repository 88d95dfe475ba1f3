"""Judgment that tells the truth: a calibration belongs to its judge, holds out whole tasks,
reports what it found, and a loop that could never pass refuses to start.

Labels with several responses per task; judges that separate, that give one score, and
that score at random (kappa near 0); labels of one verdict.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import Attempt, Evaluation, RefineMiddleware, create_refine_graph, evaluators
from langgraph_refine._errors import CalibrationMismatchError
from langgraph_refine._result import best_attempt
from langgraph_refine.evaluators import CalibratedEvaluator, CalibrationWarning
from langgraph_refine.evaluators._agreement import deal_folds, held_out
from tests.fakes import AgentModel, ScriptedChatModel

TASKS = 15
PER_TASK = 8
ELEVEN = " ".join(["word"] * 11)


def lengths(response: str, state: Any) -> float:
    """A judge scoring by length: 40 words or more is a full score."""
    return min(1.0, len(response.split()) / 40)


def task_labels(tasks: int = TASKS, per_task: int = PER_TASK) -> list[dict[str, Any]]:
    """Several responses per task; people pass those of more than 30 words."""
    return [
        {"task": f"task {t}", "response": "good " * (t + 5 * r), "passed": t + 5 * r > 30}
        for t in range(tasks)
        for r in range(per_task)
    ]


def quietly(judge: Any, labels: Any, **kwargs: Any) -> CalibratedEvaluator:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return evaluators.calibrate(judge, labels, **kwargs)


# -- folds by task ---------------------------------------------------------------------------


def test_labels_of_one_task_are_never_on_both_sides_of_a_fold() -> None:
    labels = task_labels()
    groups = [label["task"] for label in labels]
    person = [label["passed"] for label in labels]
    fold_of = deal_folds(person, folds=5, groups=groups)
    for task in set(groups):
        assert len({fold_of[i] for i, g in enumerate(groups) if g == task}) == 1
    sizes = [fold_of.count(f) for f in range(5)]
    assert max(sizes) - min(sizes) <= PER_TASK  # whole tasks, dealt evenly
    # A label's `group` overrides its task: two tasks one group are held out together.
    regrouped = deal_folds([True, False, True, False], folds=2, groups=["a", "a", "a", "b"])
    assert regrouped[0] == regrouped[1] == regrouped[2] != regrouped[3]


def test_the_held_out_bound_counts_each_fold_on_tasks_it_never_saw() -> None:
    # One task's responses all score high and all fail: seen in training, that task
    # raises the threshold; held out whole, its false passes are counted.
    scores = [0.9] * 6 + [i / 60 for i in range(60)]
    person = [False] * 6 + [i > 30 for i in range(60)]
    groups = ["bad"] * 6 + [f"t{i % 12}" for i in range(60)]
    by_task = held_out(scores, person, alpha=0.2, confidence=0.9, folds=4, groups=groups)
    by_label = held_out(scores, person, alpha=0.2, confidence=0.9, folds=4)
    # By task: the fold that never saw the bad task chose a threshold, and the whole
    # task, held out, is counted against it (every one of its 6 responses a false pass).
    assert by_task.folds == 4 and by_task.false_passes == 6 and by_task.bound > 0.5
    # By label, the bad task leaks into every training part: no fold ever passed anything,
    # so what a new task would meet was never measured.
    assert by_label.passes == 0


def test_the_report_says_its_folds_were_dealt_by_task() -> None:
    calibrated = evaluators.calibrate(lengths, task_labels())
    report = calibrated.report
    assert report.tasks == TASKS and report.grouped is True
    assert report.met and report.diagnosis == "met" and report.advice == ""
    one_task = evaluators.calibrate(lengths, [{**label, "task": "t"} for label in task_labels()])
    assert one_task.report.tasks == 1 and one_task.report.grouped is False
    groups = [{**label, "group": "g" + label["task"][-1]} for label in task_labels()]
    assert evaluators.calibrate(lengths, groups).report.tasks == 10  # by `group`, not task


# -- an honest report ------------------------------------------------------------------------


def test_a_constant_judge_is_told_it_does_not_separate() -> None:
    with pytest.warns(CalibrationWarning, match="does not tell passes from fails"):
        calibrated = evaluators.calibrate(lambda response, state: 0.7, task_labels())
    report = calibrated.report
    assert report.met is False and calibrated.threshold is None and not calibrated.can_pass
    assert report.diagnosis == "no_separation" and report.distinct_scores == 1
    assert "every response the score 0.70" in report.advice
    assert "more labels will not help" in report.advice and "stronger judge" in report.advice
    # The best bound reached, with its threshold, not a placeholder.
    assert report.best_threshold == 0.7 and 0 < report.bound < 1


def test_a_judge_at_kappa_zero_is_told_more_labels_will_not_help() -> None:
    rng = random.Random(3)
    labels = task_labels(30)
    scores = {label["response"] + label["task"]: rng.random() for label in labels}

    def coin(response: str, state: Any) -> float:
        return scores[response + state["task"]]

    calibrated = quietly(coin, labels)
    report = calibrated.report
    assert report.best_kappa < 0.1 and report.distinct_scores > 100
    assert report.diagnosis == "no_separation" and report.met is False
    assert "best kappa of any threshold" in report.advice
    assert "Add about" not in report.advice  # no count of labels can help this judge


def test_a_judge_that_separates_with_too_few_labels_is_told_about_how_many_more() -> None:
    labels = [
        {"task": f"task {i % 5}", "response": "good " * (20 + i), "passed": 20 + i > 30}
        for i in range(20)
    ]
    calibrated = quietly(lengths, labels)
    report = calibrated.report
    assert report.diagnosis == "too_few_labels" and report.met is False
    assert "Add about" in report.advice and report.best_threshold is not None


@pytest.mark.parametrize("passed", [True, False])
def test_labels_of_one_verdict_are_refused(passed: bool) -> None:
    labels = [{**label, "passed": passed} for label in task_labels()]
    with pytest.warns(CalibrationWarning, match="one of the people's"):
        calibrated = evaluators.calibrate(lengths, labels)
    report = calibrated.report
    assert report.met is False and calibrated.threshold is None
    assert report.diagnosis == "one_verdict"
    kind = "would not pass" if passed else "would pass"
    assert f"Add labels of responses people {kind}" in report.advice
    assert calibrated.evaluate("good " * 50, {"task": "t"}).verdict != "PASS"


def test_unjudged_labels_are_named() -> None:
    def refuses(response: str, state: Any) -> float:
        if response.startswith("good good good good good good"):
            raise evaluators.Unjudged("the judge could not read it")
        return lengths(response, state)

    report = quietly(refuses, task_labels()).report
    assert report.unjudged == len(report.unjudged_labels) > 0
    first = report.unjudged_labels[0]
    assert first["reason"] == "the judge could not read it" and first["task"].startswith("task")


def test_labels_are_judged_concurrently_with_every_call_counted() -> None:
    seen: set[str] = set()
    at_once = {"now": 0, "most": 0}
    lock = threading.Lock()

    def slow(response: str, state: Any) -> float:
        with lock:
            at_once["now"] += 1
            at_once["most"] = max(at_once["most"], at_once["now"])
        threading.Event().wait(0.01)
        with lock:
            at_once["now"] -= 1
            seen.add(state["task"])
        return lengths(response, state)

    labels = task_labels()
    calibrated = evaluators.calibrate(slow, labels, concurrency=4)
    assert at_once["most"] > 1 and len(seen) == TASKS
    one_at_a_time = evaluators.calibrate(lengths, labels).report
    assert calibrated.report.curve == one_at_a_time.curve
    assert calibrated.threshold == one_at_a_time.threshold
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        evaluators.calibrate(lengths, labels, concurrency=0)


# -- a calibration belongs to its judge ------------------------------------------------------


def test_a_calibration_records_its_judge_and_load_refuses_another(tmp_path: Path) -> None:
    judge = evaluators.llm_judge(ScriptedChatModel(replies=[]), criteria="Be brief")
    report = evaluators.calibrate(lengths, task_labels()).report
    CalibratedEvaluator(judge, report).save(tmp_path / "cal.json")
    identity = json.loads((tmp_path / "cal.json").read_text())["judge"]
    assert identity["evaluator"] == "llm_judge" and identity["criteria"] == ["Be brief"]
    assert identity["model"] and len(identity["prompt"]) == 16
    loaded = CalibratedEvaluator.load(tmp_path / "cal.json", judge)
    assert loaded.report == report
    others = {
        "criteria": evaluators.llm_judge(ScriptedChatModel(replies=[]), criteria="Rhymes"),
        "evaluator": evaluators.word_count(1, 5),
        "model": evaluators.llm_judge(AgentModel(replies=[]), criteria="Be brief"),
    }
    for field, other in others.items():
        with pytest.raises(CalibrationMismatchError, match=f"{field}: calibrated with"):
            CalibratedEvaluator.load(tmp_path / "cal.json", other)


def test_a_request_with_other_criteria_is_refused_before_any_call() -> None:
    calls: list[str] = []

    def judge(response: str, state: Any) -> float:
        calls.append(response)
        return lengths(response, state)

    calibrated = evaluators.calibrate(judge, task_labels(), criteria=["Cites a source"])
    assert calibrated.identity["criteria"] == ["Cites a source"]
    calls.clear()
    judged = calibrated.evaluate("good " * 40, {"task": "t", "criteria": ["Cites a source"]})
    assert judged.verdict == "PASS" and len(calls) == 1
    for criteria in (None, ["Rhymes"], ["Cites a source", "Rhymes"]):
        with pytest.raises(CalibrationMismatchError, match="criteria"):
            calibrated.evaluate("good " * 40, {"task": "t", "criteria": criteria})
    assert len(calls) == 1  # refused before the judge was called


def test_a_version_1_file_is_refused_as_recording_no_judge(tmp_path: Path) -> None:
    report = evaluators.calibrate(lengths, task_labels()).report
    old = {"format": "langgraph-refine calibration", "version": 1, "judge": "judge"}
    (tmp_path / "old.json").write_text(json.dumps({**old, "report": report.to_dict()}))
    with pytest.raises(ValueError, match="does not record its judge"):
        CalibratedEvaluator.load(tmp_path / "old.json", lengths)


# -- a calibration that passes nothing ---------------------------------------------------------


def nothing() -> CalibratedEvaluator:
    return quietly(lambda response, state: 0.7, task_labels())


def test_require_calibration_with_nothing_to_pass_warns_once_at_build_and_never_starts() -> None:
    calls: list[Any] = []

    def generator(state: Any) -> str:
        calls.append(state)
        return "draft"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = create_refine_graph(generator, nothing(), require_calibration=True).compile()
    said = [w for w in caught if issubclass(w.category, CalibrationWarning)]
    assert len(said) == 1 and "refuses to start" in str(said[0].message)
    with pytest.raises(ValueError, match="can pass nothing"):
        graph.invoke({"task": "t"})
    with pytest.raises(ValueError, match="can pass nothing"):
        asyncio.run(graph.ainvoke({"task": "t"}))
    assert calls == []  # no call was paid
    # A run's own require_calibration (its context) is refused the same way.
    with pytest.warns(CalibrationWarning, match="untrusted"):
        plain = create_refine_graph(generator, nothing(), max_iterations=0)
    compiled = plain.compile()
    with pytest.raises(ValueError, match="can pass nothing"):
        compiled.invoke({"task": "t"}, context={"require_calibration": True})
    assert calls == []


def test_without_require_calibration_the_run_is_told_once_its_pass_is_untrusted() -> None:
    with pytest.warns(CalibrationWarning, match="passes nothing: .* its PASS is untrusted"):
        graph = create_refine_graph(lambda state: "draft", nothing(), max_iterations=1)
    result = graph.compile().invoke({"task": "t"})
    assert result["response"] == "draft"


def test_the_agent_refuses_to_start_too() -> None:
    model = AgentModel(replies=["answer"])
    with pytest.warns(CalibrationWarning, match="refuses to start"):
        middleware = RefineMiddleware(nothing(), require_calibration=True)
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "one"}}
    with pytest.raises(ValueError, match="can pass nothing"):
        agent.invoke({"messages": [HumanMessage("Write it.")]}, config)
    assert model.calls == []


# -- the cascade ranks by how far an answer got -----------------------------------------------


def test_an_answer_the_judge_scored_outranks_one_a_cheap_stage_stopped() -> None:
    ev = evaluators.cascade(evaluators.word_count(3, 10), lambda response, state: 0.4)
    stopped = ev.evaluate(ELEVEN, {})  # one word over: stopped, its stage scored 0.9
    judged = ev.evaluate("one two three four", {})
    assert stopped.score > 0.4 and judged.score == 0.4  # the judge's score is never lifted
    assert (stopped.reach, judged.reach) == (0, 1)
    attempts = [
        Attempt(index=0, response="stopped", evaluation=stopped),
        Attempt(index=1, response="judged", evaluation=judged),
    ]
    assert best_attempt(attempts) is attempts[1]
    assert best_attempt(attempts[::-1]) is attempts[1]


def test_the_loop_returns_the_judged_answer_over_a_stopped_one_with_a_higher_number() -> None:
    drafts = iter([ELEVEN, "one two three four"])
    result = evaluators_loop(lambda state: next(drafts))
    assert result.value == "one two three four" and result.score == 0.4
    assert result.stop_reason == "max_iterations"


def evaluators_loop(generator: Any) -> Any:
    from langgraph_refine import refine

    judge = lambda response, state: Evaluation(score=0.4, feedback="add detail")  # noqa: E731
    return refine(
        generator,
        "t",
        evaluators.cascade(evaluators.word_count(3, 10), judge),
        max_iterations=1,
        patience=None,
    )


def test_a_run_with_other_criteria_is_refused_before_any_call() -> None:
    calibrated = evaluators.calibrate(lengths, task_labels(), criteria=["Cites a source"])
    calls: list[Any] = []

    def generator(state: Any) -> str:
        calls.append(state)
        return "good " * 40

    graph = create_refine_graph(generator, calibrated).compile()
    with pytest.raises(CalibrationMismatchError, match="criteria"):
        graph.invoke({"task": "t", "criteria": ["Rhymes"]})
    with pytest.raises(CalibrationMismatchError, match="criteria"):
        graph.invoke({"task": "t"})
    assert calls == []
    result = graph.invoke({"task": "t", "criteria": ["Cites a source"]})
    assert result["response"] == "good " * 40 and len(calls) == 1
    # The agent too.
    model = AgentModel(replies=["answer"])
    agent = create_agent(model, middleware=[RefineMiddleware(calibrated)])
    with pytest.raises(CalibrationMismatchError, match="criteria"):
        agent.invoke({"messages": [HumanMessage("Write it.")]})
    assert model.calls == []
