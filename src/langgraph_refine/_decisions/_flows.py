"""Drivers of a flow that asks for calls: one generator, a sync and an async driver.

A step's logic is written once as a generator that yields what it needs carried out and
is sent the result, or thrown the error the call raised (it decides what an error
means), the pattern of httpx's auth flows. `drive` carries the asks out synchronously,
`adrive` with an awaitable; the flow's return value is theirs. The one driver of every
flow: a round's (`_round.evaluate_round`), the generate step's (`_generate`), the
agent's model step (`RefineMiddleware.wrap_model_call`) and a run's (`_loop._driver`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

AskT = TypeVar("AskT")
DoneT = TypeVar("DoneT")

CallFlow = Generator[AskT, Any, DoneT]
"""A flow yielding asks of type `AskT`, returning `DoneT`."""


def drive(flow: CallFlow[AskT, DoneT], do: Callable[[AskT], Any]) -> DoneT:
    """Carry out a flow: each ask done by `do`, or its error thrown in."""
    reply: Any = None
    error: Exception | None = None
    while True:  # a round's hot path: no allocation or call per ask beyond the flow's own
        try:
            ask = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as done:
            value: DoneT = done.value
            return value
        try:
            reply, error = do(ask), None
        except Exception as exc:  # the flow decides what an error means
            reply, error = None, exc


async def adrive(flow: CallFlow[AskT, DoneT], do: Callable[[AskT], Awaitable[Any]]) -> DoneT:
    """Async twin of `drive`: `do` returns an awaitable."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            ask = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as done:
            value: DoneT = done.value
            return value
        try:
            reply, error = await do(ask), None
        except Exception as exc:
            reply, error = None, exc
