"""`create_refine_graph`: assemble the nodes into the refine loop's `StateGraph`.

One round is two steps and one route: `generate` -> `evaluate` (a plain edge), then the
evaluate node itself goes back to `generate` or on to the end (through `review` with
human review), with a `Command`. The decisions live in the nodes: the stop rules and the
strategy run in `evaluate`, a budget stop in either step sets the stop reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy
from pydantic import BaseModel

from langgraph_refine._adapters import adapt_ladder
from langgraph_refine._budget import Budget
from langgraph_refine._edits import EditsMode
from langgraph_refine._ends import NO_COMPARER, FinalizeNode, Prepare
from langgraph_refine._evaluate import EvaluatorNode
from langgraph_refine._generate import GeneratorNode
from langgraph_refine._inline import Inline
from langgraph_refine._kinds import kind_of
from langgraph_refine._memory import DEFAULT_MEMORY, MemoryPolicy
from langgraph_refine._models import resolve_chat_model
from langgraph_refine._options import (
    DEFAULT_PROMPT_FORM,
    DEFAULT_STRATEGY,
    HumanReview,
    LoopOptions,
    OnBudgetExhausted,
    RefineContext,
    check_choice,
)
from langgraph_refine._retry import DEFAULT_RETRY_POLICY
from langgraph_refine._review import ReviewNode, route_after_review
from langgraph_refine._select import Comparer, as_comparer
from langgraph_refine._state import (
    DEFAULT_SELECT_MARGIN,
    DEFAULT_SELECT_TOP,
    ComparerLike,
    PromptForm,
    RefineInput,
    RefineOutput,
    RefineState,
    Select,
    Strategy,
)
from langgraph_refine._typed import OutputSchema
from langgraph_refine.evaluators import LLMJudge, llm_judge
from langgraph_refine.evaluators._base import EvaluatorLike
from langgraph_refine.evaluators._combine import as_evaluator

GeneratorLike = (
    BaseChatModel
    | Runnable[Any, Any]
    | str
    | Callable[..., Any]
    | Sequence[BaseChatModel | Runnable[Any, Any] | str | Callable[..., Any]]
)
"""One generator, or a ladder of them (a list, cheapest first)."""


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
    on_budget_exhausted: OnBudgetExhausted = "stop",
    memory: MemoryPolicy = DEFAULT_MEMORY,
    human_review: HumanReview | None = None,
    strategy: Strategy = DEFAULT_STRATEGY,
    max_attempt_chars: int = 8000,
    prompt_form: PromptForm = DEFAULT_PROMPT_FORM,
    name: str = "refine",
    candidates: int = 1,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = DEFAULT_RETRY_POLICY,
    record_key: str | None = None,
    output_schema: type[BaseModel] | Mapping[str, Any] | OutputSchema | None = None,
    select: Select = "score",
    select_top: int = DEFAULT_SELECT_TOP,
    select_margin: float = DEFAULT_SELECT_MARGIN,
    comparer: ComparerLike = None,
    confirm_pass: bool = False,
    edits: EditsMode = False,
) -> StateGraph[RefineState, RefineContext, RefineInput, RefineOutput]:
    """Build the refine loop as an uncompiled `StateGraph`.

    Compile it yourself, with your own checkpointer for persistence and human review:
    `create_refine_graph(model).compile(checkpointer=saver)`. The graph reads `task` (or
    the last human message in `messages`) and writes `response` (and, for a task taken
    from `messages`, appends the answer there as one `AIMessage`). Its `context_schema`
    (`RefineContext`) lets a run override `target_score`, `max_iterations`, `patience`,
    `min_delta`, `budget` and `strategy`: `graph.invoke(input, config, context={...})`.

    Args:
        generator: A chat model, a `"provider:model"` string, a runnable or compiled
            graph (such as a `create_agent` agent) taking `{"messages": [...]}`, or a
            callable `(state) -> str` (sync or async) that builds its own prompt. A list
            of these is a ladder of models, cheapest first: attempt 0 is written by the
            first; a stronger rung writes a round only when the rungs below stop raising
            the best score (see "Ladder of models" in the concepts page). The default
            judge then runs on the first rung.
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
        strategy: What each round after the first does: `"explore"` (default: refine
            while it helps, else choose between refining an earlier attempt and sampling
            afresh), `"chain"` (always refine the latest) or `"sample"` (best-of-N).
        max_attempt_chars: Each attempt shown in a refinement prompt is cut to this
            many characters, with a note that it was cut.
        prompt_form: How a chat model is asked to refine: `"messages"` (a conversation:
            task, attempt as the model's turn, feedback) or `"single"` (one message).
        name: The loop's name, used in run names, tags and stream events.
        candidates: Responses sampled per round (>= 1). Each is evaluated and the best
            becomes the round's attempt. Every candidate is a model call (and a judge
            call with an LLM judge).
        retry_policy: Retry policy of the model calls (generator, evaluator, comparer);
            by default transient provider errors are retried with backoff and other
            errors fail at once. A call is retried inside its step, so the budget
            counts every call sent.
        record_key: The key of the strategy record `strategy="explore"` keeps when the
            graph runs with a store (`compile(store=...)`). By default it names the
            generator's model and the evaluator's kind, e.g.
            `"openai:gpt-4o-mini|llm_judge"`; runs with the same key pool what they learn.
        output_schema: Refine an object instead of text: a pydantic model class or a
            JSON schema dict. A chat model is asked for it through the provider's
            structured output; each attempt's `response` is the object as JSON text and
            its `output` the object as plain JSON; a reply that is not a valid object
            is evaluated FAIL (score 0, the validation errors as feedback) without
            calling the evaluator. The graph also writes `output` for its caller.
        select: How the result is chosen when the loop stops: `"score"` (the best
            evaluated attempt) or `"pairwise"`: the attempts within `select_margin` of
            the best score, at most `select_top`, are compared in pairs, each pair in
            both orders (orders that disagree make a tie); the most wins is the result
            (then the higher score, then the earlier attempt). Comparisons are model
            calls counted against the budget; when the budget left cannot pay for all of
            them, the choice is by score. `RefineResult.metadata["selection"]` lists them.
        select_top: The most attempts compared with `select="pairwise"` (>= 2).
        select_margin: Score distance from the best within which attempts are compared.
        comparer: Who compares with `select="pairwise"`: a chat model or model string
            (asked with the library's pairwise prompt) or a callable `(task, first,
            second) -> "first" | "second" | "tie"`; by default `judge_model`, else the LLM
            judge's model, else the generator (a chat model).
        confirm_pass: When a round would stop on a PASS verdict or on `target_score`,
            judge the same response once more (one more evaluator call, counted in the
            budget); stop only if that judgment agrees, else go on with its feedback.
        edits: `True`: every refinement (reviewer revisions included) asks a chat-model
            or graph generator for SEARCH/REPLACE blocks against the refined attempt,
            and the new attempt's `response` is the edited text (`Attempt.edits` counts
            the blocks). Blocks that do not all apply change nothing: the attempt keeps
            its parent's text and is evaluated FAIL (score 0, feedback naming each
            block) without calling the evaluator. A reply without blocks is a rewrite;
            fresh samples are written whole. `"auto"`: edits only for attempts longer
            than `EDITS_AUTO_MIN_CHARS` (2000) characters. With `output_schema`, the
            edits apply to the object's JSON text, pretty-printed.

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
    options = LoopOptions.build(
        target_score=target_score,
        max_iterations=max_iterations,
        patience=patience,
        min_delta=min_delta,
        budget=budget,
        on_budget_exhausted=on_budget_exhausted,
        memory=memory,
        strategy=strategy,
        max_attempt_chars=max_attempt_chars,
        prompt_form=prompt_form,
        candidates=candidates,
        name=name,
        record_key=record_key,
        output_schema=output_schema,
        select=select,
        select_top=select_top,
        select_margin=select_margin,
        confirm_pass=confirm_pass,
        edits=edits,
    )
    check_choice("human_review", human_review, HumanReview, optional=True)
    rungs = adapt_ladder(
        [_resolved(g) for g in generator]
        if isinstance(generator, list | tuple)
        else _resolved(generator)
    )
    gen = rungs[0].generator  # the default judge's model: the ladder's first rung
    judge = _evaluator(gen, evaluator, judge_model)
    compare = _comparer(comparer, judge, _judge_model(gen, judge_model))
    if select == "pairwise" and compare is None:
        raise ValueError(NO_COMPARER)

    builder = StateGraph(
        RefineState,
        context_schema=RefineContext,
        input_schema=RefineInput,
        output_schema=RefineOutput,
    )
    # The instant steps run inline: no worker thread per step under ainvoke (see _inline).
    builder.add_node(
        "prepare",
        Inline(
            Prepare(options, review=human_review is not None, can_compare=compare is not None),
            name="prepare",
        ),
    )
    # The model-calling nodes retry their calls themselves (`Step.call`), under the
    # step's meter: no LangGraph retry policy on them, which would retry twice.
    builder.add_node(
        "generate",
        GeneratorNode[RefineState](rungs, options, retry_policy=retry_policy),
        metadata={"refine_loop": name},
    )
    # The evaluate node routes the loop itself (a `Command`): one route per round, and
    # no conditional edge re-reading the whole state after every evaluation.
    stop = "finalize" if human_review is None else "review"
    after_evaluation = "review" if human_review == "every_round" else None
    builder.add_node(
        "evaluate",
        EvaluatorNode[RefineState](
            judge,
            options,
            retry_policy=retry_policy,
            routes=None if after_evaluation else {"refine": "generate", "stop": stop},
            judge_model=_judge_model(gen, judge_model),
            record_model=">".join(rung.name for rung in rungs),
            ladder=[rung.name for rung in rungs] if len(rungs) > 1 else (),
        ),
        metadata={"refine_loop": name},
        destinations=() if after_evaluation else ("generate", stop),
    )
    builder.add_node(
        "finalize",
        FinalizeNode(options, compare, retry_policy=retry_policy),
    )

    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "generate")
    builder.add_edge("generate", "evaluate")
    if human_review is not None:
        builder.add_node(
            "review", ReviewNode(human_review, on_budget_exhausted=on_budget_exhausted, name=name)
        )
        if after_evaluation:
            builder.add_edge("evaluate", after_evaluation)
        builder.add_conditional_edges(
            "review",
            Inline(route_after_review),
            {"refine": "generate", "stop": "finalize", "evaluate": "evaluate"},
        )
    builder.add_edge("finalize", END)
    return builder


def _resolved(generator: Any) -> Any:
    """A model string as its chat model; any other generator as it is."""
    if isinstance(generator, str):
        return resolve_chat_model(generator, option="generator")
    return generator


def _evaluator(gen: Any, evaluator: EvaluatorLike, judge_model: BaseChatModel | str | None) -> Any:
    """The evaluator to use: the given one, or an LLM judge on `judge_model` / the generator."""
    if evaluator is None:
        judge = judge_model if judge_model is not None else gen
        if not isinstance(judge, str) and kind_of(judge) != "chat":
            raise ValueError(
                "evaluator=None uses an LLM judge, which needs a model: pass judge_model=... "
                "or an evaluator (the generator is not a chat model)"
            )
        return llm_judge(judge)
    if judge_model is not None:
        raise ValueError("judge_model is only used when evaluator is None; pass one or the other")
    return as_evaluator(evaluator)


def _comparer(
    comparer: ComparerLike, judge: Any, judge_model: BaseChatModel | None
) -> Comparer | None:
    """The pairwise comparer: the given one, else the judge's model, else the judge model."""
    if comparer is not None:
        return as_comparer(comparer)
    model = judge.model if isinstance(judge, LLMJudge) else judge_model
    return as_comparer(model) if model is not None else None


def _judge_model(gen: Any, judge_model: BaseChatModel | str | None) -> BaseChatModel | None:
    """The model a run's `judge` check uses when its context names none."""
    judge = judge_model if judge_model is not None else gen
    if isinstance(judge, str):
        return resolve_chat_model(judge, option="judge_model")
    return judge if kind_of(judge) == "chat" else None
