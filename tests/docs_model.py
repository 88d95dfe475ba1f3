"""The scripted model the documentation's examples run against (tests/test_docs_examples.py).

An OpenAI-compatible server on loopback (`FaultServer`) answers every model the docs
build (`ChatOpenAI(...)`, `"openai:gpt-4o-mini"`, the CLI's `--model`): the examples run
as written, over the real protocol, with no key and no network. Replies depend only on
the request, so concurrent examples get the same answers in any order:

- a generation answers the task with a short first draft; a refinement round (its
  prompt carries an earlier attempt and feedback) answers with a fuller one that gives an
  example;
- the LLM judge passes a response that gives an example (score 0.95) and asks for one
  otherwise (0.6, NEEDS_IMPROVEMENT);
- an agent with tools first calls its first tool (its required arguments set to "the
  topic"), then answers from what it returned (an
  agent asked to rate a response answers like the judge, in JSON, also when it asks for
  its `response_format`'s object);
- a generation asked for an object (`output_schema=`) answers with one that misses a
  field, and its refinement with the complete object;
- a checklist's grader passes each criterion whose words in double quotes all appear in
  the response, and names the first missing one as the gap of any other.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fault_server import Received

DRAFTS: list[tuple[str, str, str]] = [
    # (keyword in the task, first draft, refined answer)
    (
        "turing",
        "The Turing test asks whether a machine can pass for a human in conversation.",
        "The Turing test, proposed by Alan Turing in 1950, asks whether a machine can hold "
        "a conversation that an interrogator cannot tell apart from a human's. For example, "
        "a judge chats by text with two hidden partners, one a person and one a program, and "
        "must say which is which; if the judge cannot reliably tell, the program passes. The "
        "test sidesteps the question of whether machines think by asking instead whether "
        "their behaviour is indistinguishable from thinking, which made it a lasting "
        "benchmark and a target of criticism, such as Searle's Chinese room argument, which "
        "holds that imitation is not understanding.",
    ),
    (
        "haiku",
        "Rain on the window",
        "Soft rain on the glass / for example, a slow drum / the street hums along",
    ),
    (
        "tagline",
        "Plan less, ship more.",
        "Plan less, ship more: for example, one list for the whole week.",
    ),
    ("json", '{"name": "Tom"}', '{"name": "Tom", "age": 3, "example": true}'),
    (
        "add(a, b)",
        "def add(a, b):\n    return a - b",
        "```python\n# for example, add(2, 3) == 5\ndef add(a, b):\n    return a + b\n```",
    ),
    (
        "eiffel",
        "It was built in 1889.",
        "The Eiffel Tower was completed in 1889 and is 330 metres tall.",
    ),
]
PASS = {"feedback": "Clear and complete.", "verdict": "PASS", "score": 0.95}
NEEDS_EXAMPLE = {
    "feedback": "Add a concrete example.",
    "verdict": "NEEDS_IMPROVEMENT",
    "score": 0.6,
}


OBJECTS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (keyword in the task, first object, refined object): typed runs (`output_schema=`)
    ("capital of france", {"name": "Paris"}, {"name": "Paris", "country": "France"}),
]


def _schema_name(body: dict[str, Any]) -> str | None:
    response_format = body.get("response_format") or {}
    name = (response_format.get("json_schema") or {}).get("name")
    return str(name) if name else None


def _typed(body: dict[str, Any]) -> bool:
    """True for a request asking for an object other than the LLM judge's reply."""
    name = _schema_name(body)
    return name is not None and name != "JudgeReply"


def reply(request: Received, number: int) -> str | dict[str, Any]:
    """The scripted model's answer to one chat-completion request."""
    messages: list[dict[str, Any]] = request.body.get("messages") or []
    tools = request.body.get("tools") or []
    rating = "<response_to_rate>" in "\n".join(_text(m) for m in messages)
    if _schema_name(request.body) == "score":  # openevals' create_llm_as_judge
        return json.dumps({"reasoning": "Short and to the point.", "score": True})
    if rating and "# Criteria\n1. " in "\n".join(_text(m) for m in messages):
        return _checklist(messages)
    if _typed(request.body) and not (tools and rating):
        return _object(messages)
    if request.is_judge and not tools:
        rated = _rated(messages)
        return json.dumps(PASS if "example" in rated.lower() else NEEDS_EXAMPLE)
    if tools and not any(m.get("role") == "tool" for m in messages):
        name = tools[0]["function"]["name"]
        parameters = tools[0]["function"].get("parameters", {})
        # The arguments it must give (all, for a tool that says none are required).
        filled = parameters.get("required") or parameters.get("properties", {})
        arguments = dict.fromkeys(filled, "the topic")
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"call_{number}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        }
    if tools and rating:
        # An agent used as the judge (a graph evaluator), after its tool: it answers like
        # the LLM judge, in JSON (its `response_format`'s object, when it has one).
        return json.dumps(PASS if "example" in _rated(messages).lower() else NEEDS_EXAMPLE)
    return _answer(messages)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _rated(messages: list[dict[str, Any]]) -> str:
    text = "\n".join(_text(m) for m in messages)
    found = re.findall(r"<response_to_rate>(.*?)</response_to_rate>", text, flags=re.S)
    return found[-1] if found else text


def _answer(messages: list[dict[str, Any]]) -> str:
    users = [_text(m) for m in messages if m.get("role") == "user"]
    task = users[0] if users else ""
    everything = "\n".join(_text(m) for m in messages).lower()
    refining = len(users) > 1 or "feedback" in everything
    for keyword, first, refined in DRAFTS:
        if keyword in everything:
            return refined if refining else first
    short = task.strip().splitlines()[0][:80] if task.strip() else "the task"
    if refining:
        return f"An improved answer to: {short} For example, one concrete case."
    return f"A first answer to: {short}"


def _checklist(messages: list[dict[str, Any]]) -> str:
    """A checklist's grading: a criterion passes when its quoted words are in the response."""
    text = "\n".join(_text(m) for m in messages)
    listed = text.split("# Criteria\n", 1)[1].split("\n\n", 1)[0]
    rated = _rated(messages).lower()
    results = []
    for number, criterion in re.findall(r"^(\d+)\. (.*)$", listed, flags=re.M):
        missing = [w for w in re.findall(r'"([^"]+)"', criterion) if w.lower() not in rated]
        gap = f'It does not mention "{missing[0]}".' if missing else ""
        results.append({"number": int(number), "gap": gap, "passed": not missing})
    return json.dumps({"criteria": results})


def _object(messages: list[dict[str, Any]]) -> str:
    """A typed generation: the first object misses a field; a refinement completes it."""
    everything = "\n".join(_text(m) for m in messages).lower()
    refining = "feedback" in everything
    for keyword, first, refined in OBJECTS:
        if keyword in everything:
            return json.dumps(refined if refining else first)
    return "{}"
