"""A ladder whose first rung is the real local model, recorded (cassettes/test_ladder_recorded).

SmolLM2 (135M) is the cheap rung; a scripted model stands for a stronger, dearer one. The
check is a plain keyword check, so the only recorded traffic is the small model's answers.
The test checks what the ladder did with them: SmolLM2 wrote attempt 0, the ladder
climbed only after a round on it that did not raise the best score, the strong rung's
answer passed, every call was priced at its own model's price, and the batch report's
attempt tree names both models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from langgraph_refine import Budget, refine
from langgraph_refine._decisions._ladder import MIN_GAIN
from langgraph_refine.evaluators import contains_all
from tests import recording
from tests.test_ladder import Named

TASK = "Name the mathematician who proposed the imitation game, and the year, in one sentence."
WORDS = ["Alan Turing", "1950", "imitation game"]
STRONG_ANSWER = "Alan Turing proposed the imitation game in 1950."
PRICES = {
    recording.LOCAL_MODEL: {"input": 0.1, "output": 0.2},
    "strong": {"input": 5.0, "output": 15.0},
}


@pytest.mark.vcr
def test_the_local_model_is_the_first_rung_and_the_ladder_climbs_priced_per_model(
    record_mode: str, vcr: Any, tmp_path: Path
) -> None:
    cheap = recording.recorded_model(record_mode, temperature=0.0, max_tokens=60)
    strong = Named(name_="strong", replies=[STRONG_ANSWER], input_tokens=40, output_tokens=12)
    result = refine(
        [cheap, strong],
        TASK,
        contains_all(WORDS),
        strategy="chain",
        max_iterations=4,
        budget=Budget(prices=PRICES),
    )

    local = f"openai:{recording.LOCAL_MODEL}"
    models = [a.model for a in result.attempts]
    assert models[0] == local and models[-1] == "test:strong"
    assert set(models) == {local, "test:strong"}
    # Climbing: the strong rung writes only after a round on SmolLM2 that did not raise the
    # best score by MIN_GAIN, and once it has climbed the ladder never goes back down.
    first_strong = models.index("test:strong")
    assert first_strong >= 2 and models[first_strong:] == ["test:strong"] * (
        len(models) - first_strong
    )
    scores = [a.score for a in result.attempts]
    assert scores[first_strong - 1] < max(scores[: first_strong - 1]) + MIN_GAIN
    assert [a.rung for a in result.attempts] == [0] * first_strong + [1] * (
        len(models) - first_strong
    )
    assert result.stop_reason in {"target_reached", "passed"} and result.value == STRONG_ANSWER
    assert len(strong.calls) == len(models) - first_strong
    assert len(recording.sent_bodies(vcr)) == first_strong  # every SmolLM2 call was recorded

    # Priced per model: each attempt's cost is its own model's price times its tokens.
    for attempt in result.attempts:
        price = PRICES[recording.LOCAL_MODEL if attempt.model == local else "strong"]
        usage = attempt.usage
        tokens = usage.input_tokens * price["input"] + usage.output_tokens * price["output"]
        expected = tokens / 1e6
        assert usage.cost == pytest.approx(expected), attempt.model
    assert result.usage.cost == pytest.approx(sum(a.usage.cost or 0.0 for a in result.attempts))

    # The CLI's row and report show both models, with calls and cost per model.
    from langgraph_refine.cli._report import TaskRecord, render_report
    from langgraph_refine.cli._single import result_json

    row = {"id": "turing", "task": TASK, **result_json(result)}
    assert list(row["models"]) == [local, "test:strong"]
    assert row["models"]["test:strong"]["calls"] == len(models) - first_strong
    page = render_report([TaskRecord.from_json(row)], source="ladder.jsonl")
    assert f"<title>attempt 0 by {local}: " in page
    assert f"<title>attempt {first_strong} by test:strong: " in page
    assert f'<tr data-model="{local}">' in page and '<tr data-model="test:strong">' in page
