"""A ladder of models against one model, at equal call caps (scripted models, priced per call).

Two scripted chat models: a cheap one ($0.002 a call) and a strong one ($0.04 a call).
The tasks come in the exact shares of `MIX` (40% easy, 30% medium, 30% hard). Each task
has a hidden difficulty: the cheap model's k-th answer on it reaches a quality
that grows with k only on easy and medium tasks (it passes an easy task at once, a medium
one after one or two refinements, never a hard one); the strong model passes easy and
medium tasks at once and a hard task after one refinement. The evaluator reads the
quality the reply carries (a scripted judge without noise), target 0.9, at most 4
generations a task. Arms: cheap alone, strong alone, a fixed rule (climb after the first
round that did not pass, written as a callable ladder of one step), the ladder cold and
warm (explore with one store over all tasks, after a first pass over them), and a
three-rung ladder with a middle model ($0.01) that never helps where the cheap one
stalls, cold and warm. Quality is
the final best score (1 = passed); cost is the sum of the calls' prices. Intervals are
95% bootstrap intervals over tasks, differences paired by task.

Rules tried and dropped by this bench: climbing after a round that raised the best by
any amount (a cheap model creeping up 0.05 a round never handed over: quality 0.27 below
strong alone), and keeping a stalled rung while its pooled raise rate per dollar beat the
next one's (a cheap rung always wins per dollar: it was never left on hard tasks, 0.18
below strong alone). Per dollar now only chooses among the rungs above.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.store.memory import InMemoryStore

from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine import Budget, refine

CHEAP_PRICE = 0.002
STRONG_PRICE = 0.04
MAX_ITERATIONS = 3
TASKS = 60
MIX = {"easy": 0.4, "medium": 0.3, "hard": 0.3}
CHEAP_QUALITY = {"easy": [1.0], "medium": [0.5, 0.7, 1.0], "hard": [0.3, 0.35, 0.4]}
MID_PRICE = 0.01
MID_QUALITY = {"easy": [1.0], "medium": [0.5, 0.55, 0.6], "hard": [0.3, 0.32, 0.34]}
"""A middle rung that never helps where the cheap one stalls (the warm record learns it)."""
STRONG_QUALITY = {"easy": [1.0], "medium": [1.0], "hard": [0.6, 1.0]}


class Priced(BaseChatModel):
    """A scripted model: its k-th reply to a task carries the quality its table gives."""

    name_: str
    quality: dict[str, list[float]]
    tokens_out: int = 100
    calls_by_kind: dict[str, int] = {}

    @property
    def _llm_type(self) -> str:
        return "priced"

    def _get_ls_params(self, **kwargs: Any) -> Any:
        return {"ls_provider": "bench", "ls_model_name": self.name_}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = " ".join(str(m.content) for m in messages)
        kind = next(k for k in MIX if f"{k}: task" in text)
        own = self.calls_by_kind.get(kind, 0)  # one instance per run: its k-th answer
        self.calls_by_kind[kind] = own + 1
        table = self.quality[kind]
        q = table[min(own, len(table) - 1)]
        reply = AIMessage(
            f"{self.name_} answer q={q}",
            usage_metadata={"input_tokens": 0, "output_tokens": self.tokens_out, "total_tokens": 100},
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def quality(response: str, state: Any) -> float:
    return float(response.rsplit("q=", 1)[1])


def prices() -> dict[str, dict[str, float]]:
    # USD per million tokens; 100 output tokens a call.
    return {
        "cheap": {"input": 0.0, "output": CHEAP_PRICE * 1e4},
        "strong": {"input": 0.0, "output": STRONG_PRICE * 1e4},
        "mid": {"input": 0.0, "output": MID_PRICE * 1e4},
    }


def tasks(n: int, seed: int = 0) -> list[str]:
    """`n` tasks in the exact proportions of `MIX` (stratified), in a shuffled order."""
    kinds = [kind for kind, share in MIX.items() for _ in range(round(n * share))]
    random.Random(seed).shuffle(kinds)
    return [f"{kind}: task {i}" for i, kind in enumerate(kinds)]


def floor_cost(kind: str) -> float:
    """The least any ladder can pay on a task: the cheap model's calls up to its pass,
    or one cheap call and then the strong model's calls to its pass.
    """
    cheap_passes = next((k + 1 for k, q in enumerate(CHEAP_QUALITY[kind]) if q >= 0.9), None)
    strong_calls = next(k + 1 for k, q in enumerate(STRONG_QUALITY[kind]) if q >= 0.9)
    if cheap_passes is not None:
        return cheap_passes * CHEAP_PRICE
    return CHEAP_PRICE + strong_calls * STRONG_PRICE


def models() -> tuple[Priced, Priced]:
    return (
        Priced(name_="cheap", quality=CHEAP_QUALITY, calls_by_kind={}),
        Priced(name_="strong", quality=STRONG_QUALITY, calls_by_kind={}),
    )


def three_rungs() -> list[Priced]:
    cheap, strong = models()
    return [cheap, Priced(name_="mid", quality=MID_QUALITY, calls_by_kind={}), strong]


def run_arm(generator: Any, task: str, **kwargs: Any) -> tuple[float, float]:
    kwargs.setdefault("max_iterations", MAX_ITERATIONS)
    result = refine(
        generator,
        task,
        quality,
        target_score=0.9,
        patience=None,
        budget=Budget(max_cost=10.0, prices=prices()),
        **kwargs,
    )
    return float(result.score or 0.0), float(result.usage.cost or 0.0)


def fixed_rule(task: str) -> tuple[float, float]:
    """Climb after the first round that did not pass: cheap once, then strong."""
    cheap, strong = models()
    score, cost = run_arm(cheap, task, max_iterations=0, strategy="chain")
    if score >= 0.9:
        return score, cost
    s2, c2 = run_arm(strong, task, strategy="chain", max_iterations=MAX_ITERATIONS - 1)
    return max(score, s2), cost + c2


def bootstrap(values: Sequence[float], seed: int = 1) -> tuple[float, float]:
    rng = random.Random(seed)
    means = sorted(
        sum(rng.choice(values) for _ in values) / len(values) for _ in range(2000)
    )
    return means[50], means[1949]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def run(quick: bool = False) -> BenchResult:
    result = BenchResult(name="ladder", title="A ladder of models at equal call caps (scripted)")
    work = tasks(20 if quick else TASKS)
    arms: dict[str, Callable[[str], tuple[float, float]]] = {
        "cheap alone": lambda t: run_arm(models()[0], t, strategy="chain"),
        "strong alone": lambda t: run_arm(models()[1], t, strategy="chain"),
        "fixed rule": fixed_rule,
        "ladder cold (chain)": lambda t: run_arm(list(models()), t, strategy="chain"),
        "ladder cold (explore)": lambda t: run_arm(list(models()), t, strategy="explore"),
    }
    outcomes: dict[str, list[tuple[float, float]]] = {
        name: [arm(t) for t in work] for name, arm in arms.items()
    }
    store = InMemoryStore()
    for t in work:  # a first pass fills the record; the warm arm is measured on a second
        run_arm(list(models()), t, strategy="explore", store=store)
    outcomes["ladder warm (explore)"] = [
        run_arm(list(models()), t, strategy="explore", store=store) for t in work
    ]
    three = InMemoryStore()
    outcomes["3 rungs cold (explore)"] = [
        run_arm(three_rungs(), t, strategy="explore") for t in work
    ]
    for t in work:
        run_arm(three_rungs(), t, strategy="explore", store=three)
    outcomes["3 rungs warm (explore)"] = [
        run_arm(three_rungs(), t, strategy="explore", store=three) for t in work
    ]
    strong_q = [q for q, _ in outcomes["strong alone"]]
    strong_c = _mean([c for _, c in outcomes["strong alone"]])
    rows = []
    for name, pairs in outcomes.items():
        qs, cs = [q for q, _ in pairs], [c for _, c in pairs]
        lo, hi = bootstrap(qs)
        clo, chi = bootstrap(cs)
        gap = [s - q for s, q in zip(strong_q, qs, strict=True)]
        glo, ghi = bootstrap(gap)
        rows.append(
            [name, f"{_mean(qs):.3f} ({lo:.3f}-{hi:.3f})", f"{_mean(cs):.4f} ({clo:.4f}-{chi:.4f})",
             f"{_mean(cs) / strong_c:.2f}x", f"{_mean(gap):+.3f} ({glo:+.3f}-{ghi:+.3f})"]
        )
    result.tables.append(
        md_table(["arm", "quality (95% CI)", "mean cost $ (95% CI)", "cost / strong", "strong - arm quality (paired)"], rows)
    )
    floor = _mean([floor_cost(t.split(":")[0]) for t in work])
    rows.append(["floor: any ladder (cheap first, climbs at once)", "1.000", f"{floor:.4f}",
                 f"{floor / strong_c:.2f}x", "+0.000"])
    warm = outcomes["ladder warm (explore)"]
    warm_gap = _mean(strong_q) - _mean([q for q, _ in warm])
    warm_cost = _mean([c for _, c in warm]) / strong_c
    fixed_cost = _mean([c for _, c in outcomes["fixed rule"]])
    result.figures += [
        Figure("warm ladder: strong alone's quality minus the ladder's", warm_gap, unit="",
               target="<= 0.03", passed=warm_gap <= 0.03),
        Figure("warm ladder: cost / strong alone's cost", warm_cost, target="<= 0.6x",
               passed=warm_cost <= 0.6),
        Figure("warm ladder: cost / fixed rule's cost", _mean([c for _, c in warm]) / fixed_cost,
               target="< 1x at equal quality",
               passed=_mean([c for _, c in warm]) < fixed_cost),
    ]
    result.figures.append(
        Figure("floor: the least any cheap-first ladder pays / strong alone", floor / strong_c)
    )
    cold3, warm3 = outcomes["3 rungs cold (explore)"], outcomes["3 rungs warm (explore)"]
    result.figures.append(
        Figure(
            "3 rungs (a useless middle one): warm quality minus cold",
            _mean([q for q, _ in warm3]) - _mean([q for q, _ in cold3]),
            unit="",
            target="> 0 (the record skips the useless rung)",
            passed=_mean([q for q, _ in warm3]) > _mean([q for q, _ in cold3]),
        )
    )
    result.notes.append(__doc__ or "")
    return result
