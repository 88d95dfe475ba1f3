"""A tool-using research agent whose final answer is refined until it has the required facts.

`create_agent` builds the agent: a model with a local `lookup` tool (a small fact sheet).
`RefineMiddleware` checks each final answer with `contains_all` (the year, the designer, the
height); while facts are missing, the feedback goes back to the agent as a human message and
the agent answers again, free to look things up again. The run ends with the best answer
as the agent's last message.

Run: `python examples/research_agent_middleware.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from langgraph_refine import RefineMiddleware, RefineResult
from langgraph_refine.evaluators import contains_all

FACTS = {
    "eiffel tower": (
        "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. "
        "It was designed by the engineering firm of Gustave Eiffel. It is 330 metres tall."
    ),
    "gustave eiffel": "Gustave Eiffel (1832-1923) was a French civil engineer.",
}
REQUIRED = ["1889", "Gustave Eiffel", "330"]
TASK = (
    "Use the lookup tool, then write two sentences about the Eiffel Tower: when it was "
    "completed, who designed it, and how tall it is in metres."
)


@tool
def lookup(topic: str) -> str:
    """Look up facts about a topic (a place, a building or a person)."""
    key = topic.strip().lower()
    for name, facts in FACTS.items():
        if name in key or key in name:
            return facts
    return f"No facts about {topic!r}. Known topics: {', '.join(FACTS)}."


def build_agent(model: BaseChatModel, middleware: RefineMiddleware) -> Any:
    """The research agent: the model, the lookup tool and the refine middleware."""
    return create_agent(
        model,
        tools=[lookup],
        system_prompt="You are a careful research assistant. Answer with facts only.",
        middleware=[middleware],
    )


def main(model: BaseChatModel | None = None) -> tuple[list[Any], RefineResult]:
    """Ask the agent once; print the conversation and the loop's outcome."""
    try:
        from examples._common import default_model, show
    except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
        from _common import default_model, show  # type: ignore[no-redef,import-not-found]

    middleware = RefineMiddleware(contains_all(REQUIRED), target_score=1.0, max_iterations=2)
    agent = build_agent(model or default_model(), middleware)
    state = agent.invoke({"messages": [HumanMessage(TASK)]})
    for message in state["messages"]:
        calls = getattr(message, "tool_calls", None)
        text = message.text or (f"(calls {calls})" if calls else "")
        print(f"{message.type:>5}: {text}")
    result = middleware.result(state)
    print()
    show(result)
    return list(state["messages"]), result


if __name__ == "__main__":
    main()
