"""A checkpointed refine loop in its own process, on `ChatOpenAI`, for the faults benchmark's kills.

    python -m benchmarks._fault_worker

reads commands, one JSON object a line, on stdin: `{"run": {...}}` forks a process that
runs the loop (`mode` "start" from the task, "resume" with `invoke(None)`, on `path` "graph"
or "agent", checkpointed by `saver` "sqlite:PATH" or "postgres:URI" on `thread`, its model
at `url`) and writes its result as JSON to `out`; the answer is the process's pid.
`{"wait": PID}` waits for that process to end and answers its exit status. Each loop thus
runs in a fresh process that can be killed with SIGKILL, without paying for the imports
every time (the forked process starts with the libraries already imported).

The model is built as users build it (`ChatOpenAI(model=..., base_url=..., api_key=...)`,
its defaults otherwise) and named after the thread, so the server puts every request down
to this run.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

TASK = "Write one line about the sea."


CLIENTS = ("openai", "anthropic")
"""The chat models the benchmark builds: `ChatOpenAI`, `ChatAnthropic`."""


def chat_model(url: str, run: str, client: str = "openai") -> Any:
    """A chat model as users build it, named `run` (the server's key for the run).

    Args:
        url: The server's root URL.
        run: The model's name.
        client: `"openai"` for `ChatOpenAI`, `"anthropic"` for `ChatAnthropic`.
    """
    if client == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(model=run, base_url=url, api_key="sk-ant-bench")
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=run, base_url=f"{url}/v1", api_key="sk-bench")


def build(
    path: str, url: str, run: str, client: str = "openai", **options: Any
) -> tuple[Any, Any, Any]:
    """The loop on `path` ("graph" or "agent"), to be compiled with a checkpointer.

    Returns:
        A function compiling the runner with a checkpointer (None for none), the run's
        input, and a function reading a `RefineResult` from the runner's final state.
    """
    from langgraph_refine import RefineMiddleware, RefineResult, create_refine_graph
    from langgraph_refine.evaluators import llm_judge

    model = chat_model(url, run, client)
    judge = llm_judge(model)
    if path == "graph":
        builder = create_refine_graph(model, judge, **options)
        return (
            lambda saver: builder.compile(checkpointer=saver),
            {"task": TASK},
            RefineResult.from_state,
        )
    from langchain.agents import create_agent

    middleware = RefineMiddleware(judge, **options)
    return (
        lambda saver: create_agent(model, tools=[], middleware=[middleware], checkpointer=saver),
        {"messages": [HumanMessage(TASK)]},
        middleware.result,
    )


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


def run_loop(command: dict[str, Any]) -> dict[str, Any]:
    """Run or resume the loop as `command` says; its stop reason and calls."""
    compile_with, first, read = build(command["path"], command["url"], command["thread"])
    config = {"configurable": {"thread_id": command["thread"]}}
    with open_saver(command["saver"]) as saver:
        runner = compile_with(saver)
        runner.invoke(first if command["mode"] == "start" else None, config, durability="sync")
        result = read(runner.get_state(config).values)
    return {"stop_reason": result.stop_reason, "calls": result.usage.calls}


def _child(command: dict[str, Any]) -> None:
    """The forked process: run the loop, write its result, exit without cleanup."""
    code = 1
    outcome: dict[str, Any] = {}
    try:
        outcome = {"result": run_loop(command)}
        code = 0
    except BaseException as exc:  # reported to the benchmark, which prints it
        outcome = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        Path(command["out"]).write_text(json.dumps(outcome))
        os._exit(code)


def main() -> int:
    """Serve commands from stdin until it closes."""
    import langchain.agents  # noqa: F401  (imported before forking: children start warm)
    import langchain_openai  # noqa: F401
    from langgraph.checkpoint.postgres import PostgresSaver  # noqa: F401
    from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401

    import langgraph_refine.evaluators  # noqa: F401

    print("ready", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "wait" in command:
            _, status = os.waitpid(command["wait"], 0)
            print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            _child(command["run"])
        print(json.dumps(pid), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
