"""Every example, run against recorded traffic of the real local model (cassettes/test_examples).

`make test` replays the cassettes offline; `make record` re-records them against a fresh
local llama.cpp server. Each test checks what the loop did with the real replies: the
stop rule that fired, the best-result choice, the evaluation (re-run offline where the
evaluator is deterministic), and that the refinement prompts carried the feedback. In
replay mode each test must also use up its cassette: a run that makes fewer requests
than were recorded fails, and one that makes a request the cassette lacks fails too.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from vcr.errors import CannotOverwriteExistingCassetteException

from langgraph_refine import Attempt, RefineResult, best_attempt
from langgraph_refine.evaluators import contains_all, json_schema, python_tests, word_count
from tests import recording

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def model(record_mode: str) -> BaseChatModel:
    return recording.recorded_model(record_mode)


@pytest.fixture
def cassette(vcr: Any, record_mode: str) -> Iterator[Any]:
    """The test's cassette; in replay mode, checks afterwards that all of it was played."""
    yield vcr
    if record_mode == "none":
        assert vcr.all_played, (
            f"only {vcr.play_count} of {len(vcr)} recorded requests were sent; "
            "the code changed: re-record with `make record`"
        )


def prompts(cassette: Any) -> list[str]:
    """The last user message of every request sent, in order."""
    return [recording.last_user_message(body) for body in recording.sent_bodies(cassette)]


def check_loop(result: RefineResult, *, max_iterations: int, target_score: float) -> None:
    """The stop rule and the best-result choice agree with the recorded evaluations."""
    attempts = result.attempts
    assert 1 <= len(attempts) <= 1 + max_iterations
    assert [a.index for a in attempts] == list(range(len(attempts)))
    assert all(a.evaluation is not None for a in attempts)
    assert result.score_history == [a.score for a in attempts]
    assert result.iterations == len(attempts) - 1
    last = attempts[-1].evaluation
    assert last is not None
    # Only the last evaluation may satisfy a stop rule; earlier ones let the loop go on.
    for attempt in attempts[:-1]:
        assert attempt.evaluation is not None
        assert attempt.evaluation.verdict != "PASS"
        assert attempt.evaluation.score < target_score
    expected_reason = (
        "passed"
        if last.verdict == "PASS"
        else "target_reached"
        if last.score >= target_score
        else "max_iterations"
    )
    assert result.stop_reason == expected_reason
    if expected_reason == "max_iterations":
        assert len(attempts) == 1 + max_iterations
    best = best_attempt(attempts)
    assert best is not None
    assert (result.value, result.score) == (best.response, best.score)


def generator_prompts(sent: list[str]) -> list[str]:
    """The prompts sent to the generator (the judge's carry the response_to_rate tags)."""
    return [p for p in sent if "<response_to_rate>" not in p]


def check_refinement_prompts(result: RefineResult, sent: list[str]) -> None:
    """Each refinement prompt shows the attempt it refined and its feedback; a fresh
    sample (the explore strategy may draw one) is the task alone."""
    prompts = generator_prompts(sent)
    by_index = {a.index: a for a in result.attempts}
    for attempt in result.attempts[1:]:
        assert attempt.response  # the round produced a new attempt
        if attempt.parent is None:
            assert any("<answer>" not in p for p in prompts[1:])
            continue
        refined = by_index[attempt.parent]
        assert refined.evaluation is not None
        prompt = next(p for p in prompts if refined.response.strip()[:2000] in p)
        assert refined.evaluation.feedback.strip() in prompt


@pytest.mark.vcr
def test_turing_paragraph(model: BaseChatModel, cassette: Any) -> None:
    from examples import turing_paragraph

    result = turing_paragraph.main(model)

    check_loop(result, max_iterations=2, target_score=1.0)
    sent = prompts(cassette)
    assert len(sent) == len(result.attempts)  # word_count makes no model call
    assert sent[0] == turing_paragraph.TASK
    check_refinement_prompts(result, sent)
    recheck = word_count(80, 200)
    for attempt in result.attempts:
        assert attempt.evaluation == recheck.evaluate(attempt.response, {})


@pytest.mark.vcr(record_mode="none")
@pytest.mark.default_cassette("test_turing_paragraph.yaml")
def test_a_request_the_cassette_lacks_fails(
    model: BaseChatModel, monkeypatch: pytest.MonkeyPatch, vcr: Any
) -> None:
    """Replaying with a changed prompt fails loudly instead of passing on stale traffic."""
    from examples import turing_paragraph

    monkeypatch.setattr(turing_paragraph, "TASK", turing_paragraph.TASK + " Cite a source.")
    with pytest.raises(Exception) as info:
        turing_paragraph.main(model)
    chain: list[BaseException] = []
    error: BaseException | None = info.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, CannotOverwriteExistingCassetteException) for e in chain), chain
    assert vcr.play_count == 0


@pytest.mark.vcr(record_mode="none", before_record_request=recording.model_calls_only)
@pytest.mark.default_cassette("test_turing_paragraph.yaml")
def test_the_proxy_replays_for_another_process_and_refuses_what_the_cassette_lacks(
    vcr: Any,
) -> None:
    """The proxy that brings a server's model calls to the cassette: a recorded request
    from another process is answered from it; one it lacks gets a 400 (not retried) and
    is listed."""
    import subprocess
    import sys

    recorded = recording.sent_bodies(vcr)[0]
    changed = {**recorded, "messages": [{"role": "user", "content": "not recorded"}]}
    client = (
        "import json, sys, httpx\n"
        "for body in json.loads(sys.argv[2]):\n"
        "    reply = httpx.post(sys.argv[1], json=body, timeout=30)\n"
        "    print(json.dumps([reply.status_code, reply.text]))\n"
    )
    with recording.RecordingProxy(recording.STABLE_BASE_URL) as proxy:
        url = f"{proxy.url}/chat/completions"
        bodies = json.dumps([recorded, changed])
        done = subprocess.run(
            [sys.executable, "-c", client, url, bodies], capture_output=True, text=True
        )
    assert done.returncode == 0, done.stderr
    (ok_status, ok_text), (missing_status, _) = map(json.loads, done.stdout.splitlines())
    assert ok_status == 200
    reply = json.loads(ok_text)["choices"][0]["message"]["content"]
    assert reply == recording.reply_texts(vcr)[0]
    assert missing_status == 400
    assert proxy.forwarded == 1 and len(proxy.errors) == 1
    assert "CannotOverwriteExistingCassetteException" in proxy.errors[0]


@pytest.mark.vcr
def test_min_stack(model: BaseChatModel, cassette: Any) -> None:
    from examples import min_stack

    result = min_stack.main(model)

    check_loop(result, max_iterations=2, target_score=1.0)
    sent = prompts(cassette)
    assert sent[0] == min_stack.TASK
    check_refinement_prompts(result, sent)
    # The tests are re-run here on the best answer: the recorded score is real.
    recheck = python_tests(min_stack.TESTS, timeout=5.0).evaluate(result.value, {})
    assert recheck.score == result.score
    assert all(round(s * 4) == s * 4 for s in result.score_history)  # four tests


@pytest.mark.vcr
def test_fibonacci(model: BaseChatModel, cassette: Any) -> None:
    from examples import fibonacci

    result = fibonacci.main(model)

    check_loop(result, max_iterations=2, target_score=0.95)
    sent = prompts(cassette)
    assert sent[0] == fibonacci.TASK
    # Per round: one generation, then one or two judge calls (a reply it cannot read is
    # asked again once).
    judge_calls = [
        a.evaluation.details["parts"][1]["details"].get("judge_calls", 1)
        for a in result.attempts
        if a.evaluation is not None
    ]
    assert len(sent) == len(result.attempts) + sum(judge_calls)
    check_refinement_prompts(result, sent)
    for attempt in result.attempts:
        assert attempt.evaluation is not None
        parts = {p["name"]: p for p in attempt.evaluation.details["parts"]}
        tests = python_tests(fibonacci.TESTS, timeout=3.0).evaluate(attempt.response, {})
        assert parts["python_tests"]["score"] == tests.score
        assert 0.0 <= parts["llm_judge"]["score"] <= 1.0
        expected = 0.7 * tests.score + 0.3 * parts["llm_judge"]["score"]
        assert attempt.evaluation.score == pytest.approx(expected)
        if attempt.evaluation.verdict == "PASS":
            assert tests.score == 1.0  # the judge alone can never pass slow code


@pytest.mark.vcr
def test_java_javadoc(model: BaseChatModel, cassette: Any) -> None:
    from examples import java_javadoc

    result = java_javadoc.main(model)

    check_loop(result, max_iterations=2, target_score=0.9)
    sent = prompts(cassette)
    assert sent[0] == java_javadoc.TASK
    judge_prompts = [p for p in sent if "<response_to_rate>" in p]
    assert judge_prompts and all(java_javadoc.CRITERIA in p for p in judge_prompts)
    for attempt in result.attempts:
        assert attempt.evaluation is not None
        parts = {p["name"]: p for p in attempt.evaluation.details["parts"]}
        judge = parts["llm_judge"]
        assert judge["verdict"] in ("PASS", "NEEDS_IMPROVEMENT", "FAIL")
        has_javadoc = bool(re.search(java_javadoc.JAVADOC, attempt.response))
        assert parts["matches_regex"]["score"] == (1.0 if has_javadoc else 0.0)
        if attempt.evaluation.verdict == "PASS":
            assert has_javadoc and judge["verdict"] == "PASS"


@pytest.mark.vcr
def test_reward_feedback(model: BaseChatModel, cassette: Any) -> None:
    from examples import reward_feedback

    result = reward_feedback.main(model)

    check_loop(result, max_iterations=2, target_score=1.0)
    sent = prompts(cassette)
    assert sent[0] == reward_feedback.TASK
    for attempt in result.attempts:
        assert attempt.evaluation is not None
        reward = reward_feedback.correction_reward(reward_feedback.TASK, attempt.response)
        assert attempt.evaluation.details["reward"] == reward
        assert attempt.evaluation.score == pytest.approx(min(1.0, max(0.0, (reward + 2) / 6)))
    # memory="all": every refinement prompt shows the whole history, with each reward.
    for k in range(1, len(result.attempts)):
        for earlier in result.attempts[:k]:
            assert earlier.response.strip() in sent[k]
            assert earlier.evaluation is not None
            assert earlier.evaluation.feedback in sent[k]


@pytest.mark.vcr
def test_json_extraction(model: BaseChatModel, cassette: Any) -> None:
    from examples import json_extraction

    result = json_extraction.main(model)

    check_loop(result, max_iterations=2, target_score=1.0)
    sent = prompts(cassette)
    assert sent[0] == json_extraction.TASK
    check_refinement_prompts(result, sent)
    schema = json_schema(json_extraction.Contact)
    for attempt in result.attempts:
        assert attempt.evaluation is not None
        valid = schema.evaluate(attempt.response, {}).score
        facts = json_extraction.facts(attempt.response, {}).score
        assert attempt.evaluation.details["scores"] == {"json_schema": valid, "facts": facts}


@pytest.mark.vcr
def test_custom_topology(model: BaseChatModel, cassette: Any) -> None:
    from examples import custom_topology

    state = custom_topology.main(model)

    attempts = state["attempts"]
    best = best_attempt(attempts)
    assert best is not None
    assert state["response"] == best.response
    assert state["published"] == f"# {state['title']}\n\n{best.response}"
    recheck = word_count(40, 90)
    assert [a.evaluation for a in attempts] == [recheck.evaluate(a.response, {}) for a in attempts]
    sent = prompts(cassette)
    assert len(sent) == len(attempts)
    assert sent[0] == "Describe a lighthouse in fog in 40 to 90 words."


@pytest.mark.vcr
def test_embedded_agent(model: BaseChatModel, cassette: Any) -> None:
    from examples import embedded_agent

    messages = embedded_agent.main(model)

    assert [m.type for m in messages] == ["human", "ai", "human", "ai", "ai"]
    assert messages[1].text == "Ask me to write or describe something."
    assert messages[4].text == "Anything else I should write?"
    sent = prompts(cassette)
    assert sent[0] == messages[2].text  # the task came from the last human message
    replies = recording.reply_texts(cassette)
    assert messages[3].text in replies  # the loop's best answer is a real reply, appended once


@pytest.mark.vcr
def test_human_review(model: BaseChatModel, cassette: Any) -> None:
    from examples import human_review

    result = human_review.main(model, reviewer=human_review.scripted_reviewer())

    assert result.stop_reason == "approved"
    sent = prompts(cassette)
    # The first review asked for a revision: the next prompt, and only that one, carries
    # the request as the reviewer's; later ones show it as the reason of that attempt.
    request = "# Reviewer request (most important)\nMake it calmer and mention the sea."
    assert [request in p for p in sent] == [False, True] + [False] * (len(sent) - 2)
    assert result.value in recording.reply_texts(cassette)
    best = best_attempt(result.attempts)
    assert best is not None and result.value == best.response  # approved as reviewed


@pytest.mark.vcr
def test_research_agent_middleware(model: BaseChatModel, cassette: Any) -> None:
    from examples import research_agent_middleware as example

    messages, result = example.main(model)

    check_loop(result, max_iterations=2, target_score=1.0)
    # The evaluator is deterministic: re-run offline, it gives the recorded evaluations.
    recheck = contains_all(example.REQUIRED)
    assert [a.evaluation for a in result.attempts] == [
        recheck.evaluate(a.response, {}) for a in result.attempts
    ]
    assert messages[0].text == example.TASK
    # The agent's last message is the best answer, a real reply of the model.
    assert messages[-1].type == "ai" and messages[-1].text == result.value
    assert result.value in recording.reply_texts(cassette)
    # Every refinement round sent the previous answer's feedback back to the model.
    sent = prompts(cassette)
    for attempt in result.attempts[:-1]:
        assert attempt.evaluation is not None
        assert any("Feedback:" in p and attempt.evaluation.feedback in p for p in sent), (
            attempt.evaluation.feedback
        )
    # Whatever tools the model called ran, and their results went back to it.
    for message in messages:
        if message.type == "tool":
            assert message.text.startswith(("The Eiffel", "Gustave", "No facts", "Error"))


EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_every_example_has_a_recorded_test(name: str) -> None:
    module = importlib.import_module(f"examples.{name}")
    assert callable(getattr(module, "main", None)), f"examples/{name}.py has no main()"
    assert f"test_{name}" in globals(), f"examples/{name}.py has no test in this module"
    path = recording.CASSETTES / "test_examples" / f"test_{name}.yaml"
    assert path.is_file(), f"no cassette for examples/{name}.py; run `make record`"


@pytest.mark.vcr
def test_research_agent_generator(model: BaseChatModel, cassette: Any) -> None:
    from examples import research_agent_generator as example

    result = example.main(model)

    assert result.attempts
    assert result.stop_reason in {"target_reached", "max_iterations", "budget_exhausted"}
    recheck = contains_all(example.REQUIRED)
    assert [a.evaluation for a in result.attempts if a.evaluation] == [
        recheck.evaluate(a.response, {}) for a in result.attempts if a.evaluation
    ]
    # Every attempt is a real reply of the model (the agent's last AI message), cleaned of
    # any line it copied from the loop's prompt.
    replies = recording.reply_texts(cassette)
    assert all(
        any(set(a.response.splitlines()) <= set(r.splitlines()) for r in replies)
        for a in result.attempts
    )
    # The budget counted every model call made inside the agent.
    assert result.usage.calls == len(replies) <= 12
    best = best_attempt(result.attempts)
    assert best is not None and result.value == best.response


@pytest.mark.vcr
def test_demo_loop(model: BaseChatModel, cassette: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`make demo`'s loop on the real model: each round is printed as it happens."""
    from tools import demo

    result = demo.run_demo(model, max_iterations=2)

    check_loop(result, max_iterations=2, target_score=1.0)
    sent = prompts(cassette)
    assert sent[0] == demo.TASK
    check_refinement_prompts(result, sent)
    out = capsys.readouterr().out.splitlines()
    printed = [line for line in out if line.strip().startswith("#") and "score" in line]
    printed = printed[: len(result.attempts)]  # the rounds, before the tree of attempts
    assert [line.split(" ")[2] for line in printed] == [f"#{a.index}" for a in result.attempts]
    for line, attempt in zip(printed, result.attempts, strict=True):
        origin = "fresh sample" if attempt.parent is None else f"refines #{attempt.parent}"
        assert f"({origin})" in line
    for line, score in zip(printed, result.score_history, strict=True):
        assert f"score {score:.2f}" in line


@pytest.mark.vcr(before_record_request=recording.model_calls_only)
@pytest.mark.slow
@pytest.mark.server
def test_batch_on_server(
    record_mode: str, cassette: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One batch file with per-line checks, run on a real `langgraph dev` and on this
    machine: the same rows, each scored by its own check. Model calls of both (other
    processes) come back through a proxy in this process, so the cassette records and
    replays them (tests/recording.py)."""
    from examples import batch_on_server as example

    from langgraph_refine._calls._specs import parse_specs
    from langgraph_refine.evaluators._combine import as_evaluator
    from langgraph_refine.evaluators._from_specs import build_evaluators

    with recording.RecordingProxy(recording.base_url(record_mode)) as proxy:
        calls_before_each_batch = []
        run_batch = example._batch

        def counted(*args: Any) -> str:
            calls_before_each_batch.append(proxy.forwarded)
            return run_batch(*args)

        monkeypatch.setattr(example, "_batch", counted)
        outcome = example.main(proxy.url, recording.LOCAL_MODEL, tmp_path / "batch")
        forwarded = proxy.forwarded

    assert not proxy.errors, proxy.errors
    lines = {line["id"]: line for line in example.TASKS}
    assert forwarded == len(cassette) > 0  # every model call went through the proxy
    # The rerun found every id in the output file and sent nothing to the model.
    assert f"skipped {len(lines)}" in outcome.rerun
    assert calls_before_each_batch[1] == calls_before_each_batch[2] > 0
    replies = recording.reply_texts(cassette)
    bodies = [json.dumps(body) for body in recording.sent_bodies(cassette)]
    # Only generations: the checks call no model (no judge prompt was sent).
    assert not any("response_to_rate" in body for body in bodies)
    local = {row["id"]: row for row in outcome.local_rows}
    assert sorted(row["id"] for row in outcome.server_rows) == sorted(local) == sorted(lines)
    for row in outcome.server_rows:
        line, twin = lines[row["id"]], local[row["id"]]
        assert "error" not in row and "error" not in twin, (row.get("error"), twin.get("error"))
        assert set(row) - {"thread_id"} == set(twin)  # the same fields both ways
        check = as_evaluator(build_evaluators(parse_specs(line["evaluator"]), lambda: None))
        for each in (row, twin):
            attempts = [Attempt.model_validate(a) for a in each["attempts"]]
            # Per-line options held on both sides (on the server: as the run's context).
            assert 1 <= len(attempts) <= 1 + line["max_iterations"]
            if line.get("strategy") == "sample":
                assert all(a.parent is None for a in attempts)
            if "budget" in line:
                assert len(attempts) <= line["budget"]["max_calls"]
            assert each["score_history"] == [a.score for a in attempts]
            best = best_attempt(attempts)
            assert best is not None and each["value"] == best.response
            assert all(a.response in replies for a in attempts)  # real replies of the model
            # Each score is the line's own check's score of that attempt.
            for attempt in attempts:
                expected = check.evaluate(attempt.response, {"task": line["task"]}).score
                assert attempt.score == pytest.approx(expected)


@pytest.mark.parametrize(("cores", "threads"), [(None, 1), (1, 1), (2, 1), (8, 4)])
def test_local_server_uses_half_the_cores(
    monkeypatch: pytest.MonkeyPatch, cores: int | None, threads: int
) -> None:
    from tools import local_model

    monkeypatch.setattr(local_model.os, "cpu_count", lambda: cores)
    assert local_model.default_threads() == threads
    assert local_model.LocalModelServer()._threads == threads


@pytest.mark.vcr
def test_structured_extraction(model: BaseChatModel, cassette: Any) -> None:
    from examples import structured_extraction as example

    from langgraph_refine.cli._batch import BatchItem, output_record
    from langgraph_refine.cli._options import CommandOptions
    from langgraph_refine.cli._report import TaskRecord, render_report

    result = example.main(model)

    check_loop(result, max_iterations=3, target_score=1.0)
    # The real model reached a valid object: the result is a Book.
    assert isinstance(result.output, example.Book)
    assert json.loads(result.value) == result.output.model_dump()
    bodies = recording.sent_bodies(cassette)
    assert len(bodies) == len(result.attempts)  # the field check makes no model call
    for body in bodies:  # asked through the provider's structured output, as a Book
        response_format = body["response_format"]
        assert response_format["type"] == "json_schema"
        assert response_format["json_schema"]["name"] == "Book"
    sent = prompts(cassette)
    assert sent[0].startswith(example.TASK)
    check_refinement_prompts(result, sent)
    for attempt in result.attempts:
        assert attempt.evaluation is not None
        if attempt.output is None:  # not a valid Book: FAIL with the errors, not checked
            assert attempt.evaluation.verdict == "FAIL"
            assert attempt.evaluation.details["output_errors"]
        else:
            book = example.Book.model_validate(attempt.output)
            assert attempt.evaluation == example.fields(book, {})
    # The batch row and the report show the object, as formatted JSON.
    item = BatchItem(line=1, id="book", task=example.TASK, options=CommandOptions())
    row = output_record(item, result)
    assert row["output"] == result.output.model_dump()
    page = render_report([TaskRecord.from_json(json.loads(json.dumps(row)))], source="rows")
    title = json.dumps(result.output.title)
    assert f'<pre class="object">{{\n  &quot;title&quot;: {html_escape(title)},' in page


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


@pytest.mark.vcr
def test_openevals_judge(model: BaseChatModel, cassette: Any) -> None:
    from examples import openevals_judge as example

    result = example.main(model)

    check_loop(result, max_iterations=2, target_score=1.0)
    sent = recording.sent_bodies(cassette)
    judged = [b for b in sent if (b.get("response_format") or {}).get("type") == "json_schema"]
    # One openevals judge call per attempt, asking for its own schema, shown the response.
    assert len(judged) == len(result.attempts) == len(sent) - len(judged)
    for body, attempt in zip(judged, result.attempts, strict=True):
        assert body["response_format"]["json_schema"]["name"] == "score"
        assert attempt.response.strip() in recording.last_user_message(body)
        evaluation = attempt.evaluation
        assert evaluation is not None
        judge_part, words_part = evaluation.details["parts"]
        assert judge_part["name"] == "openevals"
        assert judge_part["details"]["results"][0]["key"] == "conciseness"
        assert judge_part["score"] in (0.0, 1.0)  # its boolean score
        assert words_part["score"] == word_count(10, 45).evaluate(attempt.response, {}).score
    generator = [recording.last_user_message(b) for b in sent if "response_format" not in b]
    check_refinement_prompts(result, generator)


def session_members(session: int) -> list[int]:
    """The live processes of one session (Linux's /proc), zombies left out."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while we looked
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_a_stopped_server_takes_its_children_with_it() -> None:
    # `langgraph dev` starts the UI bundler's `node` watcher, which outlived the server and
    # kept running after the tests; here a child that ignores SIGTERM stands in for it.
    import subprocess
    import time

    from examples.batch_on_server import _stop

    stubborn = "trap '' TERM; sleep 300"
    server = subprocess.Popen(
        ["sh", "-c", f"(trap '' TERM; sh -c \"{stubborn}\") & exec sleep 300"],
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while len(session_members(server.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(session_members(server.pid)) >= 2  # the server and what it started
    _stop(server)
    # SIGKILL is delivered asynchronously: a killed child may show as running for a moment.
    deadline = time.monotonic() + 5
    while session_members(server.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session_members(server.pid) == []


def test_a_server_given_a_folder_of_its_own_finds_the_projects_files_from_it(
    tmp_path: Path,
) -> None:
    # `langgraph dev` keeps its state under its working directory and resolves the
    # config's paths from there: a server working in its own folder gets a config copy
    # whose paths still reach the project's files (the UI's through a link: its bundler
    # takes only files under the working directory).
    from examples.batch_on_server import PROJECT, _config_in

    copy = _config_in(tmp_path, PROJECT / "examples" / "chat_server" / "langgraph.json")
    settings = json.loads(copy.read_text())
    assert copy.parent == tmp_path
    assert settings["dependencies"] == [str(PROJECT)]
    specs = [*settings["graphs"].values(), settings["http"]["app"]]
    for spec in specs:
        path = Path(spec.partition(":")[0])
        assert path.is_absolute() and path.is_file(), spec
    for ui in settings["ui"].values():
        assert not Path(ui).is_absolute()
        assert (tmp_path / ui).resolve() == (PROJECT / ui).resolve()
    served = json.loads((PROJECT / "langgraph.json").read_text())["graphs"]["refine"]
    again = json.loads(_config_in(tmp_path, PROJECT / "langgraph.json").read_text())
    assert again["graphs"]["refine"]["description"] == served["description"]
    assert again["graphs"]["refine"]["path"] == f"{PROJECT}/src/langgraph_refine/server.py:refine"
