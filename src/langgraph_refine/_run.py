"""`refine` and `arefine`: build, compile and run one loop, returning a `RefineResult`."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from langgraph_refine._errors import ReviewInputError
from langgraph_refine._graph import GeneratorLike, create_refine_graph
from langgraph_refine._result import RESULT_KEYS, RefineResult
from langgraph_refine.evaluators._base import EvaluatorLike

Reviewer = Callable[[dict[str, Any]], Mapping[str, Any]]
"""Answers a human-review payload with a resume value such as `{"action": "approve"}`."""
AsyncReviewer = Callable[[dict[str, Any]], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]


def _check_task(task: object) -> str:
    if not isinstance(task, str) or not task.strip():
        raise ValueError(f"task must be a non-empty string, got {task!r}")
    return task


def _prepare_run(
    generator: GeneratorLike,
    task: str,
    evaluator: EvaluatorLike,
    options: dict[str, Any],
    checkpointer: BaseCheckpointSaver[Any] | None,
    thread_id: str | None,
    reviewer: Any,
    config: RunnableConfig | None,
) -> tuple[CompiledStateGraph[Any, Any, Any, Any], RunnableConfig]:
    _check_task(task)
    if options.get("human_review") is not None and reviewer is None:
        raise ValueError(
            "human_review needs someone to answer the review: pass reviewer=callable(payload) -> "
            "{'action': ...}, or compile create_refine_graph(...) yourself and resume with Command"
        )
    if checkpointer is None and (thread_id is not None or reviewer is not None):
        checkpointer = InMemorySaver()
    graph = create_refine_graph(generator, evaluator, **options).compile(
        checkpointer=checkpointer, name=options.get("name", "refine")
    )
    run_config: RunnableConfig = dict(config or {})  # type: ignore[assignment]
    if checkpointer is not None:
        configurable = dict(run_config.get("configurable") or {})
        configurable.setdefault("thread_id", thread_id or str(uuid.uuid4()))
        run_config["configurable"] = configurable
    return graph, run_config


def _resume_input(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, task: str
) -> Any:
    """`None` to continue an unfinished run of the same task on this thread, else a fresh input."""
    if graph.checkpointer is None:
        return {"task": task}
    snapshot = graph.get_state(config)
    # A pending review is an unfinished run too: continuing re-asks the reviewer
    # without repeating any model call.
    if snapshot.next and snapshot.values.get("task") == task:
        return None
    return {"task": task}


def _result(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, values: Any
) -> RefineResult:
    if graph.checkpointer is not None:
        values = graph.get_state(config).values
    return RefineResult.from_state(values)


def _review_answer(answer: object) -> dict[str, Any]:
    """Check a reviewer callable's answer before resuming with it."""
    # LangGraph cannot resume with None, and reads an empty dict as an empty
    # interrupt-id map (nothing answered), so both would leave the review hanging.
    if not isinstance(answer, Mapping) or not answer:
        raise ReviewInputError(
            f"reviewer returned {answer!r}; return a dict such as {{'action': 'approve'}}, "
            "{'action': 'edit', 'response': ...} or {'action': 'revise', 'feedback': ...}"
        )
    return dict(answer)


def _raise_if_rejected(payload: Mapping[str, Any], answered: bool) -> None:
    """Stop when the reviewer's last answer was rejected: asking the same code again would loop."""
    if answered and payload.get("error"):
        raise ReviewInputError(
            f"the reviewer's answer was rejected: {payload['error']}; the review is still "
            "pending on this thread (pass the same checkpointer and thread_id to continue)"
        )


def _pending_review(graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig) -> Any:
    if graph.checkpointer is None:
        return None
    interrupts = graph.get_state(config).interrupts
    return interrupts[0].value if interrupts else None


def refine(
    generator: GeneratorLike,
    task: str,
    evaluator: EvaluatorLike = None,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    thread_id: str | None = None,
    reviewer: Reviewer | None = None,
    config: RunnableConfig | None = None,
    **options: Any,
) -> RefineResult:
    """Run one refinement loop to the end (sync) and return its result.

    Args:
        generator: A chat model, `"provider:model"` string, or callable `(state) -> str`.
        task: What to do; must be non-empty.
        evaluator: Any evaluator `create_refine_graph` accepts (None: LLM judge).
        checkpointer: Saver for durable runs. With `thread_id`, an unfinished run of the
            same task on that thread is continued rather than restarted.
        thread_id: The checkpoint thread (a new one by default).
        reviewer: Answers human-review interrupts when `human_review` is set, e.g.
            `lambda payload: {"action": "approve"}`.
        config: Extra run config (callbacks, tags, recursion_limit, ...).
        **options: Keyword options of `create_refine_graph` (`target_score`, `budget`, ...).

    Returns:
        The `RefineResult` with the best response.

    Raises:
        ValueError: For an empty task or an invalid option (before any model call).
        BudgetExhaustedError: With `on_budget_exhausted="raise"` when the budget runs out.
        ReviewInputError: If `reviewer` returns something that is not a review answer
            (the review stays pending on the thread).

    Example:
        >>> from langgraph_refine import refine
        >>> refine(lambda state: "hello", "Say hello.", lambda r, s: 1.0).value
        'hello'
    """
    graph, run_config = _prepare_run(
        generator, task, evaluator, options, checkpointer, thread_id, reviewer, config
    )
    values = graph.invoke(
        _resume_input(graph, run_config, task), run_config, output_keys=RESULT_KEYS
    )
    answered = False
    while (payload := _pending_review(graph, run_config)) is not None:
        assert reviewer is not None
        _raise_if_rejected(payload, answered)
        values = graph.invoke(Command(resume=_review_answer(reviewer(payload))), run_config)
        answered = True
    return _result(graph, run_config, values)


async def arefine(
    generator: GeneratorLike,
    task: str,
    evaluator: EvaluatorLike = None,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    thread_id: str | None = None,
    reviewer: AsyncReviewer | None = None,
    config: RunnableConfig | None = None,
    **options: Any,
) -> RefineResult:
    """Run one refinement loop to the end (async) and return its result.

    Same arguments as `refine`; `reviewer` may also be async. Use an async checkpointer
    (`AsyncSqliteSaver`, `AsyncPostgresSaver`) or the in-memory one here.
    """
    graph, run_config = _prepare_run(
        generator, task, evaluator, options, checkpointer, thread_id, reviewer, config
    )
    snapshot_input = await _aresume_input(graph, run_config, task)
    values = await graph.ainvoke(snapshot_input, run_config, output_keys=RESULT_KEYS)
    answered = False
    while (payload := await _apending_review(graph, run_config)) is not None:
        assert reviewer is not None
        _raise_if_rejected(payload, answered)
        answer = reviewer(payload)
        if isinstance(answer, Awaitable):
            answer = await answer
        values = await graph.ainvoke(Command(resume=_review_answer(answer)), run_config)
        answered = True
    if graph.checkpointer is not None:
        values = (await graph.aget_state(run_config)).values
    return RefineResult.from_state(values)


async def _aresume_input(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, task: str
) -> Any:
    if graph.checkpointer is None:
        return {"task": task}
    snapshot = await graph.aget_state(config)
    if snapshot.next and snapshot.values.get("task") == task:
        return None
    return {"task": task}


async def _apending_review(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig
) -> Any:
    if graph.checkpointer is None:
        return None
    interrupts = (await graph.aget_state(config)).interrupts
    return interrupts[0].value if interrupts else None
