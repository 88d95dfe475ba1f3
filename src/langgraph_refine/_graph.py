"""`create_refine_graph`: assemble the nodes into the refine loop's `StateGraph`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from langgraph_refine._budget import Budget
from langgraph_refine._inline import Inline
from langgraph_refine._memory import DEFAULT_MEMORY, MemoryPolicy, validate_memory
from langgraph_refine._models import resolve_chat_model
from langgraph_refine._nodes import (
    REVIEW_MODES,
    EvaluatorNode,
    FinalizeNode,
    GeneratorNode,
    HumanReview,
    ReviewNode,
    prepare,
)
from langgraph_refine._retry import DEFAULT_RETRY_POLICY
from langgraph_refine._router import route_after_evaluation, route_after_generation
from langgraph_refine._state import RefineInput, RefineOutput, RefineState
from langgraph_refine._stop_rules import StopRules
from langgraph_refine.evaluators._base import EvaluatorLike
from langgraph_refine.evaluators._combine import as_evaluator

GeneratorLike = BaseChatModel | str | Callable[..., Any]
BUDGET_MODES = ("stop", "raise")


def create_refine_graph(
    generator: GeneratorLike,
    evaluator: EvaluatorLike = None,
    *,
    judge_model: BaseChatModel | str | None = None,
    target_score: float = 0.9,
    max_iterations: int = 4,
    patience: int | None = 2,
    min_delta: float = 0.0,
    budget: Budget | None = None,
    on_budget_exhausted: Literal["stop", "raise"] = "stop",
    memory: MemoryPolicy = DEFAULT_MEMORY,
    human_review: HumanReview | None = None,
    name: str = "refine",
    candidates: int = 1,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = DEFAULT_RETRY_POLICY,
) -> StateGraph[RefineState, None, RefineInput, RefineOutput]:
    """Build the refine loop as an uncompiled `StateGraph`.

    Compile it yourself, with your own checkpointer for persistence and human review:
    `create_refine_graph(model).compile(checkpointer=saver)`. The graph reads `task` (or
    the last human message in `messages`) and writes `response` (and, for a task taken
    from `messages`, appends the answer there as one `AIMessage`).

    Args:
        generator: A chat model, a `"provider:model"` string, or a callable
            `(state) -> str` (sync or async) that builds its own prompt.
        evaluator: A callable `(response, state) -> float | Evaluation` (sync or async),
            a chat model (LLM judge), a list of evaluators (combined), or None for an LLM
            judge on `judge_model` (falling back to the generator's model).
        judge_model: The model for the default LLM judge.
        target_score: Stop once an attempt scores at least this, in [0, 1].
        max_iterations: Refinement rounds after the first generation (>= 0).
        patience: Stop after this many refinement rounds without raising the best score
            by more than `min_delta` (>= 1); None disables the rule.
        min_delta: Improvement that counts as progress (>= 0).
        budget: Limits on model calls, tokens and seconds, checked before every call.
        on_budget_exhausted: `"stop"` returns the best so far; `"raise"` raises
            `BudgetExhaustedError` carrying it.
        memory: Earlier attempts shown to the generator: `"best_and_last"` (default,
            bounded), `"last"`, `"all"`, or an int window of the latest attempts.
        human_review: None, `"final"` (interrupt when the loop would stop) or
            `"every_round"` (interrupt after every evaluation). Needs a checkpointer.
        name: The loop's name, used in run names, tags and stream events.
        candidates: Responses sampled per round (>= 1). Each is evaluated and the best
            becomes the round's attempt, with its feedback driving the next round.
            Every candidate is a model call (and a judge call with an LLM judge).
        retry_policy: Retry policy of the model-calling nodes; by default transient
            provider errors are retried with backoff and other errors fail at once.

    Returns:
        The uncompiled graph, with nodes `prepare`, `generate`, `evaluate`, `finalize`
        (and `review` with human review).

    Raises:
        ValueError: If an option is outside its allowed range (the message names it).

    Example:
        >>> from langgraph_refine import create_refine_graph
        >>> graph = create_refine_graph(
        ...     lambda state: "a draft", lambda response, state: 1.0
        ... ).compile()
        >>> graph.invoke({"task": "Write a draft."})["response"]
        'a draft'
    """
    stop_rules = StopRules(target_score, max_iterations, patience, min_delta)
    validate_memory(memory)
    if on_budget_exhausted not in BUDGET_MODES:
        raise ValueError(
            f"on_budget_exhausted must be 'stop' or 'raise', got {on_budget_exhausted!r}"
        )
    if human_review is not None and human_review not in REVIEW_MODES:
        raise ValueError(
            f"human_review must be None, 'final' or 'every_round'; got {human_review!r}"
        )
    if budget is not None and not isinstance(budget, Budget):
        raise ValueError(f"budget must be a Budget or None, got {type(budget).__name__}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")

    gen = (
        resolve_chat_model(generator, option="generator")
        if isinstance(generator, str)
        else generator
    )
    if evaluator is None:
        judge = judge_model if judge_model is not None else gen
        if not isinstance(judge, BaseChatModel | str):
            raise ValueError(
                "evaluator=None uses an LLM judge, which needs a model: pass judge_model=... "
                "or an evaluator (the generator is a plain callable)"
            )
        from langgraph_refine.evaluators import llm_judge

        evaluator = llm_judge(judge)
    elif judge_model is not None:
        raise ValueError("judge_model is only used when evaluator is None; pass one or the other")
    evaluator = as_evaluator(evaluator)

    builder = StateGraph(RefineState, input_schema=RefineInput, output_schema=RefineOutput)
    # The instant steps run inline: no worker thread per step under ainvoke (see _inline).
    builder.add_node("prepare", Inline(prepare))
    # The nodes accept any mapping with the RefineState keys (so they fit custom states);
    # add_node's type variable wants the exact state type.
    builder.add_node(  # type: ignore[type-var]
        "generate",
        GeneratorNode(gen, memory=memory, budget=budget, name=name, candidates=candidates),
        retry_policy=retry_policy,
        metadata={"refine_loop": name},
    )
    builder.add_node(  # type: ignore[type-var]
        "evaluate",
        EvaluatorNode(
            evaluator,
            target_score=stop_rules.target_score,
            max_iterations=stop_rules.max_iterations,
            patience=stop_rules.patience,
            min_delta=stop_rules.min_delta,
            budget=budget,
            name=name,
        ),
        retry_policy=retry_policy,
        metadata={"refine_loop": name},
    )
    builder.add_node(
        "finalize",
        Inline(FinalizeNode(on_budget_exhausted=on_budget_exhausted, name=name), name="finalize"),
    )

    after_evaluation = Inline(route_after_evaluation)
    after_generation = Inline(route_after_generation)
    # Where the loop goes on "stop": straight to finalize, or through the human review.
    stop_target = "finalize"
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "generate")
    if human_review is None:
        builder.add_conditional_edges(
            "evaluate", after_evaluation, {"refine": "generate", "stop": "finalize"}
        )
    else:
        stop_target = "review"
        builder.add_node(
            "review", ReviewNode(human_review, on_budget_exhausted=on_budget_exhausted, name=name)
        )
        if human_review == "final":
            builder.add_conditional_edges(
                "evaluate", after_evaluation, {"refine": "generate", "stop": "review"}
            )
        else:
            builder.add_edge("evaluate", "review")
        builder.add_conditional_edges(
            "review", after_evaluation, {"refine": "generate", "stop": "finalize"}
        )
    builder.add_conditional_edges(
        "generate", after_generation, {"evaluate": "evaluate", "stop": stop_target}
    )
    builder.add_edge("finalize", END)
    return builder
