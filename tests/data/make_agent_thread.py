"""Writes agent_thread.sqlite: `RefineMiddleware` threads as the eighth round's release stored them.

That release kept the agent's loop in nineteen `refine_*` state keys (positional lists, a
phase, a judging dict, a route); the next keeps it in one typed record and migrates the
old keys when a thread resumes (tests/test_agent_record.py). Kept to show how the fixture
was made; run with that release installed:
`python tests/data/make_agent_thread.py tests/data/agent_thread.sqlite`.

Threads: `review` paused at a final review (best "first draft"), `judging` paused before
the model step that judges "first draft" (after a tool call), `every` paused at an
every-round review after round 1, `finished` a loop that ended ("second draft", passed).
"""

import itertools
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_refine import RefineMiddleware

SCORES = {"first draft": 0.3, "second draft": 0.95, "third draft": 0.5}


@tool
def lookup(topic: str) -> str:
    """Look up facts about a topic."""
    return f"{topic}: built in 1889"


class Model(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> "Model":
        return self


def model() -> Model:
    call = AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": "tower"}, "id": "c1"}])
    drafts = [AIMessage("first draft"), AIMessage("second draft"), AIMessage("third draft")]
    return Model(messages=itertools.chain([call], itertools.cycle(drafts)))


def evaluate(response: str, state: Any) -> float:
    return SCORES[response]


def agent(saver: Any, **options: Any) -> Any:
    middleware = RefineMiddleware(evaluate, **({"max_iterations": 3, "patience": None} | options))
    return create_agent(model(), tools=[lookup], middleware=[middleware], checkpointer=saver)


ASK = {"messages": [HumanMessage("Tell me about the tower.")]}

with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    agent(saver, human_review="final", target_score=0.99, max_iterations=2).invoke(
        ASK, {"configurable": {"thread_id": "review"}}
    )
    stepped = create_agent(
        model(),
        tools=[lookup],
        checkpointer=saver,
        interrupt_before=["model"],
        middleware=[RefineMiddleware(evaluate, max_iterations=3, patience=None)],
    )
    config = {"configurable": {"thread_id": "judging"}}
    stepped.invoke(ASK, config)  # before the first model call
    stepped.invoke(None, config)  # the tool call
    stepped.invoke(None, config)  # "first draft", kept aside to be judged
    agent(saver, human_review="every_round").invoke(ASK, {"configurable": {"thread_id": "every"}})
    agent(saver).invoke(ASK, {"configurable": {"thread_id": "finished"}})
