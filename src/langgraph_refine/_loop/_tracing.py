"""OpenTelemetry traces of loop runs (the `otel` extra), built on LangChain's callbacks.

When OpenTelemetry is in use (its API imported and a tracer provider set), each run that
`refine`, `arefine` or the command line drives gets a `LoopTracer`: a callback handler
that sees the loop's graph and its nodes start and end, and turns them into spans:

- `refine <name>`: the loop run, with its stop reason, score and rounds when it ends;
- `round <i>`: a child span per round (a generate step and the evaluate step after it),
  with the round's attempt, move, model (and rung, with a ladder), score and verdict;
- a `gen_ai.evaluation.result` event on the round's span per evaluated attempt, with the
  OpenTelemetry GenAI semantic-convention attributes.

Nothing here imports OpenTelemetry: it is used only if the application already imported
`opentelemetry.trace` (setting a tracer provider does), so without OpenTelemetry, or with
it installed but unused, a run is untouched and pays one dictionary lookup.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager

from langgraph_refine._result import best_attempt
from langgraph_refine._state import Attempt
from langgraph_refine._version import __version__

if TYPE_CHECKING:
    from langgraph_refine._loop._driver import Driver

ATTRIBUTE_PREFIX = "langgraph_refine."
"""The namespace of the loop's own span attributes (`langgraph_refine.round`, ...)."""
EVALUATION_EVENT = "gen_ai.evaluation.result"
"""The GenAI semantic conventions' event for an evaluation's result."""


def _tracer() -> Any:
    """The tracer to use, or None when the application traces nothing with OpenTelemetry."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # never imported: no provider can have been set
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer("langgraph_refine", __version__)


def traced(driver: Driver, *, name: str, evaluator: Any) -> Driver:
    """`driver` with a `LoopTracer` among its callbacks, when OpenTelemetry traces.

    Args:
        driver: What carries out one run (its config is copied, not changed).
        name: The loop's name (`refine <name>` is its span).
        evaluator: The loop's evaluator, as given (its name goes in evaluation events).

    Returns:
        A driver whose runs are traced, or `driver` itself when nothing traces.
    """
    tracer = _tracer()
    if tracer is None:
        return driver
    handler = LoopTracer(tracer, name=name, evaluation_name=evaluation_name(evaluator))
    config: dict[str, Any] = dict(driver.config)
    callbacks: Any = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        callbacks = callbacks.copy()
        callbacks.add_handler(handler, inherit=True)
    else:
        callbacks = [*(callbacks or []), handler]
    config["callbacks"] = callbacks
    return dataclasses.replace(driver, config=config)  # type: ignore[arg-type]


def evaluation_name(evaluator: Any) -> str:
    """The name evaluation events carry: the evaluator's (a combined one: its parts')."""
    if evaluator is None:
        return "llm_judge"
    from langgraph_refine.evaluators._combine import as_evaluator

    try:
        evaluator = as_evaluator(evaluator)
    except Exception:  # the loop itself reports a bad evaluator
        return type(evaluator).__name__
    return _kind(evaluator)


def _kind(evaluator: Any) -> str:
    name = str(getattr(evaluator, "name", None) or type(evaluator).__name__)
    parts = getattr(evaluator, "parts", None)
    return f"{name}({'+'.join(_kind(p) for p in parts)})" if parts else name


@dataclasses.dataclass
class _Run:
    """One graph invocation being traced: its span and its open round."""

    span: Any
    round: Any = None
    evaluate: UUID | None = None
    rounds: int = 0
    evaluated: list[Attempt] = dataclasses.field(default_factory=list)


class LoopTracer(BaseCallbackHandler):
    """Turns one loop's graph and node runs into OpenTelemetry spans and events.

    One tracer per driven run; a run that pauses for a human review ends its span there,
    and its continuation after the answer is a second `refine <name>` span. Runs nested
    under the loop's nodes (model calls, an inner loop) are not its own: they are left to
    their own tracers.

    Args:
        tracer: The OpenTelemetry tracer.
        name: The loop's name.
        evaluation_name: The evaluator's name, for evaluation events.
    """

    run_inline = True  # spans start and end in the order the loop runs
    raise_error = False  # a tracing problem must never stop the loop

    def __init__(self, tracer: Any, *, name: str, evaluation_name: str) -> None:
        self.tracer = tracer
        self.name = name
        self.evaluation_name = evaluation_name
        self.root: UUID | None = None
        self.run: _Run | None = None

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start the loop's span (its graph's run) or a round's (a node run of the loop)."""
        if self.run is None:
            self.root = run_id
            span = self.tracer.start_span(
                f"refine {self.name}", attributes={ATTRIBUTE_PREFIX + "name": self.name}
            )
            self.run = _Run(span)
            return
        if parent_run_id != self.root:
            return
        node = (metadata or {}).get("langgraph_node")
        if node in ("generate", "evaluate") and self.run.round is None:
            self._start_round(self.run, _round_index(inputs))
        if node == "evaluate":
            self.run.evaluate = run_id

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """End a round (its evaluate step's run) or the loop (its graph's run)."""
        run = self.run
        if run is None:
            return
        if run_id == run.evaluate:
            self._end_round(run, _written_attempts(outputs))
        elif run_id == self.root:
            self._end_loop(run, outputs)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End the loop's span with the error, or note it on the round (a retried step)."""
        run = self.run
        if run is None:
            return
        if run_id == self.root:
            _summarise(run.span, run.rounds, run.evaluated)  # what the loop did before it
            for span in (run.round, run.span):
                if span is not None:
                    _record_error(span, error)
                    span.end()
            self.run = None
        elif run.round is not None:
            run.round.record_exception(error)  # the step may be retried: the round goes on

    def _start_round(self, run: _Run, index: int | None) -> None:
        from opentelemetry import trace

        context = trace.set_span_in_context(run.span)
        # Named and numbered from the start, so a round that fails is still `round <i>`.
        name = "round" if index is None else f"round {index}"
        run.round = self.tracer.start_span(name, context=context)
        _set(run.round, "round", index)

    def _end_round(self, run: _Run, attempts: list[Attempt]) -> None:
        span, run.round, run.evaluate = run.round, None, None
        if span is None:
            return
        for attempt in attempts:
            evaluation = attempt.evaluation
            _set(span, "round", attempt.index)
            _set(span, "move", attempt.move)
            _set(span, "parent", attempt.parent)
            _set(span, "model", attempt.model)
            _set(span, "rung", attempt.rung)  # with a ladder of models
            if evaluation is None:
                if attempt.error is not None:  # unjudged: the evaluation event says why
                    span.add_event(EVALUATION_EVENT, self._unjudged_attributes(attempt.error))
                continue
            _set(span, "score", evaluation.score)
            _set(span, "verdict", evaluation.verdict)
            span.add_event(EVALUATION_EVENT, self._evaluation_attributes(attempt))
            run.evaluated.append(attempt)
        if attempts:
            span.update_name(f"round {attempts[-1].index}")
        run.rounds += 1
        span.end()

    def _unjudged_attributes(self, error: str) -> dict[str, Any]:
        """An evaluation that could not be made: GenAI's `error.type`, the reason beside it."""
        return {
            "gen_ai.evaluation.name": self.evaluation_name,
            "error.type": "unjudged",
            "gen_ai.evaluation.explanation": error,
        }

    def _evaluation_attributes(self, attempt: Attempt) -> dict[str, Any]:
        evaluation = attempt.evaluation
        if evaluation is None:
            return {"gen_ai.evaluation.name": self.evaluation_name}
        attributes: dict[str, Any] = {
            "gen_ai.evaluation.name": self.evaluation_name,
            "gen_ai.evaluation.score.value": evaluation.score,
        }
        if evaluation.verdict is not None:
            attributes["gen_ai.evaluation.score.label"] = evaluation.verdict
        if evaluation.feedback:
            attributes["gen_ai.evaluation.explanation"] = evaluation.feedback
        return attributes

    def _end_loop(self, run: _Run, outputs: Any) -> None:
        if run.round is not None:  # a round stopped before its evaluation
            run.round.end()
        values = outputs if isinstance(outputs, Mapping) else {}
        _set(run.span, "stop_reason", values.get("stop_reason"))
        _summarise(run.span, run.rounds, _attempts(values.get("attempts")) or run.evaluated)
        run.span.end()
        self.run = None


def _summarise(span: Any, rounds: int, attempts: Sequence[Attempt]) -> None:
    """The loop span's rounds and best attempt (its round and score), if one was evaluated."""
    _set(span, "rounds", rounds)
    best = best_attempt(attempts)
    if best is not None:
        _set(span, "best_round", best.index)
        _set(span, "score", best.score)


def _round_index(inputs: Any) -> int | None:
    """The attempt a round starting with this node input works on (None if unknown)."""
    if not isinstance(inputs, Mapping):
        return None
    pending = _attempts(inputs.get("pending"))
    if pending:  # generated already (a round resumed at its evaluation)
        return pending[0].index
    attempts = _attempts(inputs.get("attempts"))
    return max((a.index for a in attempts), default=-1) + 1


def _set(span: Any, key: str, value: Any) -> None:
    """Set `langgraph_refine.<key>`, unless the value is unknown (OpenTelemetry has no None)."""
    if value is not None:
        span.set_attribute(ATTRIBUTE_PREFIX + key, value)


def _record_error(span: Any, error: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def _written_attempts(outputs: Any) -> list[Attempt]:
    """The attempts an evaluate step wrote (its update, or its `Command`'s)."""
    update = getattr(outputs, "update", outputs)
    return _attempts(update.get("attempts")) if isinstance(update, Mapping) else []


def _attempts(written: Any) -> list[Attempt]:
    """Attempts as written to state (models or plain data, one or a list)."""
    if isinstance(written, Attempt | Mapping):
        written = [written]
    if not isinstance(written, Sequence):
        return []
    found = []
    for item in written:
        try:
            found.append(item if isinstance(item, Attempt) else Attempt.model_validate(item))
        except ValueError:  # not an attempt: nothing to report
            continue
    return found
