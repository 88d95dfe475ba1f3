"""Refining by edits (`edits=`): SEARCH/REPLACE blocks asked for, applied whole or not at all.

Scripted models stand in for the provider; the recorded test in tests/test_recorded.py
runs an edit round on the real local model, and tests/test_durable.py kills a loop that
refines by edits mid-round.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from langgraph_refine import Attempt, Evaluation, create_refine_graph, refine
from langgraph_refine._decisions._edits import (
    EDITS_AUTO_MIN_CHARS,
    Block,
    apply_blocks,
    asks_for_edits,
    parse_blocks,
)
from langgraph_refine._decisions._prompts import EDIT_INSTRUCTIONS, REFINE_INSTRUCTIONS
from langgraph_refine._state import Candidate
from tests.fakes import ScriptedChatModel, scores

TASK = "Write three lines about the sea."
DRAFT = "The sea is blue.\nWaves are tall.\nFish swim there."


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


# -- reading and applying blocks ----------------------------------------------------------


def test_several_blocks_apply_in_order_each_to_the_text_the_last_left() -> None:
    reply = block("The sea is blue.", "The sea is grey.") + block(
        "The sea is grey.\nWaves", "The sea is grey.\nBig waves"
    )
    applied = apply_blocks(DRAFT, parse_blocks(reply))
    assert applied.text == "The sea is grey.\nBig waves are tall.\nFish swim there."
    assert applied.applied == 2 and applied.failures == ()


def test_a_missing_search_applies_nothing_and_names_the_block() -> None:
    reply = block("The sea is blue.", "The sea is grey.") + block("Whales sing.", "x")
    applied = apply_blocks(DRAFT, parse_blocks(reply))
    assert applied.text is None and applied.applied == 0
    assert applied.failures == (
        "block 2 (SEARCH starting 'Whales sing.'): its SEARCH text is not in the attempt; "
        "copy it exactly from the attempt",
    )


def test_a_search_found_twice_is_never_guessed() -> None:
    text = "a line\nthe end\na line\n"
    applied = apply_blocks(text, parse_blocks(block("a line", "b line")))
    assert applied.text is None
    assert "found 2 times" in applied.failures[0]
    # Overlapping places count too: "aa" is at two places in "aaa".
    assert apply_blocks("aaa", [Block(1, "aa", "b")]).text is None


def test_every_failing_block_is_named() -> None:
    reply = block("nope", "x") + block("The sea is blue.", "ok") + block("Fish", "x")
    applied = apply_blocks(DRAFT + "\nFish again.", parse_blocks(reply))
    assert [f.split(" ", 2)[1] for f in applied.failures] == ["1", "3"]


def test_fences_prose_and_crlf_around_blocks_are_tolerated() -> None:
    reply = (
        "Here are my edits:\r\n```text\r\n"
        + block("Waves are tall.", "Waves are low.").replace("\n", "\r\n")
        + "```\r\nDone."
    )
    applied = apply_blocks(DRAFT, parse_blocks(reply))
    assert applied.text == "The sea is blue.\nWaves are low.\nFish swim there."


def test_a_crlf_attempt_keeps_its_line_ends() -> None:
    crlf = DRAFT.replace("\n", "\r\n")
    applied = apply_blocks(crlf, parse_blocks(block("Waves are tall.\nFish", "Calm.\nFish")))
    assert applied.text == "The sea is blue.\r\nCalm.\r\nFish swim there."


def test_trailing_spaces_on_either_side_are_tolerated_only_at_one_place() -> None:
    text = "one  \ntwo\nthree"
    assert apply_blocks(text, parse_blocks(block("one\ntwo", "1\n2"))).text == "1\n2\nthree"
    assert apply_blocks(DRAFT, parse_blocks(block("Waves are tall.   ", "W"))).text is not None
    twice = "one  \ntwo\none \ntwo"
    assert apply_blocks(twice, parse_blocks(block("one\ntwo", "x"))).text is None


def test_a_search_and_replace_wrapped_in_their_own_fences_are_unwrapped() -> None:
    reply = block("```\nWaves are tall.\n```", "```\nWaves are low.\n```")
    assert apply_blocks(DRAFT, parse_blocks(reply)).text == DRAFT.replace("tall", "low")


def test_an_empty_replace_deletes_whole_lines() -> None:
    assert apply_blocks(DRAFT, parse_blocks(block("Waves are tall.", ""))).text == (
        "The sea is blue.\nFish swim there."
    )


def test_an_unclosed_or_empty_block_fails_and_is_not_a_rewrite() -> None:
    unclosed = parse_blocks("<<<<<<< SEARCH\nThe sea is blue.\n=======\nGrey.")
    assert unclosed == [Block(1, None)]
    assert "not closed" in apply_blocks(DRAFT, unclosed).failures[0]
    assert "empty" in apply_blocks(DRAFT, parse_blocks(block("", "x"))).failures[0]
    assert parse_blocks("Just a new answer.\nWith ======= inside.") == []


def test_auto_asks_for_edits_only_beyond_the_documented_size() -> None:
    short = Attempt(index=0, response="x" * EDITS_AUTO_MIN_CHARS)
    long = Attempt(index=0, response="x" * (EDITS_AUTO_MIN_CHARS + 1))
    assert not asks_for_edits("auto", short, None) and asks_for_edits("auto", long, None)
    assert asks_for_edits(True, short, None) and not asks_for_edits(False, long, None)


# -- in the loop ------------------------------------------------------------------------


def test_the_evaluator_sees_the_edited_text_and_the_attempt_counts_its_blocks() -> None:
    edits = block("The sea is blue.", "The sea is grey.") + block("Fish swim there.", "Gulls.")
    model = ScriptedChatModel(replies=[DRAFT, edits])
    evaluator = scores(0.5, 1.0)
    result = refine(model, TASK, evaluator, edits=True, max_iterations=1, target_score=0.9)
    edited = "The sea is grey.\nWaves are tall.\nGulls."
    assert evaluator.calls == [DRAFT, edited]  # type: ignore[attr-defined]
    assert result.value == edited
    assert [a.edits for a in result.attempts] == [None, 2]
    assert [a.move for a in result.attempts] == ["sample", "refine"]
    # The prompt shows the attempt whole and asks for blocks, not for a rewrite.
    prompt = model.prompts[1]
    assert f"<answer>\n{DRAFT}\n</answer>" in prompt
    assert EDIT_INSTRUCTIONS in prompt and REFINE_INSTRUCTIONS not in prompt


def test_blocks_that_do_not_apply_fail_without_the_evaluator_and_change_nothing() -> None:
    bad = block("The sea is blue.", "Grey.") + block("Whales sing.", "x")
    fixed = block("Fish swim there.", "Gulls cry.")
    model = ScriptedChatModel(replies=[DRAFT, bad, fixed])
    evaluator = scores(0.5, 1.0)
    result = refine(
        model, TASK, evaluator, edits=True, max_iterations=2, patience=None, strategy="chain"
    )
    failed = result.attempts[1]
    assert failed.response == DRAFT and failed.edits == 0  # nothing applied partly
    assert failed.evaluation is not None
    assert (failed.evaluation.score, failed.evaluation.verdict) == (0.0, "FAIL")
    assert "block 2 (SEARCH starting 'Whales sing.')" in failed.evaluation.feedback
    assert "block 1" not in failed.evaluation.feedback
    assert failed.evaluation.details["evaluator"] == "edits"
    # The evaluator judged the first and the third attempt only.
    assert evaluator.calls == [DRAFT, DRAFT.replace("Fish swim there.", "Gulls cry.")]  # type: ignore[attr-defined]
    # The next round sees the failure and the feedback that still stands.
    assert "Whales sing." in model.prompts[2]
    assert result.value.endswith("Gulls cry.")


def test_failed_edits_carry_the_earlier_feedback_once_not_nested() -> None:
    model = ScriptedChatModel(replies=[DRAFT, block("nope", "x")])
    feedback = iter(["name the colour", "unused"])

    def evaluate(response: str, state: Any) -> Evaluation:
        return Evaluation(score=0.3, feedback=next(feedback))

    result = refine(
        model, TASK, evaluate, edits=True, max_iterations=3, patience=None, strategy="chain"
    )
    texts = [a.evaluation.feedback for a in result.attempts[1:] if a.evaluation]
    assert len(texts) == 3
    for text in texts:
        assert text.count("name the colour") == 1


def test_a_reply_without_blocks_is_a_whole_rewrite() -> None:
    model = ScriptedChatModel(replies=[DRAFT, "A new answer entirely."])
    result = refine(model, TASK, scores(0.5, 1.0), edits=True, max_iterations=1)
    assert result.attempts[1].response == "A new answer entirely."
    assert result.attempts[1].edits is None


def test_fresh_samples_are_written_whole() -> None:
    model = ScriptedChatModel(replies=["one", "two", "three"])
    result = refine(
        model,
        TASK,
        scores(0.1, 0.2, 0.3),
        edits=True,
        strategy="sample",
        max_iterations=2,
        patience=None,
    )
    assert [a.move for a in result.attempts] == ["sample"] * 3
    assert model.prompts == [TASK] * 3
    assert [a.edits for a in result.attempts] == [None] * 3


def test_without_edits_the_prompt_asks_for_a_rewrite() -> None:
    model = ScriptedChatModel(replies=[DRAFT, block("The sea is blue.", "x")])
    result = refine(model, TASK, scores(0.5, 1.0), max_iterations=1)
    assert REFINE_INSTRUCTIONS in model.prompts[1] and EDIT_INSTRUCTIONS not in model.prompts[1]
    assert result.attempts[1].edits is None  # the blocks are read as the text they are
    assert result.attempts[1].response.startswith("<<<<<<< SEARCH")


def test_auto_edits_a_long_attempt_and_rewrites_a_short_one() -> None:
    long = "\n".join(f"Line {i} of a long answer about the sea." for i in range(80))
    assert len(long) > EDITS_AUTO_MIN_CHARS
    model = ScriptedChatModel(replies=[long, block("Line 7 of", "Row 7 of")])
    result = refine(model, TASK, scores(0.5, 1.0), edits="auto", max_iterations=1)
    assert result.attempts[1].edits == 1 and "Row 7 of a long" in result.value
    short = ScriptedChatModel(replies=[DRAFT, "Rewritten."])
    refine(short, TASK, scores(0.5, 1.0), edits="auto", max_iterations=1)
    assert REFINE_INSTRUCTIONS in short.prompts[1]


def test_a_reviewer_revision_is_refined_by_edits() -> None:
    model = ScriptedChatModel(replies=[DRAFT, block("Waves are tall.", "Waves are low.")])
    answers = iter([{"action": "revise", "feedback": "calmer waves"}, {"action": "approve"}])
    result = refine(
        model,
        TASK,
        scores(1.0),
        edits=True,
        human_review="final",
        reviewer=lambda payload: next(answers),
    )
    revised = result.attempts[1]
    assert revised.move == "revise" and revised.edits == 1
    assert revised.response == DRAFT.replace("tall", "low")
    assert EDIT_INSTRUCTIONS in model.prompts[1] and "calmer waves" in model.prompts[1]


def test_each_candidate_is_edited_and_the_best_keeps_its_count() -> None:
    replies = [
        DRAFT,  # the first round's two candidates are samples, written whole
        DRAFT,
        block("Fish swim there.", "Gulls."),
        block("The sea is blue.", "Grey.") + block("Fish swim there.", "Gulls."),
    ]
    model = ScriptedChatModel(replies=replies)

    def evaluate(response: str, state: Any) -> float:
        return 0.2 if response == DRAFT else 0.4 if "Grey" not in response else 0.9

    result = refine(model, TASK, evaluate, edits=True, max_iterations=1, candidates=2)
    assert result.value == "Grey.\nWaves are tall.\nGulls."
    assert result.attempts[1].edits == 2
    assert [c.edits for c in result.attempts[1].candidates] == [1, 2]


def test_edits_must_be_true_false_or_auto() -> None:
    with pytest.raises(ValueError, match="edits must be True, False or 'auto'; got 'yes'"):
        create_refine_graph(lambda s: "x", scores(1.0), edits="yes")  # type: ignore[arg-type]


def test_a_run_context_turns_edits_on() -> None:
    model = ScriptedChatModel(replies=[DRAFT, block("Waves are tall.", "Waves are low.")])
    graph = create_refine_graph(model, scores(0.5, 1.0), max_iterations=1).compile()
    values = graph.invoke({"task": TASK}, context={"edits": True})
    assert values["response"] == DRAFT.replace("tall", "low")
    with pytest.raises(ValueError, match="edits must be"):
        graph.invoke({"task": TASK}, context={"edits": "always"})


def test_an_attempt_stored_before_edits_existed_loads_with_none() -> None:
    data = Attempt(index=0, response="x").model_dump()
    del data["edits"]
    assert Attempt.model_validate(data).edits is None
    assert Candidate.model_validate({"response": "x"}).edits is None


def test_the_edit_count_survives_a_checkpoint() -> None:
    model = ScriptedChatModel(replies=[DRAFT, block("Waves are tall.", "Waves are low.")])
    graph = create_refine_graph(model, scores(0.5, 1.0), max_iterations=1, edits=True)
    app = graph.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"task": TASK}, config)
    attempts = app.get_state(config).values["attempts"]
    assert [a.edits for a in attempts] == [None, 1]


# -- typed output -----------------------------------------------------------------------


class Poem(BaseModel):
    title: str
    lines: list[str]


POEM = {"title": "Sea", "lines": ["The sea is blue.", "Waves are tall."]}


def test_typed_edits_apply_to_the_pretty_json_and_are_validated() -> None:
    edit = block('    "Waves are tall."', '    "Waves are low.",\n    "Gulls cry."')
    model = ScriptedChatModel(replies=[json.dumps(POEM), edit])
    result = refine(model, TASK, scores(0.5, 1.0), edits=True, max_iterations=1, output_schema=Poem)
    assert result.output == Poem(
        title="Sea", lines=["The sea is blue.", "Waves are low.", "Gulls cry."]
    )
    assert result.attempts[1].edits == 1
    assert json.loads(result.attempts[1].response) == result.output.model_dump()
    # The prompt shows the object one key a line, and no schema-only instruction.
    prompt = model.prompts[1]
    assert json.dumps(POEM, indent=2) in prompt
    assert "matches this JSON Schema" not in prompt


def test_typed_edits_that_break_the_object_are_fail_with_the_validation_errors() -> None:
    model = ScriptedChatModel(replies=[json.dumps(POEM), block('"title": "Sea",', "")])
    evaluator = scores(0.5, 1.0)
    result = refine(model, TASK, evaluator, edits=True, max_iterations=1, output_schema=Poem)
    broken = result.attempts[1]
    assert broken.edits == 1 and broken.output is None
    assert broken.evaluation is not None and broken.evaluation.verdict == "FAIL"
    assert "$.title: Field required" in broken.evaluation.feedback
    assert len(evaluator.calls) == 1  # type: ignore[attr-defined]


def test_an_edit_round_past_the_context_retries_asking_for_the_whole_object() -> None:
    overflow = ValueError("request (2117 tokens) exceeds the available context size")
    rewrite = json.dumps({"title": "Sea", "lines": ["Calm."]})
    model = ScriptedChatModel(replies=[json.dumps(POEM), overflow, rewrite])
    result = refine(model, TASK, scores(0.5, 1.0), edits=True, max_iterations=1, output_schema=Poem)
    smallest = model.prompts[2]
    assert REFINE_INSTRUCTIONS in smallest and "matches this JSON Schema" in smallest
    assert result.attempts[1].edits is None
    assert result.output == Poem(title="Sea", lines=["Calm."])
