"""A refine loop run in its own process, for the crash-and-resume tests in test_durable.py.

The generator and evaluator are deterministic callables that append one marker line per
call (`gen 3`, `eval 3`) to a file before doing their (slowed) work, so the test can
kill the process at a chosen call and count afterwards which calls ran twice.

    python -m tests.durable_worker start  --saver sqlite:/tmp/x.sqlite --thread T --markers M
    python -m tests.durable_worker resume --saver sqlite:/tmp/x.sqlite --thread T --markers M

`start` runs the loop from its input; `resume` continues it with `invoke(None, config)`.
Both print the final result as one JSON line on stdout. With `--edits` the generator is
a chat model that refines by SEARCH/REPLACE edits (`edits=True`), one of them failing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import BaseModel

from langgraph_refine import Evaluation, RefineResult, create_refine_graph

TASK = "Describe the sea."
# Scores per attempt index: the loop refines until index 5 reaches the target.
SCORES = [0.1, 0.3, 0.2, 0.5, 0.6, 0.95]
MAX_ITERATIONS = 6


class Recorder:
    """Deterministic generator and evaluator that log every call to a marker file."""

    def __init__(self, markers: str, delay: float = 0.0, fail: str | None = None) -> None:
        self.markers = markers
        self.delay = delay
        self.fail = fail  # "gen:N" or "eval:N": raise on that call

    def _mark(self, kind: str, index: int) -> None:
        # One write() on an O_APPEND descriptor: a whole line, even if we are killed.
        fd = os.open(self.markers, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{kind} {index}\n".encode())
        finally:
            os.close(fd)
        if self.fail == f"{kind}:{index}":
            raise RuntimeError(f"injected failure in {kind}")
        time.sleep(self.delay)

    def generate(self, state: Any) -> str:
        index = len(state["attempts"])
        self._mark("gen", index)
        seen = ",".join(str(a.index) for a in state["attempts"])
        return f"sea v{index} (after {seen or 'none'})"

    def evaluate(self, response: str, state: Any) -> Evaluation:
        index = int(response.split()[1][1:])
        self._mark("eval", index)
        return Evaluation(score=SCORES[index], feedback=f"improve v{index}")


class Sea(BaseModel):
    """The object a typed run (`--typed`) refines."""

    version: int
    text: str
    seen: list[int]


INVALID_INDEX = 2
"""In a typed run, this attempt's reply is no object (FAIL, the evaluator not called)."""


class TypedRecorder(Recorder):
    """The same calls, refining a `Sea` object: the generator returns it as a dict."""

    def generate(self, state: Any) -> Any:  # type: ignore[override]
        index = len(state["attempts"])
        self._mark("gen", index)
        if index == INVALID_INDEX:
            return "the sea, but not as JSON"
        return {
            "version": index,
            "text": f"sea v{index}",
            "seen": [a.index for a in state["attempts"]],
        }

    def evaluate(self, response: str, state: Any) -> Evaluation:
        index = json.loads(response)["version"]
        self._mark("eval", index)
        return Evaluation(score=SCORES[index], feedback=f"improve v{index}")


FAILED_EDIT_INDEX = 2
"""In an edits run, this attempt's edit does not apply (FAIL, the evaluator not called)."""


class EditingModel(BaseChatModel):
    """A chat model that writes attempt 0 whole and every later one as two edit blocks.

    The attempt it writes is the one after the last shown in the prompt (the loop runs
    the `chain` strategy), so it needs no memory across a crash.
    """

    recorder: Any

    @property
    def _llm_type(self) -> str:
        return "editing"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        shown = [int(n) for n in re.findall(r"^## Attempt (\d+) ", prompt, re.MULTILINE)]
        index = max(shown, default=0)
        self.recorder._mark("gen", index)
        if not shown:
            text = "sea v0\nwaves: 0\nthe end"
        else:
            old = re.findall(r"^sea v(\d+)$", prompt, re.MULTILINE)[-1]
            first = "no such line" if index == FAILED_EDIT_INDEX else f"sea v{old}"
            text = (
                f"<<<<<<< SEARCH\n{first}\n=======\nsea v{index}\n>>>>>>> REPLACE\n"
                f"<<<<<<< SEARCH\nwaves: {old}\n=======\nwaves: {index}\n>>>>>>> REPLACE"
            )
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


class EditRecorder(Recorder):
    """The same calls, the generator a chat model refining by edits."""

    def evaluate(self, response: str, state: Any) -> Evaluation:
        index = int(response.split()[1][1:])
        self._mark("eval", index)
        return Evaluation(score=SCORES[index], feedback=f"improve v{index}")


def build(recorder: Recorder, checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The loop under test, compiled with the given saver (typed for a `TypedRecorder`)."""
    typed = isinstance(recorder, TypedRecorder)
    editing = isinstance(recorder, EditRecorder)
    return create_refine_graph(
        EditingModel(recorder=recorder) if editing else recorder.generate,
        recorder.evaluate,
        max_iterations=MAX_ITERATIONS,
        patience=None,
        retry_policy=None,
        output_schema=Sea if typed else None,
        **({"edits": True, "strategy": "chain"} if editing else {}),
    ).compile(checkpointer=checkpointer)


class AgentSeaModel(BaseChatModel):
    """The agent's model: answers `sea vN`, N the answers it already gave (it sees them all)."""

    recorder: Any

    @property
    def _llm_type(self) -> str:
        return "agent-sea"

    def bind_tools(self, tools: Any, **kwargs: Any) -> AgentSeaModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        index = sum(1 for m in messages if isinstance(m, AIMessage) and m.text.startswith("sea v"))
        self.recorder._mark("gen", index)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(f"sea v{index}"))])


def build_agent(recorder: Recorder, checkpointer: BaseCheckpointSaver[Any]) -> tuple[Any, Any]:
    """The same loop in an agent (`create_agent` + `RefineMiddleware`) and its middleware."""
    from langchain.agents import create_agent

    from langgraph_refine import RefineMiddleware

    middleware = RefineMiddleware(
        recorder.evaluate, max_iterations=MAX_ITERATIONS, patience=None, retry_policy=None
    )
    agent = create_agent(
        AgentSeaModel(recorder=recorder),
        tools=[],
        middleware=[middleware],
        checkpointer=checkpointer,
    )
    return agent, middleware


def agent_summary(middleware: Any, values: dict[str, Any]) -> dict[str, Any]:
    """`summary` of an agent's run, with the conversation's last message."""
    result = middleware.result(values)
    return {
        "value": result.value,
        "stop_reason": result.stop_reason,
        "attempts": [[a.index, a.response, a.score] for a in result.attempts],
        "calls": result.usage.calls,
        "last_message": values["messages"][-1].text,
    }


def summary(values: dict[str, Any]) -> dict[str, Any]:
    """What the tests compare between a crashed-and-resumed run and a clean one."""
    result = RefineResult.from_state(values)
    return {
        "value": result.value,
        "stop_reason": result.stop_reason,
        "attempts": [[a.index, a.response, a.score, a.output] for a in result.attempts],
        "edits": [a.edits for a in result.attempts],
        "output": values.get("output"),
        "calls": result.usage.calls,
    }


@contextlib.contextmanager
def open_saver(spec: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """`sqlite:PATH` or `postgres:URI` -> a real saver, set up and closed properly."""
    kind, _, target = spec.partition(":")
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(target) as saver:
            yield saver
    elif kind == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(target) as saver:
            saver.setup()
            yield saver
    else:
        raise SystemExit(f"--saver must be sqlite:PATH or postgres:URI, got {spec!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "resume"])
    parser.add_argument("--saver", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--markers", required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--fail", default=None)
    parser.add_argument("--durability", default="sync", choices=["sync", "async", "exit"])
    parser.add_argument("--typed", action="store_true", help="refine a Sea object")
    parser.add_argument("--edits", action="store_true", help="refine by edits")
    parser.add_argument("--agent", action="store_true", help="the loop in an agent")
    args = parser.parse_args(argv)
    if args.agent:
        return run_agent(args)

    kind = TypedRecorder if args.typed else EditRecorder if args.edits else Recorder
    recorder = kind(args.markers, args.delay, args.fail)
    config = {"configurable": {"thread_id": args.thread}}
    with open_saver(args.saver) as saver:
        graph = build(recorder, saver)
        snapshot = graph.get_state(config)
        # A kill between a task's saved writes and the step's checkpoint leaves no `next`
        # but the finished task (its writes pending): `invoke(None)` applies them and goes on.
        if args.mode == "resume" and not snapshot.next and not snapshot.tasks:
            # A kill that lands after the last checkpoint was written (a loaded machine
            # can delay it past the run's end) leaves a finished thread: report it as is.
            if snapshot.values.get("stop_reason"):
                print(json.dumps(summary(snapshot.values)))
                return 0
            print(json.dumps({"error": "nothing to resume on this thread"}))
            # What the thread holds, for the test's failure message.
            held = f"{snapshot.metadata} {sorted(snapshot.values)}"
            print(f"nothing to resume: {held}", file=sys.stderr)
            return 3
        graph.invoke(
            {"task": TASK} if args.mode == "start" else None,
            config,
            durability=args.durability,
        )
        print(json.dumps(summary(graph.get_state(config).values)))
    return 0


def run_agent(args: argparse.Namespace) -> int:
    """`main` for an agent: start from the task, or resume the thread with `invoke(None)`."""
    from langchain_core.messages import HumanMessage

    recorder = Recorder(args.markers, args.delay, args.fail)
    config = {"configurable": {"thread_id": args.thread}}
    with open_saver(args.saver) as saver:
        agent, middleware = build_agent(recorder, saver)
        snapshot = agent.get_state(config)
        if args.mode == "resume" and not snapshot.next and not snapshot.tasks:
            print(json.dumps(agent_summary(middleware, snapshot.values)))
            return 0
        first = {"messages": [HumanMessage(TASK)]} if args.mode == "start" else None
        agent.invoke(first, config, durability=args.durability)
        print(json.dumps(agent_summary(middleware, agent.get_state(config).values)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
