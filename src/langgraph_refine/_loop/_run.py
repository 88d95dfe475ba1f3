"""`refine` and `arefine`: build, compile and run one loop, returning a `RefineResult`.

Both run the same flow (`_driver.run_flow`); only the loop that carries it out differs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Unpack

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore

from langgraph_refine._decisions._options import GRAPH, LoopOptions, RefineOptions
from langgraph_refine._loop._driver import (
    AsyncReviewer,
    Driver,
    Reviewer,
    arun_through,
    run_config,
    run_flow,
    run_through,
    strict_serde,
)
from langgraph_refine._loop._graph import GeneratorLike, create_refine_graph
from langgraph_refine._loop._select import check_pairwise_only
from langgraph_refine._loop._thread import describe_evaluator, thread_settings
from langgraph_refine._loop._tracing import traced
from langgraph_refine._result import RefineResult, loop_schema
from langgraph_refine.evaluators._base import EvaluatorLike

__all__ = ["AsyncReviewer", "CompiledLoop", "Reviewer", "arefine", "refine"]


def _check_task(task: object) -> str:
    if not isinstance(task, str) or not task.strip():
        raise ValueError(f"task must be a non-empty string, got {task!r}")
    return task


def _driver(
    generator: GeneratorLike,
    evaluator: EvaluatorLike,
    options: LoopOptions,
    checkpointer: BaseCheckpointSaver[Any] | None,
    thread_id: str | None,
    reviewer: Any,
    config: RunnableConfig | None,
    store: BaseStore | None,
) -> Driver:
    if options.human_review is not None and reviewer is None:
        raise ValueError(
            "human_review needs someone to answer the review: pass reviewer=callable(payload) -> "
            "{'action': ...}, or compile create_refine_graph(...) yourself and resume with Command"
        )
    check_pairwise_only(options)  # nothing else could ask this run for pairwise selection
    if checkpointer is None and (thread_id is not None or reviewer is not None):
        checkpointer = InMemorySaver(serde=strict_serde())
    if store is not None and not isinstance(store, BaseStore):
        raise ValueError(
            "store must be a LangGraph BaseStore (e.g. InMemoryStore()), "
            f"got {type(store).__name__}"
        )
    graph = create_refine_graph(generator, evaluator, options=options).compile(
        checkpointer=checkpointer, store=store, name=options.name
    )
    # What a thread keeps of its run, so a rerun with other settings is refused.
    settings = thread_settings(options, describe_evaluator(evaluator))
    config = run_config(
        config,
        durable=checkpointer is not None,
        thread_id=thread_id,
        max_iterations=options.max_iterations,
        settings=settings,
    )
    return Driver(graph, config, reviewer=reviewer, settings=settings)


def _flow(task: str, driver: Driver, restart: bool = False) -> Any:
    return run_flow(
        task,
        durable=driver.graph.checkpointer is not None,
        output_schema=loop_schema(driver.graph),  # as the graph's options coerced it
        settings=driver.settings,
        restart=restart,
    )


class CompiledLoop:
    """One loop built and compiled once, then run on many tasks (what a batch does).

    `await loop.arun(task)` is `arefine(generator, task, evaluator, store=store,
    options=options, **settings)` without building and compiling the graph again for
    every task.

    With a `checkpointer` (async), each run is durable on the thread `arun` names: its
    checkpoint is written after every step, so a run stopped mid-way and run again on
    its thread continues from its last completed call.

    Args:
        generator: As for `refine`.
        evaluator: As for `refine`.
        store: As for `refine`.
        checkpointer: An async saver for durable runs, or None.
        options: As for `refine`.
        **settings: As for `refine`.
    """

    def __init__(
        self,
        generator: GeneratorLike,
        evaluator: EvaluatorLike = None,
        *,
        store: BaseStore | None = None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        options: LoopOptions | None = None,
        **settings: Unpack[RefineOptions],
    ) -> None:
        self._options = LoopOptions.build(options, surface=GRAPH, **settings)
        self._evaluator = evaluator
        self._driver = _driver(
            generator, evaluator, self._options, checkpointer, None, None, None, store
        )
        if checkpointer is not None:  # no completed call is lost to a kill
            self._driver = dataclasses.replace(self._driver, durability="sync")

    async def arun(
        self, task: str, *, thread_id: str | None = None, restart: bool = False
    ) -> RefineResult:
        """Run the loop on `task` to the end and return its result (see `arefine`).

        Args:
            task: The task.
            thread_id: With a checkpointer: the thread to run on (an unfinished run of
                the same task and settings there is continued).
            restart: Discard the thread's unfinished run and start over on it.
        """
        _check_task(task)
        driver = self._driver if thread_id is None else self._driver.on_thread(thread_id)
        driver = traced(driver, name=self._options.name, evaluator=self._evaluator)
        return await arun_through(_flow(task, driver, restart), driver)


def refine(
    generator: GeneratorLike,
    task: str,
    evaluator: EvaluatorLike = None,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    thread_id: str | None = None,
    reviewer: Reviewer | None = None,
    config: RunnableConfig | None = None,
    store: BaseStore | None = None,
    options: LoopOptions | None = None,
    restart: bool = False,
    **settings: Unpack[RefineOptions],
) -> RefineResult:
    """Run one refinement loop to the end (sync) and return its result.

    Args:
        generator: A chat model, `"provider:model"` string, runnable or compiled graph
            (such as a `create_agent` agent), or callable `(state) -> str`.
        task: What to do; must be non-empty.
        evaluator: Any evaluator `create_refine_graph` accepts (None: LLM judge).
        checkpointer: Saver for durable runs. With `thread_id`, an unfinished run of the
            same task and settings on that thread is continued rather than restarted
            (the thread keeps the check and the options that change scores or stops;
            a finished thread starts a new run).
        thread_id: The checkpoint thread (a new one by default).
        reviewer: Answers human-review interrupts when `human_review` is set, e.g.
            `lambda payload: {"action": "approve"}`.
        config: Extra run config (callbacks, tags, recursion_limit, ...).
        store: A LangGraph store shared by runs. With `strategy="explore"` (the
            default) each run reads the strategy record there and adds its own rounds,
            so later runs on the same model and evaluator start from what earlier ones
            learned (see `record_key`).
        options: The loop's options, built once (`LoopOptions`); None: the defaults.
        restart: Discard the thread's unfinished run and start over on it.
        **settings: Keyword options of `create_refine_graph` (`target_score`, `budget`,
            `output_schema`, ...), typed as `RefineOptions`, overriding `options`.

    Returns:
        The `RefineResult` with the best response; with `output_schema`, its `output`
        is the best attempt's object (a model instance, or the dict of a JSON schema).

    Raises:
        ValueError: For an empty task or an invalid option (before any model call).
        BudgetExhaustedError: With `on_budget_exhausted="raise"` when the budget runs out.
        ContextLengthError: If a round's prompt exceeds the model's context even in its
            smallest form.
        ReviewInputError: If `reviewer` returns something that is not a review answer
            (the review stays pending on the thread).
        ThreadSettingsError: If the thread holds an unfinished run with another task or
            other settings (before any model call; `restart=True` starts over).

    Example:
        >>> from langgraph_refine import refine
        >>> refine(lambda state: "hello", "Say hello.", lambda r, s: 1.0).value
        'hello'
    """
    _check_task(task)
    built = LoopOptions.build(options, surface=GRAPH, **settings)
    driver = _driver(generator, evaluator, built, checkpointer, thread_id, reviewer, config, store)
    driver = traced(driver, name=built.name, evaluator=evaluator)
    return run_through(_flow(task, driver, restart), driver)


async def arefine(
    generator: GeneratorLike,
    task: str,
    evaluator: EvaluatorLike = None,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    thread_id: str | None = None,
    reviewer: AsyncReviewer | None = None,
    config: RunnableConfig | None = None,
    store: BaseStore | None = None,
    options: LoopOptions | None = None,
    restart: bool = False,
    **settings: Unpack[RefineOptions],
) -> RefineResult:
    """Run one refinement loop to the end (async) and return its result.

    Same arguments as `refine`; `reviewer` may also be async. Use an async checkpointer
    (`AsyncSqliteSaver`, `AsyncPostgresSaver`) or the in-memory one here.
    """
    _check_task(task)
    built = LoopOptions.build(options, surface=GRAPH, **settings)
    driver = _driver(generator, evaluator, built, checkpointer, thread_id, reviewer, config, store)
    driver = traced(driver, name=built.name, evaluator=evaluator)
    return await arun_through(_flow(task, driver, restart), driver)
