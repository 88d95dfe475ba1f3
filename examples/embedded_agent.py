"""The refine loop as one step of a larger agent graph.

A chat agent on `MessagesState`: a `triage` step decides whether the user wants a
written piece; if so, the compiled refine graph (added as a node, no checkpointer of its
own) takes the last human message as its task and appends its best answer as one
`AIMessage`; a `sign_off` step follows. The parent owns persistence, so two turns on one
thread keep the whole conversation.

Run: `python examples/embedded_agent.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_refine import create_refine_graph
from langgraph_refine.evaluators import combine, contains_all, word_count


def triage(state: MessagesState) -> Literal["write", "chat"]:
    """Send writing requests to the refine loop, everything else to a plain reply."""
    last = state["messages"][-1].text.lower()
    return "write" if last.startswith(("write", "describe", "draft")) else "chat"


def chat(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage("Ask me to write or describe something.")]}


def sign_off(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage("Anything else I should write?")]}


def build_graph(model: BaseChatModel) -> StateGraph[Any, Any, Any, Any]:
    """The agent: triage, then either the refine loop (and a sign-off) or a chat reply."""
    writer = create_refine_graph(
        model,
        combine(word_count(20, 60), contains_all(["fog", "light"])),
        target_score=1.0,
        max_iterations=3,
        name="writer",
    ).compile()  # no checkpointer: the parent's is used

    builder = StateGraph(MessagesState)
    builder.add_node("write", writer)
    builder.add_node("chat", chat)
    builder.add_node("sign_off", sign_off)
    builder.add_conditional_edges(START, triage, ["write", "chat"])
    builder.add_edge("write", "sign_off")
    builder.add_edge("sign_off", END)
    builder.add_edge("chat", END)
    return builder


def main(model: BaseChatModel | None = None) -> list[Any]:
    """Two turns on one thread; print the conversation."""
    try:
        from examples._common import default_model
    except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
        from _common import default_model  # type: ignore[no-redef,import-not-found]

    agent = build_graph(model or default_model()).compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "embedded-agent"}}
    agent.invoke({"messages": [HumanMessage("Hello!")]}, config)
    state = agent.invoke(
        {"messages": [HumanMessage("Describe a lighthouse in fog in 20 to 60 words.")]}, config
    )
    for message in state["messages"]:
        print(f"{message.type:>5}: {message.text}")
    return list(state["messages"])


if __name__ == "__main__":
    main()
