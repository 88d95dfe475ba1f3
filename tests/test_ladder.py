"""A ladder of models: the cheap rung does what it can, a stronger one only where it stalls."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_refine import Attempt, Budget, Evaluation, Usage, arefine, refine
from langgraph_refine._decisions._ladder import (
    STATE_ROUNDS,
    next_rung,
    reach_kind,
    reach_stats,
    rung_kind,
)
from langgraph_refine._decisions._strategy import MoveStats
from tests.fakes import ScriptedChatModel


class Named(ScriptedChatModel):
    """A scripted model that LangChain reports as `test:<name>`."""

    name_: str = "m"

    def _get_ls_params(self, **kwargs: Any) -> Any:
        return {"ls_provider": "test", "ls_model_name": self.name_}


def good(response: str, state: Any) -> float:
    return 1.0 if "good" in response else 0.2


def ladder() -> tuple[Named, Named]:
    return Named(name_="cheap", replies=["weak"]), Named(name_="strong", replies=["good"])


@pytest.mark.parametrize("strategy", ["chain", "sample", "explore"])
def test_each_strategy_climbs_after_a_round_that_did_not_raise_the_best(strategy: str) -> None:
    cheap, strong = ladder()
    result = refine([cheap, strong], "t", good, strategy=strategy, max_iterations=4)
    assert [(a.model, a.rung) for a in result.attempts] == [
        ("test:cheap", 0),
        ("test:cheap", 0),
        ("test:strong", 1),
    ]
    assert result.value == "good" and len(strong.calls) == 1


def test_a_run_whose_first_rung_passes_never_calls_another() -> None:
    cheap, strong = Named(name_="cheap", replies=["good"]), Named(name_="strong")
    result = refine([cheap, strong], "t", good)
    assert [a.model for a in result.attempts] == ["test:cheap"] and strong.calls == []


async def test_the_ladder_climbs_under_arefine_too() -> None:
    cheap, strong = ladder()
    result = await arefine([cheap, strong], "t", good, strategy="chain")
    assert [a.rung for a in result.attempts] == [0, 0, 1]


def test_a_ladder_of_mixed_kinds_and_a_callable_rung() -> None:
    def cheap(state: Any) -> str:
        return "weak"

    strong = Named(name_="strong", replies=["good"])
    result = refine([cheap, strong], "t", good, strategy="chain")
    assert [a.model for a in result.attempts] == ["cheap", "cheap", "test:strong"]


@pytest.mark.parametrize(
    ("generator", "message"),
    [([], "empty ladder"), ([lambda s: "a", 3], r"generator\[1\] of the ladder")],
)
def test_bad_ladders_fail_before_any_model_call(generator: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        refine(generator, "t", good)


def test_a_warm_record_skips_a_rung_that_never_raises_the_best() -> None:
    store = InMemoryStore()
    mid = Named(name_="mid", replies=["weak"])
    for _ in range(5):  # cold runs: cheap and mid rounds never raise, strong does
        refine(
            [Named(name_="cheap", replies=["weak"]), mid, Named(name_="strong", replies=["good"])],
            "t",
            good,
            strategy="explore",
            store=store,
            max_iterations=6,
        )
    mid_calls = len(mid.calls)
    cheap = Named(name_="cheap", replies=["weak"])
    strong = Named(name_="strong", replies=["good"])
    result = refine([cheap, mid, strong], "t", good, strategy="explore", store=store)
    # Warm: from where attempt 0 leaves the run, cheap never raised the best in five
    # rounds (`STATE_ROUNDS`), so it is left at once, and mid is skipped.
    assert [a.model for a in result.attempts] == ["test:cheap", "test:strong"]
    assert len(mid.calls) == mid_calls and len(cheap.calls) == 1


def test_the_record_counts_each_rungs_rounds() -> None:
    attempts = [
        Attempt(index=0, response="a", evaluation=Evaluation(score=0.2), model="c", rung=0),
        Attempt(
            index=1, response="b", parent=0, evaluation=Evaluation(score=0.2), model="c", rung=0
        ),
        Attempt(
            index=2, response="c", parent=1, evaluation=Evaluation(score=1.0), model="s", rung=1
        ),
    ]
    from langgraph_refine._decisions._strategy import round_stats

    stats = round_stats(attempts)
    assert stats[rung_kind("c")] == MoveStats(rounds=1, raised=0, fell=0)
    assert stats[rung_kind("s")] == MoveStats(rounds=1, raised=1, fell=0)


def _priced(model: str, cost: float, score: float, index: int, rung: int) -> Attempt:
    return Attempt(
        index=index,
        response="x",
        evaluation=Evaluation(score=score),
        model=model,
        rung=rung,
        parent=index - 1 if index else None,
        usage=Usage(calls=1, cost=cost),
    )


def test_a_rung_the_money_left_cannot_pay_for_is_not_chosen_while_a_cheaper_one_can() -> None:
    attempts = [_priced("c", 0.002, 0.2, 0, 0), _priced("s", 0.04, 0.3, 1, 1)]
    # Round 1 on the strong rung raised the best: it stays unless it cannot be paid.
    assert next_rung(attempts, ["c", "s"], money_left=1.0) == 1
    assert next_rung(attempts, ["c", "s"], money_left=0.01) == 0
    # Nothing payable: the chosen rung stands, and the meter stops the loop.
    assert next_rung(attempts, ["c", "s"], money_left=0.0) == 1


PRICES = {"cheap": {"input": 0.0, "output": 400.0}, "strong": {"input": 0.0, "output": 8000.0}}
"""Dollars per million tokens: the strong rung costs 20 times the cheap one."""


def test_cost_sums_every_rung_and_the_budget_stops_before_an_unaffordable_call() -> None:
    cheap = Named(name_="cheap", replies=["weak"])
    strong = Named(name_="strong", replies=["weak too"])
    result = refine(
        [cheap, strong],
        "t",
        good,
        strategy="chain",
        max_iterations=6,
        budget=Budget(max_cost=0.2, prices=PRICES),
    )
    per_model: dict[str, float] = {}
    for a in result.attempts:
        per_model[a.model or ""] = per_model.get(a.model or "", 0.0) + (a.usage.cost or 0.0)
    assert set(per_model) == {"test:cheap", "test:strong"}
    assert result.usage.cost == pytest.approx(sum(per_model.values()))
    assert result.usage.cost <= 0.2


def test_strategy_records_show_a_ladders_rungs_on_their_own_level() -> None:
    from langgraph_refine import strategy_records

    store = InMemoryStore()
    cheap, strong = ladder()
    refine([cheap, strong], "t", good, strategy="explore", store=store, max_iterations=4)
    (record,) = strategy_records(store).values()
    assert record["rungs"] == {
        "test:cheap": {"rounds": 1, "raised": 0, "fell": 0},
        "test:strong": {"rounds": 1, "raised": 1, "fell": 0},
    }
    assert not any(kind.startswith("rung:") for kind in record)


def test_a_rung_not_called_yet_is_priced_and_not_chosen_when_the_money_left_cannot_pay() -> None:
    cheap, strong = ladder()
    result = refine(
        [cheap, strong],
        "t",
        good,
        strategy="chain",
        max_iterations=3,
        patience=None,
        budget=Budget(max_cost=0.03, prices=PRICES),  # a strong call costs 0.04
    )
    assert strong.calls == [] and [a.model for a in result.attempts] == ["test:cheap"] * 4
    assert result.usage.cost == pytest.approx(0.008)


def test_a_warm_climb_goes_to_the_rung_that_raises_most_per_dollar_never_staying_stalled() -> None:
    stalled = [
        Attempt(index=0, response="a", evaluation=Evaluation(score=0.3), model="c", rung=0),
        Attempt(
            index=1, response="b", parent=0, evaluation=Evaluation(score=0.32), model="c", rung=0
        ),
    ]
    record = {
        rung_kind("c"): MoveStats(rounds=10, raised=9),  # cheap usually raises, elsewhere
        rung_kind("m"): MoveStats(rounds=10, raised=5),
        rung_kind("s"): MoveStats(rounds=10, raised=9),
    }
    prices = {"c": 0.001, "m": 0.04, "s": 0.01}
    assert next_rung(stalled, ["c", "m", "s"], record=record, prices=prices) == 2
    assert next_rung(stalled, ["c", "m", "s"], record=record) == 1  # prices unknown: one up
    assert next_rung(stalled, ["c", "s"], record=record, prices=prices) == 1


def _cheap_first(score: float) -> list[Attempt]:
    return [Attempt(index=0, response="a", evaluation=Evaluation(score=score), model="c", rung=0)]


def _cheap_round(score: float) -> Attempt:
    """The cheap rung's refinement of attempt 0."""
    evaluation = Evaluation(score=score)
    return Attempt(index=1, response="b", parent=0, evaluation=evaluation, model="c", rung=0)


def test_a_warm_ladder_leaves_the_cheap_rung_only_from_the_states_where_it_stalls() -> None:
    from langgraph_refine._decisions._strategy import state_kind

    # Pooled over every state the cheap rung raises half the time: from a low first
    # score it never raised the best by a band, from a high one it mostly did.
    record = {
        rung_kind("c"): MoveStats(rounds=20, raised=10),
        state_kind(rung_kind("c"), "b0/start"): MoveStats(rounds=10, raised=0),
        state_kind(rung_kind("c"), "b3/start"): MoveStats(rounds=10, raised=10),
    }
    prices = {"c": 0.002, "s": 0.04}
    assert next_rung(_cheap_first(0.1), ["c", "s"], record=record, prices=prices) == 1
    assert next_rung(_cheap_first(0.8), ["c", "s"], record=record, prices=prices) == 0
    # A state the record has not seen: the cold rule (attempt 0 raised the best: stay).
    assert next_rung(_cheap_first(0.4), ["c", "s"], record=record, prices=prices) == 0
    # Cold (no record) every first rung stays after attempt 0.
    assert next_rung(_cheap_first(0.1), ["c", "s"], prices=prices) == 0


def test_a_warm_ladder_stays_from_a_state_where_its_rung_raises_even_after_a_flat_round() -> None:
    from langgraph_refine._decisions._strategy import state_kind

    flat = [*_cheap_first(0.8), _cheap_round(0.8)]
    record = {state_kind(rung_kind("c"), "b3/flat"): MoveStats(rounds=10, raised=6)}
    assert next_rung(flat, ["c", "s"]) == 1  # cold: a flat round climbs
    assert next_rung(flat, ["c", "s"], record=record) == 0
    # Per dollar: the rung above raising far more often for its price is climbed to.
    record[state_kind(rung_kind("s"), "b3/flat")] = MoveStats(rounds=10, raised=10)
    assert next_rung(flat, ["c", "s"], record=record, prices={"c": 0.03, "s": 0.04}) == 1
    assert next_rung(flat, ["c", "s"], record=record, prices={"c": 0.002, "s": 0.04}) == 0


def test_a_rungs_round_counts_as_raising_by_state_only_when_it_gained_a_band() -> None:
    from langgraph_refine._decisions._strategy import latest_state_stats

    def two(second: float) -> list[Attempt]:
        return [*_cheap_first(0.1), _cheap_round(second)]

    creeping = latest_state_stats(two(0.2))
    assert creeping["rung:c@b0/start"] == MoveStats(rounds=1, raised=0)
    assert creeping["refine@b0/start"] == MoveStats(rounds=1, raised=1)  # moves count any raise
    assert latest_state_stats(two(0.4))["rung:c@b0/start"] == MoveStats(rounds=1, raised=1)


# -- where the cheap rung gets there: runs that started like this one decide --------------------


def _scored(response: str, state: Any) -> float:
    """Reads the score a scripted rung wrote (`score=<x>`)."""
    return float(response.partition("score=")[2])


def _creeping_cheap() -> Named:
    """A cheap rung that raises its answer by 0.3 a round from 0.1: never to 0.9 in 3 tries."""

    def reply(messages: Any) -> str:
        text = messages[-1].text
        if "<answer>" in text:  # a refinement prompt shows the attempt refined
            return f"score={float(text.rpartition('score=')[2][:4]) + 0.3:.2f}"
        return "score=0.10"

    return Named(name_="cheap", replies=[reply])


def test_the_ladder_climbs_at_once_from_a_start_where_the_cheap_rung_never_got_there() -> None:
    from langgraph_refine import strategy_records

    store, strong = InMemoryStore(), Named(name_="strong", replies=["score=1.00"])
    loop = {"strategy": "explore", "store": store, "max_iterations": 2, "patience": None}
    runs = [
        refine([_creeping_cheap(), strong], "t", _scored, target_score=0.9, **loop)
        for _ in range(STATE_ROUNDS + 1)
    ]
    # Each round of the cheap rung raised the best by a band, so by the rounds alone it
    # stays; but in five runs that started at 0.1 it never reached the target...
    assert [a.model for a in runs[0].attempts] == ["test:cheap"] * 3
    (record,) = strategy_records(store).values()
    assert record["states"]["b0/start"]["reach"]["test:cheap"] == {
        "rounds": STATE_ROUNDS,
        "raised": 0,
        "fell": 0,
    }
    # ...so the next such run climbs right after its first answer, and gets there.
    assert [a.model for a in runs[-1].attempts] == ["test:cheap", "test:strong"]
    assert runs[-1].stop_reason == "target_reached"


def test_the_ladder_stays_after_a_first_answer_like_those_the_cheap_rung_finished() -> None:
    from langgraph_refine._decisions._strategy import state_kind

    # From a first answer in band 2, the cheap rung's rounds rarely raised the best by a
    # band, but in most runs that started there it reached the target: it stays.
    record = {
        state_kind(rung_kind("c"), "b2/start"): MoveStats(rounds=10, raised=1),
        state_kind(reach_kind("c"), "b2/start"): MoveStats(rounds=STATE_ROUNDS, raised=3),
    }
    assert next_rung(_cheap_first(0.6), ["c", "s"], record=record) == 0
    del record[state_kind(reach_kind("c"), "b2/start")]
    assert next_rung(_cheap_first(0.6), ["c", "s"], record=record) == 1  # the rounds decide
    # Too few runs from that start: the rounds decide too.
    record[state_kind(reach_kind("c"), "b2/start")] = MoveStats(STATE_ROUNDS - 1, raised=3)
    assert next_rung(_cheap_first(0.6), ["c", "s"], record=record) == 1
    # Never reached in enough runs: it climbs at once, also after a round that raised.
    never = {state_kind(reach_kind("c"), "b2/start"): MoveStats(rounds=STATE_ROUNDS)}
    assert next_rung(_cheap_first(0.6), ["c", "s"], record=never) == 1
    assert next_rung([*_cheap_first(0.6), _cheap_round(0.9)], ["c", "s"], record=never) == 1
    assert next_rung(_cheap_first(0.6), ["c", "s"]) == 0  # cold: the first answer stays


def test_a_first_answer_climbs_at_once_only_where_the_cheap_rung_nearly_never_got_there() -> None:
    from langgraph_refine._decisions._strategy import state_kind

    def runs(tried: int, reached: int) -> dict[str, MoveStats]:
        return {state_kind(reach_kind("c"), "b2/start"): MoveStats(tried, raised=reached)}

    # Once in seven runs from this start (smoothed 2/9, above the rate a round needs to
    # stay): too often to give up on the first answer alone.
    assert next_rung(_cheap_first(0.6), ["c", "s"], record=runs(7, 1)) == 0
    # Once in twelve (2/14): the rung nearly never gets there from here; climb at once.
    assert next_rung(_cheap_first(0.6), ["c", "s"], record=runs(12, 1)) == 1


def test_reach_counts_a_rung_tried_from_the_first_answers_state_and_whether_it_got_there() -> None:
    strong = Attempt(
        index=2, response="c", parent=1, evaluation=Evaluation(score=0.95), model="s", rung=1
    )
    run = [*_cheap_first(0.3), _cheap_round(0.5), strong]
    assert reach_stats(run, target=0.9) == {
        "reach:c@b1/start": MoveStats(rounds=1, raised=0),
        "reach:s@b1/start": MoveStats(rounds=1, raised=1),
    }
    assert reach_stats(run, target=None) == {  # no target: only a PASS reaches it
        "reach:c@b1/start": MoveStats(rounds=1, raised=0),
        "reach:s@b1/start": MoveStats(rounds=1, raised=0),
    }
    # A first rung left right after attempt 0 was not tried; one whose attempt 0 got there was.
    assert reach_stats([*_cheap_first(0.3), strong.model_copy(update={"index": 1})], 0.9) == {
        "reach:s@b1/start": MoveStats(rounds=1, raised=1)
    }
    assert reach_stats(_cheap_first(0.95), 0.9) == {"reach:c@b3/start": MoveStats(1, 1)}
    no_ladder = [Attempt(index=0, response="a", evaluation=Evaluation(score=0.3))]
    assert reach_stats(no_ladder, 0.9) == {}


def test_reach_counts_stay_under_the_first_answers_state_whatever_the_rungs_name() -> None:
    from langgraph_refine._records._record import RecordUpdate
    from langgraph_refine._records._record_items import RecordView

    # Two rungs of another kind sharing a name: the later one's attempts name it `f@rung1`.
    first = Attempt(index=0, response="a", evaluation=Evaluation(score=0.3), model="f", rung=0)
    second = Attempt(
        index=1, response="b", parent=0, evaluation=Evaluation(score=0.95), model="f@rung1", rung=1
    )
    (put,) = RecordUpdate("k", "run", [first, second], target=0.9).writes(RecordView()).first
    assert put.value is not None
    assert put.value["states"]["b1/start"]["reach:f@rung1"] == {"rounds": 1, "raised": 1, "fell": 0}
