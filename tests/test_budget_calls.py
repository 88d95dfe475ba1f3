"""Every model call counted: `Budget(max_calls=N)` holds at the provider, for every kind of
generator and judge, with and without retries.

The provider is `tests/fault_server.py`, an OpenAI-compatible server on loopback that
counts the requests it receives. Generators and judges reach it through LangChain
(`ChatOpenAI`, a `provider:model` string, a chain, a `create_agent` agent, a callable
that calls a chat model) and around it (the `openai` SDK called directly, as a plain
callable, a runnable, or a judge model's hand-written structured output). Whatever the
path, the loop never sends more than N requests and `usage.calls` is the number sent.
Cases ported from pydantic-ai's `UsageLimits` suite (the request limit is checked before
each request; retried requests count) and instructor's retries (a failed attempt
spends a call).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_openai import ChatOpenAI

from langgraph_refine import Budget, RefineResult, arefine, refine
from langgraph_refine.evaluators import CallableEvaluator, JudgeReply, llm_judge
from tests.fault_server import FaultServer, error
from tests.test_faults import FAST

TASK = "Write a haiku about budgets."
LIMITS = (0, 1, 2, 3, 8)
LOOP = {"max_iterations": 3, "patience": None, "retry_policy": FAST}
"""Four rounds when nothing stops the loop earlier: 4 or 8 requests, depending on the judge."""


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with FaultServer().serve() as running:
        yield running


# -- the provider, reached around LangChain ---------------------------------------------


def sdk(server: FaultServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)


def asdk(server: FaultServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)


def as_message(completion: Any) -> AIMessage:
    """An SDK completion as the AIMessage LangChain would build (usage and model named)."""
    usage = completion.usage
    return AIMessage(
        completion.choices[0].message.content or "",
        usage_metadata={
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        },
        response_metadata={"model_name": completion.model, "model_provider": "openai"},
    )


def prompt_of(state: Any) -> list[dict[str, str]]:
    return [{"role": "user", "content": state["task"]}]


class SdkJudgeModel(BaseChatModel):
    """A judge model whose structured output calls the provider's SDK itself.

    Its `with_structured_output` never goes through LangChain's chat model run, so no
    callback sees its calls (as with some providers' hand-written wrappers).
    """

    base_url: str

    @property
    def _llm_type(self) -> str:
        return "sdk-judge"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("structured output only")

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[Any, Any]:
        client = openai.OpenAI(base_url=self.base_url, api_key="test-key", max_retries=0)

        def call(messages: list[BaseMessage]) -> dict[str, Any]:
            completion = client.chat.completions.create(
                model="judge-model",
                messages=[{"role": "user", "content": str(m.content)} for m in messages],
                response_format={"type": "json_object"},
            )
            raw = as_message(completion)
            return {"raw": raw, "parsed": JudgeReply.model_validate(json.loads(raw.text))}

        return RunnableLambda(call)


# -- every kind of generator -------------------------------------------------------------


def chat(server: FaultServer) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=server.base_url, api_key="test-key", model="fault-model", max_retries=0
    )


def gen_chat(server: FaultServer) -> Any:
    return chat(server)


def gen_string(server: FaultServer) -> Any:
    return "openai:fault-model"  # OPENAI_BASE_URL points at the server (see `run`)


def gen_chain(server: FaultServer) -> Any:
    return RunnableLambda(lambda data: data["messages"]) | chat(server)


def gen_agent(server: FaultServer) -> Any:
    return create_agent(chat(server), tools=[])


def gen_callable_chat(server: FaultServer) -> Any:
    model = chat(server)
    return lambda state: model.invoke(state["task"])


def gen_callable_sdk(server: FaultServer) -> Any:
    client = sdk(server)

    def generate(state: Any) -> str:  # a plain string: no usage, no model named
        completion = client.chat.completions.create(model="m", messages=prompt_of(state))
        return completion.choices[0].message.content or ""

    return generate


def gen_async_callable_sdk(server: FaultServer) -> Any:
    client = asdk(server)

    async def generate(state: Any) -> AIMessage:
        completion = await client.chat.completions.create(model="m", messages=prompt_of(state))
        return as_message(completion)

    return generate


def gen_runnable_sdk(server: FaultServer) -> Any:
    client = sdk(server)

    def generate(data: Any) -> AIMessage:
        text = str(data["messages"][-1].content)
        messages = [{"role": "user", "content": text}]
        return as_message(client.chat.completions.create(model="m", messages=messages))

    return RunnableLambda(generate)


GENERATORS: dict[str, Callable[[FaultServer], Any]] = {
    "chat_model": gen_chat,
    "string": gen_string,
    "chain": gen_chain,
    "agent": gen_agent,
    "callable_calling_chat_model": gen_callable_chat,
    "callable_calling_sdk": gen_callable_sdk,
    "async_callable_calling_sdk": gen_async_callable_sdk,
    "runnable_calling_sdk": gen_runnable_sdk,
}

# -- every kind of judge -----------------------------------------------------------------


def judge_none(server: FaultServer) -> Any:
    return lambda response, state: 0.1  # calls no model: costs nothing


def judge_llm(server: FaultServer) -> Any:
    return llm_judge(chat(server))


def judge_llm_sdk_client(server: FaultServer) -> Any:
    return llm_judge(SdkJudgeModel(base_url=server.base_url))


def judge_callable_sdk(server: FaultServer) -> Any:
    client = sdk(server)

    def grade(response: str, state: Any) -> float:
        client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": f"Grade: {response}"}],
            response_format={"type": "json_object"},
        )
        return 0.1

    return CallableEvaluator(grade, calls_model=True)


JUDGES: dict[str, tuple[Callable[[FaultServer], Any], int]] = {
    # name: (factory, model calls per evaluation)
    "no_model": (judge_none, 0),
    "llm_judge": (judge_llm, 1),
    "llm_judge_sdk_structured_output": (judge_llm_sdk_client, 1),
    "callable_judge_calling_sdk": (judge_callable_sdk, 1),
}


def requests_under(
    limit: int | None, judge_calls: int, fail_first: bool = False, rounds: int = 4
) -> int:
    """The requests a loop of `rounds` sends under `Budget(max_calls=limit)`.

    A generation (or its retry) starts only when the budget can also pay its judgment's
    `judge_calls`; a judgment's calls are refused only past the limit itself.
    """
    sent, failing = 0, fail_first
    for _ in range(rounds):
        while True:  # the generation, retried once when the provider fails it
            if limit is not None and sent + 1 + judge_calls > limit:
                return sent
            sent += 1
            if not failing:
                break
            failing = False
        for _ in range(judge_calls):
            if limit is not None and sent >= limit:
                return sent
            sent += 1
    return sent


def test_requests_under_a_limit_leave_room_for_the_judgment() -> None:
    assert [requests_under(n, 1) for n in (0, 1, 2, 3, 8)] == [0, 0, 2, 2, 8]
    assert [requests_under(n, 1, fail_first=True) for n in (1, 2, 3, 8, None)] == [0, 1, 3, 7, 9]
    assert [requests_under(n, 0) for n in (0, 1, 3, None)] == [0, 1, 3, 4]


def prepare(
    server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    generator: str,
    judge: str,
    fail_first: bool,
) -> tuple[Any, Any]:
    """The generator and judge of one loop; the provider fails the first request if asked."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    if fail_first:
        server.script(error(503))
    return GENERATORS[generator](server), JUDGES[judge][0](server)


def run(
    server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    generator: str,
    judge: str,
    budget: Budget | None,
    *,
    fail_first: bool,
) -> tuple[RefineResult, int]:
    """One loop; its result and the requests the provider received."""
    before = len(server.received)
    gen, ev = prepare(server, monkeypatch, generator, judge, fail_first)
    try:
        result = refine(gen, TASK, ev, **LOOP, budget=budget)
    finally:
        server.unscript()  # a failure the loop never asked for is not left for the next run
    return result, len(server.received) - before


async def arun(
    server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    generator: str,
    judge: str,
    budget: Budget | None,
    fail_first: bool,
) -> tuple[RefineResult, int]:
    """`run`, with `arefine`."""
    before = len(server.received)
    gen, ev = prepare(server, monkeypatch, generator, judge, fail_first)
    try:
        result = await arefine(gen, TASK, ev, **LOOP, budget=budget)
    finally:
        server.unscript()  # a failure the loop never asked for is not left for the next run
    return result, len(server.received) - before


SYNC_GENERATORS = [g for g in GENERATORS if not g.startswith("async")]
PAIRS = sorted(
    {(g, j) for g in SYNC_GENERATORS for j in ("no_model", "llm_judge_sdk_structured_output")}
    | {(g, j) for g in ("chat_model", "callable_calling_sdk") for j in JUDGES}
)
"""Every generator with a judge that calls no model and one that bypasses callbacks, and
every judge with a generator LangChain sees and one it does not."""


@pytest.mark.parametrize("fail_first", [False, True], ids=["no_retry", "retried"])
@pytest.mark.parametrize(("generator", "judge"), PAIRS)
def test_max_calls_holds_at_the_provider(
    server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    generator: str,
    judge: str,
    fail_first: bool,
) -> None:
    unbounded, size = run(server, monkeypatch, generator, judge, None, fail_first=fail_first)
    per_round = 1 + JUDGES[judge][1]
    assert size == 4 * per_round + fail_first  # the loop's own size, retried request included
    assert unbounded.usage.calls == size  # counted without a budget too
    for limit in LIMITS:
        result, sent = run(
            server, monkeypatch, generator, judge, Budget(max_calls=limit), fail_first=fail_first
        )
        expected_sent = requests_under(limit, JUDGES[judge][1], fail_first)
        assert sent == expected_sent, f"max_calls={limit}: {sent} requests"
        assert result.usage.calls == sent
        expected = "budget_exhausted" if expected_sent < size else "max_iterations"
        assert result.stop_reason == expected


# One event loop for the module: langchain-openai keeps one async HTTP client per server.
@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("judge", ["no_model", "llm_judge_sdk_structured_output"])
@pytest.mark.parametrize("generator", list(GENERATORS))
async def test_max_calls_holds_at_the_provider_async(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch, generator: str, judge: str
) -> None:
    for limit in (1, 2, 3):
        for fail_first in (False, True):
            result, sent = await arun(
                server, monkeypatch, generator, judge, Budget(max_calls=limit), fail_first
            )
            assert sent == requests_under(limit, JUDGES[judge][1], fail_first)
            assert result.usage.calls == sent


def test_a_failing_plain_callable_is_not_invoked_again_past_max_calls() -> None:
    invocations: list[str] = []

    def flaky(state: Any) -> str:
        invocations.append(state["task"])
        raise ConnectionError("connection reset")  # transient: the policy retries it

    result = refine(flaky, TASK, lambda r, s: 1.0, budget=Budget(max_calls=1), retry_policy=FAST)
    assert invocations == [TASK]  # the failed call spent the only call allowed
    assert result.usage.calls == 1
    assert result.stop_reason == "budget_exhausted"


def test_a_judge_bypassing_callbacks_counts_with_the_generator(server: FaultServer) -> None:
    # The report: generator 1 call + judge 1 call gave usage.calls == 1.
    result = refine(
        chat(server), TASK, llm_judge(SdkJudgeModel(base_url=server.base_url)), max_iterations=0
    )
    assert result.usage.calls == 2
    assert result.usage.total_tokens == 2 * 15  # the judge's reply tokens are counted too
    # And no second answer is paid for under max_calls=3: its judgment could not be.
    before = len(server.received)
    result = refine(
        chat(server),
        TASK,
        llm_judge(SdkJudgeModel(base_url=server.base_url)),
        budget=Budget(max_calls=3),
        patience=None,
    )
    assert len(server.received) - before == 2 == result.usage.calls
    assert [a.evaluation is not None for a in result.attempts] == [True]
    assert result.stop_reason == "budget_exhausted"


def test_a_judge_asked_twice_outside_callbacks_counts_two_calls(server: FaultServer) -> None:
    # An unreadable first reply is asked once more: two calls in one evaluation.
    replies = iter(['{"feedback": "x"}', '{"feedback": "ok", "verdict": "PASS", "score": 0.9}'])

    class Sloppy(SdkJudgeModel):
        def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:  # type: ignore[override]
            inner = super().with_structured_output(schema, **kwargs)

            def call(messages: Any) -> dict[str, Any]:
                out = inner.invoke(messages)
                text = next(replies)
                return {"raw": out["raw"].model_copy(update={"content": text}), "parsed": None}

            return RunnableLambda(call)

    result = refine(
        lambda state: "draft", TASK, llm_judge(Sloppy(base_url=server.base_url)), max_iterations=0
    )
    assert result.attempts[0].evaluation is not None
    assert result.attempts[0].evaluation.details["judge_calls"] == 2
    assert result.usage.calls == 3  # the generator (unseen, one) and both judge calls


def test_a_deterministic_evaluator_costs_no_call() -> None:
    result = refine(lambda state: "draft", TASK, lambda r, s: 0.1, max_iterations=2, patience=None)
    assert result.usage.calls == 3  # one per generation, none for the evaluations


# -- the agent middleware: the same meter, the same rule -----------------------------------


@pytest.mark.parametrize("judge", ["no_model", "llm_judge", "llm_judge_sdk_structured_output"])
def test_max_calls_holds_at_the_provider_with_the_agent_middleware(
    server: FaultServer, judge: str
) -> None:
    from langgraph_refine import RefineMiddleware

    per_round = 1 + JUDGES[judge][1]
    size = 4 * per_round  # max_iterations=3: four answers, each evaluated
    for limit in LIMITS:
        before = len(server.received)
        middleware = RefineMiddleware(
            JUDGES[judge][0](server),
            max_iterations=3,
            patience=None,
            budget=Budget(max_calls=limit),
        )
        agent = create_agent(chat(server), tools=[], middleware=[middleware])
        out = agent.invoke({"messages": [("user", TASK)]})
        sent = len(server.received) - before
        assert sent == min(size, requests_under(limit, JUDGES[judge][1])), f"max_calls={limit}"
        assert middleware.result(out).usage.calls == sent


@pytest.mark.parametrize("limit", [1, None])
def test_a_retry_middleware_retry_counts_the_failed_call(limit: int | None) -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    from langgraph_refine import RefineMiddleware
    from tests.fakes import AgentModel

    model = AgentModel(replies=[ConnectionError("reset"), "answer"])
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    middleware = RefineMiddleware(lambda r, s: 1.0, budget=Budget(max_calls=limit))
    out = create_agent(model, tools=[], middleware=[retry, middleware]).invoke(
        {"messages": [("user", TASK)]}
    )
    result = middleware.result(out)
    if limit == 1:  # the failed call spent the only call: the retry is refused
        assert len(model.calls) == 1 == result.usage.calls
        assert result.stop_reason == "budget_exhausted"
    else:
        assert len(model.calls) == 2 == result.usage.calls
        assert result.value == "answer"


async def test_concurrent_candidates_outside_callbacks_each_count() -> None:
    # Candidates are sampled concurrently; each invocation is told apart from the others.
    import asyncio

    async def generate(state: Any) -> str:
        await asyncio.sleep(0.01)  # the invocations overlap
        return "draft"

    result = await arefine(generate, TASK, lambda r, s: 0.1, candidates=3, max_iterations=1)
    assert result.usage.calls == 6  # two rounds of three candidates
    capped = await arefine(
        generate, TASK, lambda r, s: 0.1, candidates=3, budget=Budget(max_calls=4)
    )
    assert capped.usage.calls == 4  # three, then the one call left
