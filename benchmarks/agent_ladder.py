"""The ladder inside an agent against the graph's ladder, on the same tasks (scripted models).

Two scripted chat models, a cheap one ($0.002 a call) and a strong one ($0.04 a call), as
in the `ladder` benchmark: on easy tasks the cheap model passes at once, on medium ones
after one or two refinements, on hard ones never; the strong one passes easy and medium
tasks at once and a hard one after one refinement. The evaluator reads the quality the
reply carries (target 0.9, at most 4 answers a task). Each task runs twice with a fresh
pair of models: through the graph (`refine([cheap, strong], ...)`) and through an agent
(`create_agent(own, middleware=[RefineMiddleware(models=[cheap, strong])])`, whose own
model is never called), with the same strategy. Quality is the final best score; cost
is the sum of the calls' prices. Both run the same round (`_round.evaluate_round`), so
the goal is parity: quality within 0.01 and cost within 5%.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from benchmarks._harness import BenchResult, Figure, md_table
from langgraph_refine import RefineMiddleware, RefineResult, refine

PRICES = {"cheap": 0.002, "strong": 0.04}
MIX = {"easy": 0.4, "medium": 0.3, "hard": 0.3}
QUALITY = {
    "cheap": {"easy": [1.0], "medium": [0.5, 0.7, 1.0], "hard": [0.3, 0.35, 0.4]},
    "strong": {"easy": [1.0], "medium": [1.0], "hard": [0.6, 1.0]},
}
MAX_ITERATIONS = 3
TASKS = 60
STRATEGIES = ("chain", "explore")


class Scripted(BaseChatModel):
    """A scripted model: its k-th reply on a task carries the quality its table gives."""

    name_: str
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _get_ls_params(self, **kwargs: Any) -> Any:
        return {"ls_provider": "bench", "ls_model_name": self.name_}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:  # type: ignore[override]
        return self  # the agent has no tools; binding is a no-op

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = " ".join(str(m.content) for m in messages)
        kind = next(k for k in MIX if f"{k}: task" in text)
        table = QUALITY.get(self.name_, {kind: [0.0]})[kind]
        quality = table[min(self.calls, len(table) - 1)]
        self.calls += 1
        reply = AIMessage(f"{self.name_} answer q={quality}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def judge(response: str, state: Any) -> float:
    return float(response.rsplit("q=", 1)[1])


def tasks(n: int, seed: int = 0) -> list[str]:
    """`n` tasks in the exact proportions of `MIX`, shuffled."""
    kinds = [kind for kind, share in MIX.items() for _ in range(round(n * share))]
    random.Random(seed).shuffle(kinds)
    return [f"{kind}: task {i}" for i, kind in enumerate(kinds)]


def outcome(result: RefineResult) -> tuple[float, float]:
    """Quality (the best score) and cost (each answer's model's price)."""
    cost = sum(PRICES[(a.model or "").split(":")[-1]] for a in result.attempts)
    return result.score or 0.0, cost


def through_graph(task: str, strategy: str) -> tuple[float, float]:
    ladder = [Scripted(name_="cheap"), Scripted(name_="strong")]
    result = refine(
        ladder, task, judge, strategy=strategy, target_score=0.9, max_iterations=MAX_ITERATIONS
    )
    return outcome(result)


def through_agent(task: str, strategy: str) -> tuple[float, float]:
    own = Scripted(name_="own")
    middleware = RefineMiddleware(
        judge,
        models=[Scripted(name_="cheap"), Scripted(name_="strong")],
        strategy=strategy,  # type: ignore[typeddict-item]
        target_score=0.9,
        max_iterations=MAX_ITERATIONS,
    )
    agent = create_agent(own, tools=[], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage(task)]})
    assert own.calls == 0, "every call of the loop is the ladder's"
    return outcome(middleware.result(state))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def run(quick: bool = False) -> BenchResult:
    result = BenchResult(
        name="agent_ladder",
        title="The ladder in an agent against the graph's ladder, same tasks (scripted)",
    )
    work = tasks(20 if quick else TASKS)
    rows = []
    for strategy in STRATEGIES:
        graph = [through_graph(t, strategy) for t in work]
        agent = [through_agent(t, strategy) for t in work]
        gq, gc = _mean([q for q, _ in graph]), _mean([c for _, c in graph])
        aq, ac = _mean([q for q, _ in agent]), _mean([c for _, c in agent])
        same = sum(1 for g, a in zip(graph, agent, strict=True) if g == a)
        rows.append(
            [strategy, f"{gq:.3f}", f"{aq:.3f}", f"{gc:.4f}", f"{ac:.4f}", f"{same}/{len(work)}"]
        )
        quality_gap = abs(aq - gq)
        cost_ratio = ac / gc if gc else 1.0
        result.figures += [
            Figure(
                f"{strategy}: |agent - graph| quality",
                quality_gap,
                unit="",
                target="<= 0.01",
                passed=quality_gap <= 0.01,
            ),
            Figure(
                f"{strategy}: agent cost / graph cost",
                cost_ratio,
                target="0.95-1.05x",
                passed=0.95 <= cost_ratio <= 1.05,
            ),
        ]
    result.tables.append(
        md_table(
            [
                "strategy",
                "graph quality",
                "agent quality",
                "graph cost $",
                "agent cost $",
                "tasks with the same outcome",
            ],
            rows,
        )
    )
    result.notes.append(
        f"{len(work)} tasks ({', '.join(f'{int(s * 100)}% {k}' for k, s in MIX.items())}), "
        f"cheap ${PRICES['cheap']} and strong ${PRICES['strong']} a call, target 0.9, at most "
        f"{1 + MAX_ITERATIONS} answers. Each task runs through the graph and through an agent "
        "with fresh models; the agent's own model is never called (every call of a round, "
        "tool turns included, is made by the round's rung). Both drive the same round, so "
        "the outcomes agree task by task, not only on average."
    )
    return result
