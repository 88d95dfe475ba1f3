"""Human review as a chat client sees it: a LangChain human-in-the-loop request and decisions.

The review's interrupt value is also what `HumanInTheLoopMiddleware` sends (a
`HITLRequest`: `action_requests`, `review_configs`), and the review accepts LangChain's
decisions (`{"decisions": [...]}`) besides its own answers, in the graph and in
`RefineMiddleware` alike.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import TypeAdapter

from langgraph_refine import (
    Evaluation,
    RefineMiddleware,
    RefineResult,
    ReviewInputError,
    ReviewNode,
    create_refine_graph,
)
from langgraph_refine._loop._review_schema import (
    from_decisions,
    from_text,
    hitl_request,
    review_answer_schema,
)
from tests.fakes import AgentModel, ScriptedChatModel, lookup

TABLE = {"a": 0.6, "b": 0.4, "c": 0.7, "edited text": 0.5}


def judged(response: str, state: Any) -> Evaluation:
    return Evaluation(score=TABLE.get(response, 0.3), feedback=f"feedback on {response}")


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


class Graph:
    """A reviewed refine graph: its model, config and the interrupt it paused with."""

    def __init__(self, mode: str = "final", replies: tuple[str, ...] = ("a", "b", "c")) -> None:
        self.model = ScriptedChatModel(replies=list(replies))
        self.graph = create_refine_graph(
            self.model, judged, human_review=mode, max_iterations=1, patience=None
        ).compile(checkpointer=InMemorySaver())
        self.config = thread()

    def start(self) -> dict[str, Any]:
        out = self.graph.invoke({"task": "Write a tagline."}, self.config)
        value: dict[str, Any] = out["__interrupt__"][0].value
        return value

    def answer(self, value: Any) -> dict[str, Any]:
        return self.graph.invoke(Command(resume=value), self.config)  # type: ignore[no-any-return]

    def pending(self) -> dict[str, Any] | None:
        interrupts = self.graph.get_state(self.config).interrupts
        return interrupts[0].value if interrupts else None

    def result(self) -> RefineResult:
        return RefineResult.from_state(self.graph.get_state(self.config).values)


class Agent:
    """An agent with a reviewed `RefineMiddleware`."""

    def __init__(self, mode: str = "final", replies: tuple[str, ...] = ("a", "b", "c")) -> None:
        self.model = AgentModel(replies=list(replies))
        self.middleware = RefineMiddleware(
            judged, human_review=mode, max_iterations=1, patience=None
        )
        self.agent = create_agent(
            self.model, tools=[lookup], middleware=[self.middleware], checkpointer=InMemorySaver()
        )
        self.config = thread()

    def start(self) -> dict[str, Any]:
        out = self.agent.invoke({"messages": [HumanMessage("Write a tagline.")]}, self.config)
        value: dict[str, Any] = out["__interrupt__"][0].value
        return value

    def answer(self, value: Any) -> dict[str, Any]:
        return self.agent.invoke(Command(resume=value), self.config)  # type: ignore[no-any-return]

    def pending(self) -> dict[str, Any] | None:
        interrupts = self.agent.get_state(self.config).interrupts
        return interrupts[0].value if interrupts else None

    def result(self) -> RefineResult:
        return self.middleware.result(self.agent.get_state(self.config).values)


HOSTS = [Graph, Agent]


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("mode", ["final", "every_round"])
def test_the_payload_is_a_langchain_hitl_request(host: Any, mode: str) -> None:
    payload = host(mode).start()
    TypeAdapter(HITLRequest).validate_python(payload)  # LangChain's own shape
    [action] = payload["action_requests"]
    [config] = payload["review_configs"]
    assert action["name"] == config["action_name"] == payload["name"]
    # Only what a reviewer may change is an arg (a chat client renders each as a field).
    assert action["args"] == {"response": payload["response"]}
    assert payload["response"] in {"a", "b"} and payload["feedback"].startswith("feedback on")
    description = action["description"]
    which = "latest answer" if mode == "every_round" else "best answer so far"
    # Rounds from 1, as the chat's progress card counts them; `attempt` stays the index.
    assert description.startswith(f"The {which} (round {payload['attempt'] + 1}), ")
    assert f"scored {payload['score']:.2f} of 1" in description
    assert f"The judge's feedback: {payload['feedback']}" in description
    assert "args" not in description and "response)" not in description  # no developer words
    assert {"approve", "edit", "reject"} <= set(config["allowed_decisions"])
    # Today's keys are all still there.
    assert {"task", "response", "score", "stop_reason", "actions", "iteration"} <= set(payload)


def test_the_description_says_the_verdict_and_an_unscored_answer_in_words() -> None:
    payload = {"name": "refine", "mode": "final", "response": "r", "attempt": 0}
    judged = hitl_request(payload | {"score": 0.4, "verdict": "NEEDS_IMPROVEMENT", "feedback": ""})
    first = judged["action_requests"][0]["description"].splitlines()[0]
    assert first == "The best answer so far (round 1), scored 0.40 of 1: needs improvement."
    assert "feedback" not in judged["action_requests"][0]["description"]  # none given
    unscored = hitl_request(payload | {"score": None, "verdict": None, "feedback": ""})
    first = unscored["action_requests"][0]["description"].splitlines()[0]
    assert first == "The best answer so far (round 1), not scored."


def test_the_description_and_the_progress_card_count_rounds_alike() -> None:
    # A chat shows both: the card counts rounds from 1, and so does the review.
    model = AgentModel(replies=["a", "b"])
    refine = RefineMiddleware(
        judged, human_review="final", max_iterations=1, patience=None, progress_ui="card"
    )
    agent = create_agent(model, tools=[], middleware=[refine], checkpointer=InMemorySaver())
    config = thread()
    out = agent.invoke({"messages": [HumanMessage("Write a tagline.")]}, config)
    payload = out["__interrupt__"][0].value
    assert (payload["attempt"], payload["best_attempt"]) == (0, 0)  # indexes, as documented
    description = payload["action_requests"][0]["description"]
    assert description.startswith("The best answer so far (round 1), scored 0.60 of 1.")
    (card,) = agent.get_state(config).values["ui"]
    assert card["props"]["lines"][0] == "round 1: score 0.6, refining"
    assert "(attempt" not in description


@pytest.mark.parametrize("host", HOSTS)
def test_approve_decision_approves_without_a_model_call(host: Any) -> None:
    run = host()
    run.start()
    calls = len(run.model.calls)
    run.answer({"decisions": [{"type": "approve"}]})
    assert len(run.model.calls) == calls
    result = run.result()
    assert (result.stop_reason, result.value) == ("approved", "a")
    assert run.pending() is None


@pytest.mark.parametrize("host", HOSTS)
def test_edit_decision_takes_the_edited_response(host: Any) -> None:
    run = host()
    payload = run.start()
    [action] = payload["action_requests"]
    edited = {"name": action["name"], "args": {**action["args"], "response": "edited text"}}
    run.answer({"decisions": [{"type": "edit", "edited_action": edited}]})
    result = run.result()
    assert (result.stop_reason, result.value, result.score) == ("edited", "edited text", 0.5)
    assert result.attempts[-1].move == "edit"


@pytest.mark.parametrize("host", HOSTS)
def test_reject_without_a_message_stops_with_the_best(host: Any) -> None:
    run = host()
    run.start()
    calls = len(run.model.calls)
    run.answer({"decisions": [{"type": "reject"}]})
    assert len(run.model.calls) == calls
    result = run.result()
    assert (result.stop_reason, result.value) == ("rejected", "a")


# What agent-chat-ui sends (`buildDecisionFromState`): it refuses a rejection without a
# reason, and with the reason box left empty the submit is its default, `approve`.
CHAT_STOP = {"decisions": [{"type": "reject", "message": "stop"}]}
CHAT_EMPTY_REJECTION = {"decisions": [{"type": "approve"}]}


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("mode", ["final", "every_round"])
def test_the_description_offers_only_what_a_chat_can_send(host: Any, mode: str) -> None:
    payload = host(mode).start()
    description = payload["action_requests"][0]["description"]
    assert "without" not in description, "a chat cannot send a rejection without a message"
    stop = 'reject with the message "stop" (or mark the thread resolved) to end with the best'
    assert stop in description
    assert "Reject with a message saying what to change" in description
    assert "Approve to end with this answer" in description


@pytest.mark.parametrize("host", HOSTS)
def test_a_chats_stop_rejection_stops_with_the_best_without_a_model_call(host: Any) -> None:
    run = host(replies=("b", "a", "c"))  # the second answer is the best (0.6 > 0.4)
    run.start()
    calls = len(run.model.calls)
    run.answer(CHAT_STOP)
    assert len(run.model.calls) == calls
    result = run.result()
    assert (result.stop_reason, result.value) == ("rejected", "a")
    assert run.pending() is None


@pytest.mark.parametrize("host", HOSTS)
def test_a_chats_empty_rejection_is_an_approval_as_the_description_says(host: Any) -> None:
    # Nothing tells it from a real approval: the description never offers it as a stop.
    run = host()
    run.start()
    run.answer(CHAT_EMPTY_REJECTION)
    assert run.result().stop_reason == "approved"


def test_a_text_answer_stop_rejects() -> None:
    assert from_text("Stop.", ["approve", "edit", "reject", "revise"]) == {"action": "reject"}
    assert from_text("stop", ["approve", "continue"]) == {"action": "revise", "feedback": "stop"}


@pytest.mark.parametrize("host", HOSTS)
def test_reject_with_a_message_revises_with_it_as_feedback(host: Any) -> None:
    run = host()
    run.start()
    run.answer({"decisions": [{"type": "reject", "message": "Shorter, please."}]})
    assert len(run.model.calls) == 3  # one more round
    assert "Shorter, please." in str(run.model.calls[2][-1].content)
    payload = run.pending()  # asked again, about the round the message asked for
    assert payload is not None and payload["iteration"] == 2
    assert payload["response"] == "c"
    run.answer({"decisions": [{"type": "approve"}]})
    result = run.result()
    assert (result.stop_reason, result.value) == ("approved", "c")
    assert result.attempts[2].instruction == "Shorter, please."


@pytest.mark.parametrize("host", HOSTS)
def test_a_malformed_decision_keeps_the_review_pending_with_the_error(host: Any) -> None:
    run = host()
    run.start()
    run.answer({"decisions": [{"type": "edit", "edited_action": {"name": "refine", "args": {}}}]})
    payload = run.pending()
    assert payload is not None
    assert "edited_action['args']['response']" in payload["error"]
    assert payload["action_requests"]  # still a request a chat client renders
    run.answer({"decisions": [{"type": "respond", "message": "hi"}]})
    payload = run.pending()
    assert payload is not None and "'type' must be one of" in payload["error"]
    run.answer({"decisions": [{"type": "approve"}, {"type": "approve"}]})
    payload = run.pending()
    assert payload is not None and "one decision" in payload["error"]
    run.answer({"action": "approve"})  # the loop's own answers still work
    assert run.result().stop_reason == "approved"


@pytest.mark.parametrize(
    ("decision", "answer"),
    [
        ({"type": "approve"}, {"action": "approve"}),
        (
            {"type": "edit", "edited_action": {"name": "x", "args": {"response": "t"}}},
            {"action": "edit", "response": "t"},
        ),
        ({"type": "reject"}, {"action": "reject"}),
        ({"type": "reject", "message": "  "}, {"action": "reject"}),
        ({"type": "reject", "message": "more"}, {"action": "revise", "feedback": "more"}),
        ({"type": "reject", "message": "stop"}, {"action": "reject"}),
        ({"type": "reject", "message": " Stop. "}, {"action": "reject"}),
        ({"type": "reject", "message": "REJECT!"}, {"action": "reject"}),
        (
            {"type": "reject", "message": "Stop rambling."},
            {"action": "revise", "feedback": "Stop rambling."},
        ),
    ],
)
def test_each_decision_is_one_of_the_loops_answers(decision: Any, answer: Any) -> None:
    response = {"decisions": [decision]}
    TypeAdapter(HITLResponse).validate_python(response)  # what LangChain's clients send
    assert from_decisions(response) == answer


@pytest.mark.parametrize("mode", ["final", "every_round"])
def test_the_schema_accepts_exactly_the_decisions_the_review_applies(mode: Any) -> None:
    import jsonschema

    node = ReviewNode(mode)
    validator = jsonschema.Draft202012Validator(review_answer_schema(node.actions))
    edit = {"name": "refine", "args": {"response": "x", "score": 0.5}}
    candidates: list[Any] = [
        {"decisions": [{"type": "approve"}]},
        {"decisions": [{"type": "edit", "edited_action": edit}]},
        {"decisions": [{"type": "edit", "edited_action": {"args": {"response": " "}}}]},
        {"decisions": [{"type": "edit", "edited_action": {"args": {}}}]},
        {"decisions": [{"type": "edit"}]},
        {"decisions": [{"type": "reject"}]},
        {"decisions": [{"type": "reject", "message": "m"}]},
        {"decisions": [{"type": "reject", "message": 3}]},
        {"decisions": [{"type": "respond", "message": "m"}]},
        {"decisions": [{"type": "approve"}, {"type": "reject"}]},
        {"decisions": []},
        {"decisions": ["approve"]},
        {"decisions": {"type": "approve"}},
        {"action": "nope", "decisions": [{"type": "approve"}]},
    ]
    for value in candidates:
        valid = validator.is_valid(value)
        try:
            node.apply({"response": "r"}, value)
            applied = True
        except ReviewInputError:
            applied = False
        assert valid == applied, value
