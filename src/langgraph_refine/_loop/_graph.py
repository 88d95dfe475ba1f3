"""`create_refine_graph`: assemble the nodes into the refine loop's `StateGraph`.

One round is two steps and one route: `generate` -> `evaluate` (a plain edge), then the
evaluate node itself goes back to `generate` or on to the end (through `review` with
human review), with a `Command`. The decisions live in the nodes: the stop rules and the
strategy run in `evaluate`, a budget stop in either step sets the stop reason.

A run takes the steps of its rounds and no more: the first generate step prepares the
run (`Prepare.start`), and the evaluate step that stops the loop ends it
(`FinalizeNode.end_in_step`, then `END`). The `prepare` and `finalize` steps run only
when a run needs them: `prepare` when the thread holds an unfinished earlier run
(`route_start`), `finalize` after a review, for a pairwise selection's comparisons, a
budget error, or in a served graph, whose chat Refresh reruns the end's step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Unpack, get_type_hints

from langgraph.graph import END, START, StateGraph

from langgraph_refine._decisions._options import (
    GRAPH,
    LoopOptions,
    RefineContext,
    RefineOptions,
)
from langgraph_refine._inline import Inline
from langgraph_refine._loop._adapters import GeneratorLike
from langgraph_refine._loop._ends import FinalizeNode, Prepare, route_start
from langgraph_refine._loop._evaluate import EvaluatorNode
from langgraph_refine._loop._generate import GeneratorNode
from langgraph_refine._loop._resolve import loop_models
from langgraph_refine._loop._review import ReviewNode, route_after_review
from langgraph_refine._loop._select import NO_COMPARER
from langgraph_refine._state import (
    RefineInput,
    RefineOutput,
    RefineState,
    ServedKeys,
)
from langgraph_refine.evaluators._base import EvaluatorLike
from langgraph_refine.evaluators._calibrate import warn_at_build

__all__ = ["GeneratorLike", "create_refine_graph"]


def create_refine_graph(
    generator: GeneratorLike,
    evaluator: EvaluatorLike = None,
    *,
    options: LoopOptions | None = None,
    **settings: Unpack[RefineOptions],
) -> StateGraph[RefineState, RefineContext, RefineInput, RefineOutput]:
    """Build the refine loop as an uncompiled `StateGraph`.

    Compile it yourself, with your own checkpointer for persistence and human review:
    `create_refine_graph(model).compile(checkpointer=saver)`. The graph reads `task` (or
    the last human message in `messages`) and writes `response` (and, for a task taken
    from `messages`, appends the answer there as one `AIMessage`). Its `context_schema`
    (`RefineContext`) lets a run override the options a run may set (the stop rules,
    `budget`, `strategy`, ...): `graph.invoke(input, config, context={...})`.

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
        options: The loop's options, built once (`LoopOptions`), e.g. to hand the same
            to `refine` and `RefineMiddleware`; None: the defaults.
        **settings: Any option, as a keyword (`target_score=0.8`, `budget=...`,
            `strategy="chain"`, ...), overriding `options`. Each is a field of
            `LoopOptions` (declared once there, with its meaning, default and check;
            `RefineOptions` types the keywords for editors), `judge_model` (the default
            LLM judge's model) included.

    Returns:
        The uncompiled graph, with nodes `prepare`, `generate`, `evaluate`, `finalize`
        (and `review` with human review). A plain run steps through `generate` and
        `evaluate` only: the first generation prepares the run and the evaluation that
        stops the loop ends it; `prepare` runs when the thread holds an unfinished
        earlier run, `finalize` after a review or for a pairwise selection's comparisons.

    Raises:
        ValueError: If an option is unknown, or outside its allowed range (the message
            names it).

    Example:
        >>> from langgraph_refine import create_refine_graph
        >>> graph = create_refine_graph(
        ...     lambda state: "a draft", lambda response, state: 1.0
        ... ).compile()
        >>> graph.invoke({"task": "Write a draft."})["response"]
        'a draft'
    """
    built = LoopOptions.build(options, surface=GRAPH, **settings)
    return loop_builder(generator, evaluator, built)


@dataclass(frozen=True)
class LoopSchemas:
    """The state, input and output schemas a loop's `StateGraph` is built with.

    The library's graph uses `RefineState`, `RefineInput` and `RefineOutput` (what a
    parent graph embedding the loop exchanges with it); a served graph extends them
    (see `langgraph_refine.server`). The state must extend `RefineState`.
    """

    state: type[Any] = RefineState
    input: type[Any] = RefineInput
    output: type[Any] = RefineOutput


def loop_builder(
    generator: GeneratorLike,
    evaluator: EvaluatorLike,
    built: LoopOptions,
    *,
    schemas: LoopSchemas = LoopSchemas(),
) -> StateGraph[Any, RefineContext, Any, Any]:
    """The loop's uncompiled graph on options already built (see `create_refine_graph`).

    Raises:
        ValueError: If the loop has no judge, or pairwise selection has no comparer.
    """
    judge_model, comparer, human_review = built.judge_model, built.comparer, built.human_review
    name, retry_policy = built.name, built.retry_policy
    # The nodes read a run's own judge model from `judge_model` (a model string from its
    # context); the graph's judge is resolved here and handed to the evaluate node.
    options = replace(built, judge_model=None)
    models = loop_models(generator, evaluator, judge_model=judge_model, comparer=comparer)
    rungs, judge, compare = models.rungs, models.evaluator, models.comparer
    if judge is None:
        raise ValueError(
            "evaluator=None uses an LLM judge, which needs a model: pass judge_model=... "
            "or an evaluator (the generator is not a chat model)"
        )
    if options.select == "pairwise" and compare is None:
        raise ValueError(NO_COMPARER)
    warn_at_build(judge, require_calibration=options.require_calibration)

    # Keys the loop writes only when the state has them (each channel costs every step).
    served = set(get_type_hints(schemas.state)) & set(get_type_hints(ServedKeys))
    builder: StateGraph[Any, RefineContext, Any, Any] = StateGraph(
        schemas.state,
        context_schema=RefineContext,
        input_schema=schemas.input,
        output_schema=schemas.output,
    )
    start = Prepare(
        options,
        review=human_review is not None,
        can_compare=compare is not None,
        keeps_input_options="input_options" in served,
        judge=judge,
    )
    # The instant steps run inline: no worker thread per step under ainvoke (see _inline).
    builder.add_node("prepare", Inline(start, name="prepare"))
    regenerates = "ended_in" in served
    finalize = FinalizeNode(
        options,
        compare,
        retry_policy=retry_policy,
        keeps_result="score" in served,
        regenerates=regenerates,
    )
    # The model-calling nodes retry their calls themselves (`Step.call`), under the
    # step's meter: no LangGraph retry policy on them, which would retry twice.
    # The evaluate node routes the loop itself (a `Command`): one route per round, and
    # no conditional edge re-reading the whole state after every evaluation.
    stop = "finalize" if human_review is None else "review"
    # The evaluation that stops the loop ends the run, unless a review comes first or a
    # chat's Refresh needs the end as a step of its own to run again.
    ends_in_evaluate = human_review is None and not regenerates
    ends = (END,) if ends_in_evaluate else ()
    after_evaluation = "review" if human_review == "every_round" else None
    evaluate = EvaluatorNode[RefineState](
        judge,
        options,
        retry_policy=retry_policy,
        routes=None if after_evaluation else {"refine": "generate", "stop": stop},
        judge_model=models.judge_model,
        record_model=">".join(rung.name for rung in rungs),
        ladder=[rung.name for rung in rungs] if len(rungs) > 1 else (),
        records_run="ended_in" in served,
        end=finalize if ends_in_evaluate else None,
    )
    builder.add_node(
        "generate",
        GeneratorNode[RefineState](
            rungs,
            options,
            retry_policy=retry_policy,
            # A generation starts only when the budget can also pay its judgment (by the
            # run's own evaluator, which a run's context may name).
            judge_calls=lambda run: int(evaluate.evaluator_for(run).calls_model),
            prepare=start,
        ),
        metadata={"refine_loop": name},
    )
    builder.add_node(
        "evaluate",
        evaluate,
        metadata={"refine_loop": name},
        destinations=() if after_evaluation else ("generate", stop, *ends),
    )
    builder.add_node("finalize", finalize)

    # A run enters at the generate step, which prepares it, or through `prepare` on a
    # thread left with an unfinished run (the routing costs no step: START's own).
    builder.add_conditional_edges(
        START, Inline(route_start), {"generate": "generate", "prepare": "prepare"}
    )
    builder.add_edge("prepare", "generate")
    builder.add_edge("generate", "evaluate")
    if human_review is not None:
        builder.add_node(
            "review",
            ReviewNode(
                human_review,
                on_budget_exhausted=options.on_budget_exhausted,
                name=name,
                records_run="ended_in" in served,
                judge=judge,
            ),
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
