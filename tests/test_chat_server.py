"""An agent with `RefineMiddleware`, served by `langgraph dev`, driven as a chat client drives it.

The served graph is `examples/chat_server` (its own `langgraph.json`); its model is a
scripted OpenAI-compatible server on loopback that answers `Answer N.` (N counts the
agent's answers in the conversation) and judges `Answer 1.` 0.4 and any later answer a
PASS. The client streams a run with the LangGraph SDK as agent-chat-ui does
(`stream_mode=["messages-tuple", "custom", "values"]`) and the tests check what a chat
would render from it, the loop's progress card (a generative-UI message) included.

The server bundles the card's component (`progress.tsx`) with Node.js: `langgraph dev`
runs `npx @langchain/langgraph-ui`, which `make install` fetches into npm's cache. The
server here runs it offline; without Node.js or that cache the server is given the same
configuration without its `"ui"` key, and the one test of the served component skips,
saying why (the cards themselves are the loop's and are tested either way). CI's machines
have Node.js: `.ci/run` fetches the bundler and requires it (`REQUIRE_BUNDLER_ENV`).
One test mounts the card's script in headless Chromium as agent-chat-ui mounts it
(`tests/browser.py`); it skips, saying why, where Chromium is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.test_server import ROOT, scripted_openai

pytestmark = [pytest.mark.server, pytest.mark.slow]

TASK = "Tell me about the Eiffel Tower."
FEEDBACK = "Say where it is."
LOOP_PROMPT = "Your answer was evaluated"
CONFIG = "examples/chat_server/langgraph.json"
CARD = "refine_progress"
BUNDLER = ["-y", "@langchain/langgraph-ui@latest", "--help"]  # what `langgraph dev` runs
OFFLINE = {"npm_config_offline": "true"}  # npm answers from its cache, never the registry


def chat_script(body: dict[str, Any]) -> str:
    """The agent's answers and the judge's verdicts (see the module's docstring)."""
    prompt = "\n".join(str(m.get("content")) for m in body["messages"])
    rated = re.search(r"<response_to_rate>\s*(.*?)\s*</response_to_rate>", prompt, re.S)
    if body.get("response_format") or rated:
        first = rated is not None and rated.group(1) == "Answer 1."
        verdict = (
            {"verdict": "NEEDS_IMPROVEMENT", "score": 0.4, "feedback": FEEDBACK}
            if first
            else {"verdict": "PASS", "score": 0.95, "feedback": "good"}
        )
        return json.dumps(verdict)
    answers = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    return f"Answer {answers + 1}."


@pytest.fixture(scope="module")
def chat_model_server() -> Iterator[ThreadingHTTPServer]:
    with scripted_openai(chat_script) as server:
        yield server


def bundler_missing() -> str | None:
    """Why `langgraph dev` could not bundle the example's UI here offline, or None."""
    npx = shutil.which("npx")
    if npx is None:
        return (
            "Node.js (npx) is not installed: langgraph dev bundles examples/chat_server/"
            "progress.tsx with it (install Node.js >= 20.16 and npm, then `make install`)"
        )
    env = {**os.environ, **OFFLINE}
    done = subprocess.run([npx, *BUNDLER], env=env, capture_output=True, timeout=120)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines() or ["nothing"]
        return (
            "the UI bundler @langchain/langgraph-ui is not in npm's cache: `make install` "
            f"fetches it (npx said: {said[0]})"
        )
    return None


REQUIRE_BUNDLER_ENV = "LANGGRAPH_REFINE_REQUIRE_UI_BUNDLER"
"""Set to 1 (as .ci/run does) to make a missing UI bundler fail the component's test."""


@pytest.fixture(scope="module")
def ui_missing() -> str | None:
    return bundler_missing()


def skip_without(missing: str | None, environ: Mapping[str, str] = os.environ) -> None:
    """Skip the test when the UI bundler is `missing` (fail instead when it is required)."""
    if missing is None:
        return
    if environ.get(REQUIRE_BUNDLER_ENV, "").strip() == "1":
        pytest.fail(f"{REQUIRE_BUNDLER_ENV}=1 but {missing}")
    pytest.skip(missing)


@pytest.fixture(scope="module")
def chat_server(
    chat_model_server: ThreadingHTTPServer,
    ui_missing: str | None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """`langgraph dev` serving `examples/chat_server/langgraph.json` (its UI bundled offline)."""
    from examples.batch_on_server import serve

    folder = tmp_path_factory.mktemp("chat-server")
    base_url = f"http://127.0.0.1:{chat_model_server.server_address[1]}/v1"
    config = CONFIG
    if ui_missing is not None:  # the server would exit: its bundler cannot start
        config = str(without_ui(folder))
    started = time.time()
    with serve(
        base_url,
        "scripted-model",
        logs=folder / "server.log",
        settings=OFFLINE,
        config=config,
        state=folder,
    ) as url:
        if ui_missing is None:
            wait_for_bundle(folder, started)
        yield url


def without_ui(folder: Path) -> Path:
    """The example's configuration without its `"ui"` key (its paths stay the root's)."""
    config = json.loads((ROOT / CONFIG).read_text())
    del config["ui"]
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


def bundled(index: Path) -> dict[str, Any]:
    """The bundle's index: the graphs bundled so far ({} while the bundler writes it)."""
    try:
        found: dict[str, Any] = json.loads(index.read_text())
    except ValueError:
        return {}
    return found


def wait_for_bundle(state: Path, started: float) -> None:
    """Until the server's bundler has written this start's bundle of every graph's UI.

    The server reads the bundle's index once, at the first request for a component;
    `state` is the folder the server works in.
    """
    index = state / ".langgraph_api" / "ui" / "schemas.json"
    graphs = set(json.loads((ROOT / CONFIG).read_text())["ui"])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        fresh = index.exists() and index.stat().st_mtime >= started - 1
        if fresh and set(bundled(index)) == graphs:
            return
        time.sleep(0.5)
    raise AssertionError(f"the server did not bundle {sorted(graphs)} into {index}")


class Chat:
    """One run streamed as a chat client streams it, and what it would render."""

    def __init__(self, url: str, graph: str = "chat_agent") -> None:
        from langgraph_sdk import get_sync_client

        self.client = get_sync_client(url=url)
        self.thread_id = self.client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": TASK}]}
        self.parts = list(
            self.client.runs.stream(
                self.thread_id,
                graph,
                input=request,
                stream_mode=["messages-tuple", "custom", "values"],
            )
        )

    def streamed(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The `messages-tuple` parts: (message or chunk, metadata)."""
        return [(p.data[0], p.data[1]) for p in self.parts if p.event == "messages"]

    def rendered(self) -> dict[str, str]:
        """What a chat shows: each message id's text, its chunks joined in order.

        A message without text (the progress card's host) shows no text: it is left out.
        """
        shown: dict[str, str] = {}
        for message, _ in self.streamed():
            text = message.get("content")
            text = text if isinstance(text, str) else json.dumps(text)
            if message.get("type", "").endswith("Chunk"):
                shown[message["id"]] = shown.get(message["id"], "") + text
            else:
                shown[message["id"]] = text
        return {key: text for key, text in shown.items() if text}

    def custom(self) -> list[dict[str, Any]]:
        return [p.data for p in self.parts if p.event == "custom"]

    def values(self) -> list[dict[str, Any]]:
        return [p.data for p in self.parts if p.event == "values"]


@pytest.fixture(scope="module")
def chat(chat_server: str) -> Iterator[Chat]:
    chat = Chat(chat_server)
    yield chat
    chat.client.close()  # its connections, closed here rather than by a later collection


@pytest.fixture(scope="module")
def drafts_chat(chat_server: str) -> Iterator[Chat]:
    chat = Chat(chat_server, "chat_agent_drafts")
    yield chat
    chat.client.close()


def test_the_chat_never_shows_a_judge_reply(chat: Chat, chat_model_server: Any) -> None:
    judged = [b for b in chat_model_server.requests if b.get("response_format")]
    assert len(judged) == 2, "the loop judged both answers"
    assert chat.streamed(), "the chat got messages"
    for message, metadata in chat.streamed():
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        assert '"verdict"' not in text and '"score"' not in text, message  # the judge's JSON
        assert "nostream" not in (metadata.get("tags") or [])
    assert "Answer 2." in chat.rendered().values()


def test_the_rounds_reach_the_custom_stream(chat: Chat) -> None:
    rounds = [e for e in chat.custom() if e.get("type") == "round"]
    assert [(r["iteration"], r["score"], r["response"]) for r in rounds] == [
        (0, 0.4, "Answer 1."),
        (1, 0.95, "Answer 2."),
    ]
    assert rounds[0]["feedback"] == FEEDBACK
    assert [e["stop_reason"] for e in chat.custom() if e.get("type") == "stop"] == ["passed"]


def test_the_final_state_is_the_clean_transcript(chat: Chat) -> None:
    def transcript(values: dict[str, Any]) -> list[tuple[str, str]]:
        return [(m["type"], m["content"]) for m in values["messages"]]

    clean = [("human", TASK), ("ai", "Answer 2.")]
    assert transcript(chat.values()[-1]) == clean
    state = chat.client.threads.get_state(chat.thread_id)
    values: Any = state["values"]
    assert state["next"] == []
    assert transcript(values) == clean
    assert values["refine_stop_reason"] == "passed"


def test_the_chat_never_shows_the_loops_prompt(chat: Chat) -> None:
    assert not [t for t in chat.rendered().values() if LOOP_PROMPT in t]


def test_the_chat_shows_only_the_answer_the_loop_returns(chat: Chat) -> None:
    assert list(chat.rendered().values()) == ["Answer 2."]


def test_the_conversation_is_clean_at_every_step(chat: Chat) -> None:
    for values in chat.values():
        for message in values["messages"]:
            assert LOOP_PROMPT not in str(message["content"])
            assert message["content"] != "Answer 1."  # the rejected draft never joins it


def test_with_drafts_each_answer_streams_under_its_attempt(drafts_chat: Chat) -> None:
    shown = drafts_chat.rendered()
    assert list(shown.values()) == ["Answer 1.", "Answer 2."]
    attempts = {
        message["id"]: metadata.get("refine_attempt")
        for message, metadata in drafts_chat.streamed()
        if message["id"] in shown
    }
    assert list(attempts.values()) == [0, 1]
    assert not [t for t in shown.values() if LOOP_PROMPT in t or '"verdict"' in t]
    # The answer joins the conversation under the id its draft streamed with.
    last = drafts_chat.values()[-1]["messages"][-1]
    assert (last["id"], last["content"]) == (list(shown)[1], "Answer 2.")
    # The progress card ends under that message too.
    assert cards(drafts_chat)[-1]["metadata"]["message_id"] == last["id"]


EDITED = {"name": "review_answer", "args": {"response": "It is in Paris."}}


def reviewed(url: str, answer: Any) -> dict[str, Any]:
    """A reviewed chat run paused for its review, then resumed with `answer` in a new run."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url)
    try:
        thread = client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": TASK}]}
        client.runs.wait(thread, "chat_agent_reviewed", input=request)
        paused = client.threads.get_state(thread)
        assert paused["next"], "the run pauses for the review"
        (interrupt,) = paused["tasks"][0]["interrupts"]
        assert interrupt["value"]["action_requests"][0]["args"] == {"response": "Answer 2."}
        # A new run on the same thread: the server builds a fresh agent to resume it.
        client.runs.wait(thread, "chat_agent_reviewed", command={"resume": answer})
        values: dict[str, Any] = client.threads.get_state(thread)["values"]
        return values
    finally:
        client.close()


@pytest.mark.parametrize(
    ("answer", "final"),
    [
        ({"action": "approve"}, "Answer 2."),
        ({"action": "edit", "response": "It is in Paris."}, "It is in Paris."),
        ({"action": "reject"}, "Answer 2."),
        ({"decisions": [{"type": "approve"}]}, "Answer 2."),
        (
            {"decisions": [{"type": "edit", "edited_action": EDITED}]},
            "It is in Paris.",
        ),
        ({"decisions": [{"type": "reject"}]}, "Answer 2."),
        ({"decisions": [{"type": "reject", "message": "stop"}]}, "Answer 2."),
    ],
)
def test_a_review_resumes_on_the_server_whatever_the_answer(
    chat_server: str, answer: Any, final: str
) -> None:
    # The judge is the agent's own model, known to the fresh agent only through its run.
    values = reviewed(chat_server, answer)
    last = values["messages"][-1]
    assert (last["type"], last["content"]) == ("ai", final)


# -- the loop's progress, as a chat renders it -------------------------------------------------

ROUND_1 = "round 1: score 0.4, refining"
ROUND_2 = "round 2: score 0.95, passed"


def cards(chat: Chat) -> list[dict[str, Any]]:
    """The generative-UI messages the run pushed (agent-chat-ui keeps them in `values.ui`)."""
    return [e for e in chat.custom() if e.get("type") == "ui"]


def test_each_round_reaches_the_chat_as_one_card_updated_in_place(chat: Chat) -> None:
    pushed = cards(chat)
    assert [c["props"]["lines"] for c in pushed] == [
        [],  # the first answer is being judged
        [ROUND_1],
        [ROUND_1],
        [ROUND_1, ROUND_2],
        [ROUND_1, ROUND_2],  # the end: the card moves under the answer
    ]
    assert [c["props"]["judging"] for c in pushed] == [1, None, 2, None, None]
    assert pushed[2]["props"]["summary"] == "round 2: judging…"
    statuses = [c["props"]["status"] for c in pushed]
    assert statuses == ["running", "running", "running", "running", "done"]
    assert {(c["id"], c["name"]) for c in pushed} == {(pushed[0]["id"], CARD)}
    rounds = pushed[-1]["props"]["rounds"]
    assert [(r["round"], r["score"], r["next"]) for r in rounds] == [
        (1, 0.4, "refining"),
        (2, 0.95, "passed"),
    ]
    assert FEEDBACK not in json.dumps(pushed), "the judge's words stay out of the chat"


def test_while_the_loop_runs_the_card_sits_under_an_empty_ai_message(chat: Chat) -> None:
    # agent-chat-ui shows a UI message under the AI message its metadata names.
    host = cards(chat)[0]["metadata"]["message_id"]
    hosting = [v for v in chat.values() if host in [m["id"] for m in v["messages"]]]
    assert hosting, "a values update holds the card's message while the loop runs"
    for values in hosting:
        (message,) = [m for m in values["messages"] if m["id"] == host]
        assert (message["type"], message["content"], message["tool_calls"]) == ("ai", "", [])
    assert host not in [m["id"] for m in chat.values()[-1]["messages"]]


def test_the_threads_ui_holds_the_card_under_the_answer(chat: Chat) -> None:
    values: Any = chat.client.threads.get_state(chat.thread_id)["values"]
    (card,) = values["ui"]
    answer = values["messages"][-1]
    assert card["metadata"]["message_id"] == answer["id"]
    assert card["props"]["summary"] == "done after 2 rounds: best score 0.95 (round 2), passed"
    assert card == cards(chat)[-1]
    texts = [m["content"] for m in values["messages"] if m["type"] == "ai" and m["content"]]
    assert texts == ["Answer 2."], "the answer is the only AI text"


def test_the_server_serves_the_cards_component(chat_server: str, ui_missing: str | None) -> None:
    skip_without(ui_missing)
    import httpx

    url = chat_server
    for graph in json.loads((ROOT / CONFIG).read_text())["ui"]:
        # What `LoadExternalComponent` asks for: the script that renders the component,
        # by this server's address (`webapp.py`): a chat served elsewhere loads it from here.
        html = httpx.post(f"{url}/ui/{graph}", json={"name": CARD}, timeout=30)
        assert html.status_code == 200, html.text
        script = re.search(r'src="([^"]+\.js)"', html.text)
        assert script is not None, html.text
        assert script.group(1) == f"{url}/ui/{graph}/entrypoint.js"
        assert f"(&quot;{CARD}&quot;, " in html.text and ".render(name,id)" in html.text
        bundle = httpx.get(script.group(1), timeout=30).text
        assert "data-refine-progress" in bundle and CARD in bundle


def test_a_reviewed_run_shows_the_review_then_the_decision_on_its_card(
    chat_server: str,
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=chat_server)
    try:
        thread = client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": TASK}]}
        client.runs.wait(thread, "chat_agent_reviewed", input=request)
        (paused,) = client.threads.get_state(thread)["values"]["ui"]
        assert paused["props"]["lines"] == [ROUND_1, ROUND_2 + ", awaiting review"]
        client.runs.wait(thread, "chat_agent_reviewed", command={"resume": {"action": "approve"}})
        values: Any = client.threads.get_state(thread)["values"]
        (card,) = values["ui"]
        assert card["props"]["lines"] == [ROUND_1, "round 2: score 0.95, approved"]
        assert card["metadata"]["message_id"] == values["messages"][-1]["id"]
        assert [m["type"] for m in values["messages"]] == ["human", "ai"]
    finally:
        client.close()


HISTORY_LIMIT = 10
"""The states `useStream` (agent-chat-ui: `fetchStateHistory: true`) reads, newest first."""


def regenerate_from(client: Any, thread_id: str, message_id: str) -> Any:
    """The checkpoint a chat regenerates a message from (agent-chat-ui's Refresh).

    `useStream`'s `getMessagesMetadata(message).firstSeenState.parent_checkpoint`: the
    parent of the oldest state, among the last `HISTORY_LIMIT`, holding the message.
    """
    history = client.threads.get_history(thread_id, limit=HISTORY_LIMIT)
    holding = [s for s in history if message_id in [m["id"] for m in s["values"]["messages"]]]
    return holding[-1]["parent_checkpoint"]


def test_refresh_answers_again_with_a_new_loop(chat_server: str, chat_model_server: Any) -> None:
    # agent-chat-ui's Refresh submits no input from the parent of the state where the
    # answer first appeared: the loop runs again, its calls paid, a new answer in place.
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=chat_server)
    try:
        thread = client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": TASK}]}
        client.runs.wait(thread, "chat_agent", input=request)
        first: Any = client.threads.get_state(thread)["values"]
        answer = first["messages"][-1]
        paid = len(chat_model_server.requests)
        checkpoint = regenerate_from(client, thread, answer["id"])
        client.runs.wait(thread, "chat_agent", input=None, checkpoint=checkpoint)
        values: Any = client.threads.get_state(thread)["values"]
        assert len(chat_model_server.requests) - paid == 4, "two answers and two verdicts again"
        assert [(m["type"], m["content"]) for m in values["messages"]] == [
            ("human", TASK),
            ("ai", "Answer 2."),
        ]
        assert values["messages"][-1]["id"] != answer["id"], "a new answer, not the stored one"
        (card,) = values["ui"]
        assert card["metadata"]["message_id"] == values["messages"][-1]["id"]
        assert card["props"]["lines"] == [ROUND_1, ROUND_2]
        assert values["refine_stop_reason"] == "passed"
    finally:
        client.close()


def test_a_missing_bundler_skips_the_component_test_unless_required() -> None:
    skip_without(None, {REQUIRE_BUNDLER_ENV: "1"})  # present: runs
    with pytest.raises(pytest.skip.Exception, match="npx is gone"):
        skip_without("npx is gone", {})
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_BUNDLER_ENV}=1 but npx is gone"):
        skip_without("npx is gone", {REQUIRE_BUNDLER_ENV: "1"})


def test_a_review_answered_on_the_server_is_kept_as_a_label(chat_server: str) -> None:
    # The served agent runs async on the server's event loop: the answer is written with
    # the store's `aput` (a sync put there fails: "Synchronous calls to BatchedStore").
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=chat_server)
    try:
        thread = client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": TASK}]}
        client.runs.wait(thread, "chat_agent_reviewed", input=request)
        assert client.threads.get_state(thread)["next"], "the run pauses for the review"
        answer = {"decisions": [{"type": "reject", "message": "Say where it is."}]}
        client.runs.wait(thread, "chat_agent_reviewed", command={"resume": answer})
        found = client.store.search_items(["langgraph_refine", "reviews"], limit=100)["items"]
    finally:
        client.close()
    mine = [item["value"] for item in found if item["key"].startswith(f"{thread}|")]
    assert [(v["task"], v["response"], v["passed"], v["action"]) for v in mine] == [
        (TASK, "Answer 2.", False, "revise")
    ]


# -- the card's component in a browser, mounted as agent-chat-ui mounts it -------------------

MOUNT = """
(async ([graph, name]) => {
  // LoadExternalComponent (@langchain/langgraph-sdk/react-ui): a div with a shadow root,
  // the server's HTML put in it, its script's onload calling the bundle's render. React
  // is the chat's own: a stub here, as the component itself is not drawn.
  const rendered = [];
  window[Symbol.for("LGUI_EXT_STORE")] = {respond: (id) => rendered.push(id)};
  const stub = new Proxy(function () {}, {get: () => stub, apply: () => null});
  window[Symbol.for("LGUI_REQUIRE")] = () => stub;
  const answer = await fetch(`/ui/${graph}`, {
    method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({name}),
  });
  const html = await answer.text();
  const loaded = [];
  const mount = (id) => {
    const dom = document.createElement("div");
    dom.id = id;
    document.body.appendChild(dom);
    const fragment = document.createRange().createContextualFragment(
      html.replace("{{shadowRootId}}", id));
    const script = fragment.querySelector("script");
    loaded.push(new Promise((done) => script.addEventListener("load", done)));
    dom.attachShadow({mode: "open"}).appendChild(fragment);
    return dom;
  };
  mount("child-shadow-kept");
  // Unmounted before its script has loaded: a Refresh, or the card moving to the answer.
  mount("child-shadow-gone").remove();
  await Promise.all(loaded);
  await new Promise((done) => setTimeout(done, 200));
  return rendered;
})
"""


def test_a_card_unmounted_while_its_script_loads_throws_nothing(
    chat_server: str, ui_missing: str | None
) -> None:
    from tests import browser

    skip_without(ui_missing)
    if (why := browser.missing()) is not None:
        pytest.skip(why)
    with browser.chromium() as page:
        page.open(f"{chat_server}/info")
        rendered = page.evaluate(f"{MOUNT}({json.dumps(['chat_agent', CARD])})")
        assert page.errors == [], "the page threw (agent-chat-ui's console shows it)"
    assert rendered == ["child-shadow-kept"], "the mounted card renders, the gone one does not"


def test_without_chromium_the_browser_test_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import browser

    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    assert browser.missing() == (
        "no Chromium on PATH (looked for chromium, chromium-browser, google-chrome, chrome): "
        "install chromium"
    )


def test_with_drafts_each_draft_stays_in_the_chat_while_it_is_judged(drafts_chat: Chat) -> None:
    shown: str | None = None  # the draft on screen, from its first chunk to the next draft
    for part in drafts_chat.parts:
        if part.event == "messages" and part.data[0].get("content"):
            shown = part.data[0]["content"]
        elif part.event == "values" and shown is not None:
            texts = [m["content"] for m in part.data["messages"] if m["type"] == "ai"]
            assert shown in texts, f"{shown!r} vanished while judged: {texts}"


def resolved_thread(url: str, answer: dict[str, Any]) -> dict[str, Any]:
    """A reviewed chat run paused for review, then sent `answer` (a run's kwargs) as a chat does."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url)
    try:
        thread = client.threads.create()["thread_id"]
        request: Any = {"messages": [{"role": "user", "content": TASK}]}
        client.runs.wait(thread, "chat_agent_reviewed", input=request)
        assert client.threads.get_state(thread)["next"], "the run pauses for the review"
        client.runs.wait(thread, "chat_agent_reviewed", **answer)
        state: dict[str, Any] = client.threads.get_state(thread)
        return state
    finally:
        client.close()


def test_mark_as_resolved_ends_the_loop_with_the_best_answer(chat_server: str) -> None:
    # agent-chat-ui's "Mark as Resolved": `thread.submit({}, {command: {goto: END}})`.
    state = resolved_thread(chat_server, {"input": {}, "command": {"goto": "__end__"}})
    assert (state["next"], state["interrupts"]) == ([], [])
    values = state["values"]
    assert [(m["type"], m["content"]) for m in values["messages"]] == [
        ("human", TASK),
        ("ai", "Answer 2."),
    ]
    assert values["refine_stop_reason"] == "rejected"
    (card,) = values["ui"]
    assert card["props"]["title"] == "Best of 2 answers: rejected by the reviewer"
    assert card["metadata"]["message_id"] == values["messages"][-1]["id"]


def test_after_an_edit_the_card_describes_the_edit_the_chat_shows(chat_server: str) -> None:
    edit = {"decisions": [{"type": "edit", "edited_action": EDITED}]}
    values = resolved_thread(chat_server, {"command": {"resume": edit}})["values"]
    assert values["messages"][-1]["content"] == "It is in Paris."
    (card,) = values["ui"]
    props = card["props"]
    assert props["summary"] == (
        "done after 2 rounds: the reviewer's edit, score 0.95, edited by the reviewer"
    )
    assert (props["title"], props["score"]) == ("Edited by the reviewer", 0.95)
    assert props["lines"][-1] == "the reviewer's edit: score 0.95, edited by the reviewer"
