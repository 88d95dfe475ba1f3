"""`cascade`: stages gate each other, what is not run is not called or counted, the score
ranks by how far a response got, verdicts, details, errors, and the loop's budget."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_refine import Budget, Evaluation, arefine, create_refine_graph, refine
from langgraph_refine._records._record import evaluator_kind
from langgraph_refine.evaluators import (
    CascadeEvaluator,
    LLMJudge,
    Unjudged,
    cascade,
    combine,
    contains_all,
    word_count,
)
from tests.fakes import ScriptedChatModel, judge_reply

STATE = {"task": "Describe owls in 3 to 6 words."}
LONG = "Owls are birds that hunt small animals at night in the woods."  # 12 words
SHORT = "Owls hunt at night."  # 4 words


class Stage:
    """A stage returning a set evaluation and recording the responses it was asked about."""

    def __init__(
        self, score: float, verdict: Any = None, feedback: str = "", name: str = "stage"
    ) -> None:
        self.evaluation = Evaluation(score=score, verdict=verdict, feedback=feedback)
        self.__name__ = name
        self.seen: list[str] = []

    def __call__(self, response: str, state: Any) -> Evaluation:
        self.seen.append(response)
        return self.evaluation


class AsyncStage(Stage):
    async def __call__(self, response: str, state: Any) -> Evaluation:  # type: ignore[override]
        self.seen.append(response)
        return self.evaluation


# ------------------------------------------------------------------------------------------
# Gating: a stage runs only when every earlier stage reached its threshold
# ------------------------------------------------------------------------------------------


def test_a_failing_stage_stops_the_cascade_and_later_stages_are_not_called() -> None:
    later = Stage(1.0, "PASS", name="later")
    result = cascade(word_count(3, 6), later).evaluate(LONG, STATE)
    assert later.seen == []
    assert result.details["stopped_at"] == "word_count"
    assert result.details["not_run"] == ["later"]


def test_every_stage_runs_when_each_passes() -> None:
    first, second, third = Stage(1.0, name="a"), Stage(1.0, "PASS", name="b"), Stage(0.7, name="c")
    result = cascade(first, second, third).evaluate(SHORT, STATE)
    assert (first.seen, second.seen, third.seen) == ([SHORT], [SHORT], [SHORT])
    assert result.details["not_run"] == []
    assert result.details["stage"] == 2


@pytest.mark.parametrize(
    ("score", "verdict", "reached"),
    [
        (1.0, None, True),  # no verdict: a full score passes
        (0.99, None, False),
        (0.3, "PASS", True),  # a PASS is a full pass whatever its score
        (1.0, "NEEDS_IMPROVEMENT", False),
        (1.0, "FAIL", False),
    ],
)
def test_default_threshold_is_a_full_pass(score: float, verdict: Any, reached: bool) -> None:
    later = Stage(1.0, name="later")
    cascade(Stage(score, verdict), later).evaluate("r", STATE)
    assert bool(later.seen) is reached


@pytest.mark.parametrize(
    ("score", "verdict", "reached"),
    [(0.6, None, True), (0.59, None, False), (0.6, "FAIL", True), (0.5, "PASS", False)],
)
def test_a_threshold_asks_for_that_score(score: float, verdict: Any, reached: bool) -> None:
    later = Stage(1.0, name="later")
    cascade(Stage(score, verdict), later, thresholds=[0.6, None]).evaluate("r", STATE)
    assert bool(later.seen) is reached


# ------------------------------------------------------------------------------------------
# The score: the last stage's own, and below 0.5 for a response stopped before it
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stages", "expected"),
    [
        ([Stage(0.5), Stage(1.0)], 0.5 * 0.5),  # stopped at stage 0 of 2
        ([Stage(1.0), Stage(0.4)], 0.4),  # the last stage judged: its score
        ([Stage(1.0), Stage(0.3), Stage(1.0)], 0.5 * (1 + 0.3) / 2),  # stopped at 1 of 3
        ([Stage(1.0), Stage(1.0), Stage(0.0)], 0.0),
        ([Stage(1.0), Stage(1.0), Stage(1.0)], 1.0),
        ([Stage(0.0), Stage(1.0), Stage(1.0)], 0.0),
        ([Stage(0.8)], 0.8),  # one stage: its own score
    ],
)
def test_score_is_the_last_stages_or_how_far_a_stopped_one_got(
    stages: list[Stage], expected: float
) -> None:
    assert cascade(*stages).evaluate("r", STATE).score == pytest.approx(expected)


def test_a_stopped_response_scores_below_half_and_below_one_that_got_further() -> None:
    # A full score with a verdict short of PASS stops the cascade: below 0.5, and below a
    # response stopped at a later stage.
    stopped = cascade(Stage(1.0, "NEEDS_IMPROVEMENT"), Stage(0.0), Stage(0.0))
    further = cascade(Stage(1.0, "PASS"), Stage(0.0), Stage(0.0))
    first, second = stopped.evaluate("r", STATE), further.evaluate("r", STATE)
    assert first.score < second.score < 0.5
    assert first.details["scores"] == {"stage": 1.0}  # the stage's own score, as given


def test_the_cheap_stages_never_lift_the_judge_over_the_target() -> None:
    # The README's setup: a word count, then a judge at 0.8 NEEDS_IMPROVEMENT.
    judge = ScriptedChatModel(replies=[judge_reply(0.8, "NEEDS_IMPROVEMENT", "More.")] * 3)
    ev = cascade(word_count(3, 6), judge)
    assert ev.evaluate(SHORT, STATE).score == pytest.approx(0.8)
    result = refine(
        ScriptedChatModel(replies=[SHORT] * 3),
        TASK,
        ev,
        target_score=0.9,
        patience=None,
        max_iterations=1,
    )
    assert result.stop_reason == "max_iterations"  # as the judge alone: it keeps refining
    assert result.score == pytest.approx(0.8)


def test_stages_not_run_are_absent_from_the_scores_not_zero() -> None:
    result = cascade(Stage(0.5, name="cheap"), Stage(1.0, name="judge")).evaluate("r", STATE)
    assert result.details["scores"] == {"cheap": 0.5}
    assert [part["name"] for part in result.details["parts"]] == ["cheap"]


# ------------------------------------------------------------------------------------------
# Feedback and verdict: the deciding stage's, never PASS before the last stage
# ------------------------------------------------------------------------------------------


def test_feedback_is_the_stopping_stages_own() -> None:
    result = cascade(word_count(3, 6), Stage(1.0, "PASS", "judge says fine")).evaluate(LONG, STATE)
    assert result.feedback == (
        "The response has 12 words, but it must have 3-6 words: cut at least 6 words."
    )


def test_feedback_and_verdict_of_the_last_stage_when_every_stage_passes() -> None:
    result = cascade(word_count(3, 6), Stage(0.95, "PASS", "Vivid.")).evaluate(SHORT, STATE)
    assert (result.feedback, result.verdict) == ("Vivid.", "PASS")
    assert result.details["stopped_at"] is None


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [(None, "NEEDS_IMPROVEMENT"), ("NEEDS_IMPROVEMENT", "NEEDS_IMPROVEMENT"), ("FAIL", "FAIL")],
)
def test_verdict_when_stopped_early(verdict: Any, expected: str) -> None:
    result = cascade(Stage(0.2, verdict), Stage(1.0, "PASS")).evaluate("r", STATE)
    assert result.verdict == expected


def test_never_pass_before_the_last_stage() -> None:
    # A PASS below the stage's threshold stops the cascade: not a PASS of the whole.
    ev = cascade(Stage(0.5, "PASS"), Stage(1.0, "PASS"), thresholds=[0.8, None])
    result = ev.evaluate("r", STATE)
    assert result.details["stopped_at"] == "stage"
    assert result.verdict == "NEEDS_IMPROVEMENT"


def test_a_last_stages_pass_below_its_threshold_is_no_pass() -> None:
    ev = cascade(Stage(1.0), Stage(0.6, "PASS", "Fine."), thresholds=[None, 0.8])
    result = ev.evaluate("r", STATE)
    assert result.details["stopped_at"] == "stage#2"
    assert (result.verdict, result.feedback) == ("NEEDS_IMPROVEMENT", "Fine.")
    assert result.score == pytest.approx(0.6)


def test_the_last_stage_may_stop_with_its_own_verdict() -> None:
    ev = cascade(Stage(1.0), Stage(0.4, "FAIL", "Wrong facts.", name="judge"))
    result = ev.evaluate("r", STATE)
    assert (result.verdict, result.feedback, result.details["stopped_at"]) == (
        "FAIL",
        "Wrong facts.",
        "judge",
    )


def test_feedback_of_an_earlier_stage_short_of_a_full_pass_is_kept() -> None:
    ev = cascade(
        word_count(3, 10),
        Stage(0.6, "NEEDS_IMPROVEMENT", "Name a prey.", "judge"),
        thresholds=[0.5, None],
    )
    result = ev.evaluate(LONG, STATE)  # 12 words: 0.8 for word_count, over its threshold
    assert result.feedback == (
        "[word_count] score 0.80: The response has 12 words, but it must have 3-10 words: "
        "cut at least 2 words.\n[judge] score 0.60: Name a prey."
    )
    # A full pass of the earlier stage leaves the deciding stage's feedback alone.
    assert ev.evaluate(SHORT, STATE).feedback == "Name a prey."


def test_a_stopping_stage_without_feedback_says_so() -> None:
    result = cascade(Stage(0.5, name="quiet"), Stage(1.0)).evaluate("r", STATE)
    assert result.feedback == "[quiet] gave no reason for scoring 0.50 (below 1.00)"


def test_details_list_each_run_stage() -> None:
    ev = cascade(word_count(3, 6), contains_all(["owl"]), Stage(1.0), thresholds=[None, 0.5, 1])
    result = ev.evaluate(SHORT, STATE)
    assert result.details["stopped_at"] == "contains_all"
    assert result.details["stages"] == 3
    assert result.details["stage"] == 1
    assert result.details["not_run"] == ["stage"]
    first, second = result.details["parts"]
    assert first["name"] == "word_count" and first["threshold"] is None
    assert first["details"]["words"] == 4
    assert second["name"] == "contains_all" and second["threshold"] == 0.5
    assert second["score"] == 0.0


def test_repeated_stage_names_are_numbered() -> None:
    ev = cascade(word_count(1, 20), word_count(3, 6))
    assert ev.labels == ["word_count", "word_count#2"]
    assert ev.evaluate(LONG, STATE).details["stopped_at"] == "word_count#2"


# ------------------------------------------------------------------------------------------
# What the cascade is: model calls, async, forms, the strategy record's key
# ------------------------------------------------------------------------------------------


def test_calls_model_if_any_stage_does() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(1.0, "PASS")])
    assert cascade(word_count(1, 5), judge).calls_model is True
    assert cascade(word_count(1, 5), contains_all(["owl"])).calls_model is False


def test_inline_and_async_follow_the_stages() -> None:
    assert cascade(word_count(1, 5), contains_all(["owl"])).inline is True
    assert cascade(word_count(1, 5), Stage(1.0)).inline is False
    assert cascade(word_count(1, 5), AsyncStage(1.0)).is_async is True
    assert cascade(word_count(1, 5), Stage(1.0)).is_async is False


def test_stages_may_be_any_evaluator_form() -> None:
    judge = ScriptedChatModel(replies=[judge_reply(0.9, "PASS", "Good.")])
    ev = cascade([word_count(3, 6), contains_all(["owls"])], judge)
    assert isinstance(ev, CascadeEvaluator)
    assert isinstance(ev.stages[1], LLMJudge)
    assert ev.labels == ["combined", "llm_judge"]
    result = ev.evaluate(SHORT, STATE)
    assert result.verdict == "PASS" and result.feedback == "Good."
    assert len(judge.calls) == 1


def test_the_judge_inside_is_found_for_pairwise_selection() -> None:
    from langgraph_refine._loop._select import judge_model_in

    judge = ScriptedChatModel()
    assert judge_model_in(cascade(word_count(3, 6), judge)) is judge


def test_record_key_names_the_stages() -> None:
    ev = cascade(word_count(3, 6), ScriptedChatModel())
    assert evaluator_kind(ev) == "cascade(word_count+llm_judge)"


async def test_async_path_gates_like_the_sync_one() -> None:
    judge = AsyncStage(0.9, "PASS", "Good.", name="judge")
    ev = cascade(word_count(3, 6), judge)
    stopped = await ev.aevaluate(LONG, STATE)
    assert judge.seen == []
    assert stopped.details["stopped_at"] == "word_count"
    assert stopped.score == pytest.approx(ev.evaluate(LONG, STATE).score)
    passed = await ev.aevaluate(SHORT, STATE)
    assert judge.seen == [SHORT]
    assert (passed.score, passed.verdict) == (pytest.approx(0.9), "PASS")


async def test_async_stages_run_one_after_another_in_order() -> None:
    order: list[str] = []

    def stage(name: str, score: float) -> Any:
        async def evaluate(response: str, state: Any) -> float:
            order.append(name)
            return score

        evaluate.__name__ = name
        return evaluate

    await cascade(stage("a", 1.0), stage("b", 1.0), stage("c", 0.2), stage("d", 1.0)).aevaluate(
        "r", STATE
    )
    assert order == ["a", "b", "c"]


# ------------------------------------------------------------------------------------------
# Unjudged: the cascade lets it through, and runs nothing after it
# ------------------------------------------------------------------------------------------


def unjudged(response: str, state: Any) -> float:
    raise Unjudged("the grader could not read the response")


def test_unjudged_propagates_and_later_stages_do_not_run() -> None:
    later = Stage(1.0, name="later")
    with pytest.raises(Unjudged, match="could not read"):
        cascade(word_count(1, 10), unjudged, later).evaluate(SHORT, STATE)
    assert later.seen == []


async def test_unjudged_propagates_on_the_async_path() -> None:
    later = AsyncStage(1.0, name="later")
    with pytest.raises(Unjudged, match="could not read"):
        await cascade(word_count(1, 10), unjudged, later).aevaluate(SHORT, STATE)
    assert later.seen == []


def test_a_stage_that_stopped_before_an_unjudged_one_decides() -> None:
    # The unjudged stage is never reached: the cheap stage's judgment stands.
    result = cascade(word_count(3, 6), unjudged).evaluate(LONG, STATE)
    assert result.details["stopped_at"] == "word_count"


# ------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------


def test_needs_a_stage() -> None:
    with pytest.raises(ValueError, match="at least one stage"):
        cascade()


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        ([0.5], r"got 2 stages but 1 thresholds \(\[0.5\]\); give one per stage"),
        ([0.5, 0.5, 0.5], "got 2 stages but 3 thresholds"),
        ([1.5, None], r"threshold 1 must be a number in \[0, 1\] or None .*got 1.5"),
        ([None, -0.1], "threshold 2 must be a number in .*got -0.1"),
        ([math.nan, None], "threshold 1 .*got nan"),
        ([True, None], "threshold 1 .*got True"),
        (["0.5", None], "threshold 1 .*got '0.5'"),
        (0.5, "thresholds must be a list with one entry per stage, got 0.5"),
        ("ab", "thresholds must be a list with one entry per stage, got 'ab'"),
    ],
)
def test_bad_thresholds(thresholds: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cascade(word_count(1, 5), contains_all(["owl"]), thresholds=thresholds)


def test_stages_must_be_evaluators() -> None:
    with pytest.raises(ValueError, match=r"cascade\(\) stage 2 must be callable"):
        cascade(word_count(1, 5), 42)


def test_integer_thresholds_are_accepted() -> None:
    assert cascade(Stage(1.0), Stage(1.0), thresholds=[1, 0]).thresholds == [1.0, 0.0]


# ------------------------------------------------------------------------------------------
# In a loop: the judge reads only drafts the cheap stage let through, and is paid for those
# ------------------------------------------------------------------------------------------

TASK = "Describe owls in 3 to 6 words."
DRAFTS = [LONG, LONG + " Truly.", SHORT]  # two drafts too long, then one that fits


def judged_loop(evaluator_of: Any, budget: Budget | None = None) -> tuple[Any, Any, Any]:
    generator = ScriptedChatModel(replies=DRAFTS)
    judge = ScriptedChatModel(replies=[judge_reply(0.95, "PASS", "Vivid.")])
    result = refine(
        generator,
        TASK,
        evaluator_of(word_count(3, 6), judge),
        budget=budget,
        patience=None,
        max_iterations=4,
    )
    return result, generator, judge


def test_in_a_loop_the_judge_reads_only_drafts_that_passed_the_cheap_stage() -> None:
    result, generator, judge = judged_loop(cascade)
    assert result.stop_reason == "passed"
    assert result.value == SHORT
    assert len(generator.calls) == 3
    assert len(judge.calls) == 1  # only the draft of the right length
    assert SHORT in judge.prompts[0]
    assert result.usage.calls == 3 + 1  # three drafts, one judge call: nothing else counted
    # The drafts the judge never read scored below the one it passed.
    assert result.score_history[0] < 0.5 < result.score_history[-1]
    # The generator was told what the cheap stage found.
    assert "cut at least 6 words" in generator.prompts[1]


def test_combine_pays_the_judge_for_every_draft() -> None:
    result, _, judge = judged_loop(combine)
    assert len(judge.calls) == 3
    assert result.usage.calls == 3 + 3


def test_the_budget_left_by_unrun_stages_is_spent_on_drafts() -> None:
    # Four calls: enough for three drafts and one judge call under a cascade; a
    # combination spends the same four on two drafts and two judge calls.
    cascaded, _, _ = judged_loop(cascade, Budget(max_calls=4))
    assert (cascaded.stop_reason, cascaded.usage.calls) == ("passed", 4)
    combined, generator, _ = judged_loop(combine, Budget(max_calls=4))
    assert combined.stop_reason == "budget_exhausted"
    assert combined.value != SHORT and len(generator.calls) == 2


def test_a_model_calling_stage_that_calls_no_langchain_model_still_counts_once() -> None:
    # A callable judge that calls its provider outside LangChain (calls_model=True) is
    # counted as one call when it runs, and not at all when the cheap stage stops.
    from langgraph_refine.evaluators import CallableEvaluator

    seen: list[str] = []

    def sdk_judge(response: str, state: Any) -> Evaluation:
        seen.append(response)
        return Evaluation(score=1.0, verdict="PASS")

    generator = ScriptedChatModel(replies=DRAFTS)
    ev = cascade(word_count(3, 6), CallableEvaluator(sdk_judge, calls_model=True))
    result = refine(generator, TASK, ev, patience=None, max_iterations=4)
    assert seen == [SHORT]
    assert result.usage.calls == 3 + 1


async def test_async_loop_counts_only_the_stages_run() -> None:
    generator = ScriptedChatModel(replies=DRAFTS)
    judge = ScriptedChatModel(replies=[judge_reply(0.95, "PASS", "Vivid.")])
    result = await arefine(
        generator, TASK, cascade(word_count(3, 6), judge), patience=None, max_iterations=4
    )
    assert result.stop_reason == "passed"
    assert len(judge.calls) == 1
    assert result.usage.calls == 4


def test_in_a_compiled_graph() -> None:
    generator = ScriptedChatModel(replies=DRAFTS)
    judge = ScriptedChatModel(replies=[judge_reply(0.95, "PASS", "Vivid.")])
    graph = create_refine_graph(
        generator, cascade(word_count(3, 6), judge), patience=None, max_iterations=4
    ).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "cascade"}}
    out = graph.invoke({"task": TASK}, config)
    assert out["response"] == SHORT
    assert len(judge.calls) == 1
    assert graph.get_state(config).values["usage"].calls == 4


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_in_an_agent_the_middleware_pays_only_for_the_stages_run(run_async: bool) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from langgraph_refine import RefineMiddleware
    from tests.fakes import AgentModel

    model = AgentModel(replies=DRAFTS)
    judge = ScriptedChatModel(replies=[judge_reply(0.95, "PASS", "Vivid.")])
    middleware = RefineMiddleware(
        cascade(word_count(3, 6), judge), budget=Budget(max_calls=4), patience=None
    )
    agent = create_agent(model, middleware=[middleware])
    ask = {"messages": [HumanMessage(TASK)]}
    out = await agent.ainvoke(ask) if run_async else agent.invoke(ask)
    result = middleware.result(out)
    assert (result.stop_reason, result.value) == ("passed", SHORT)
    assert (len(model.calls), len(judge.calls)) == (3, 1)
    assert result.usage.calls == 4
