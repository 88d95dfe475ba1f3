"""One adapter per kind of generator: a chat model, a graph or other runnable, a callable.

The kind is decided once, when the loop is built (`adapt`); the generate step then asks
its adapter and never tests the kind again. An adapter owns everything that differs by
kind: the prompt's form and whether it can be shortened, structured output and how the
typed object is read, the reasoning split, the name the strategy record and
`Attempt.model` use, and the sync and async call. Whatever the kind, a call ends as one
`Reply` (see `_typed`).

A ladder of models is a list of adapters (`adapt_ladder`), cheapest first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable

from langgraph_refine._calls._clients import held
from langgraph_refine._decisions._options import LoopOptions
from langgraph_refine._errors import RefineError
from langgraph_refine._kinds import Kind, chat_model_of, kind_of, model_name
from langgraph_refine._reasoning import split_reasoning
from langgraph_refine._state import PromptForm
from langgraph_refine._typed import OutputSchema, Reply, structured_parts, untyped_reply
from langgraph_refine.evaluators._base import acall, call_sync

OneGenerator = BaseChatModel | Runnable[Any, Any] | Callable[..., Any]
"""One rung: a chat model, a runnable or compiled graph taking `{"messages": [...]}`, or
a callable `(state) -> str | AIMessage` (sync or async; with `output_schema` it may also
return the object or a dict)."""

GeneratorLike = OneGenerator | str | Sequence[OneGenerator | str]
"""What `create_refine_graph` takes: one generator (a `"provider:model"` string too), or
a ladder of them (a list, cheapest first)."""


class GeneratorAdapter:
    """What the generate step needs of a generator, whatever its kind.

    Attributes:
        generator: The generator as the user gave it.
        name: Its model as LangChain reports it (`provider:model`), else its class or
            function name: the strategy record's key and `Attempt.model` use it.
        takes_prompt: False for a callable, which builds its own prompt from the state.
        can_shorten: Whether a prompt past the model's context can be retried smaller.
    """

    kind: ClassVar[Kind]
    takes_prompt: ClassVar[bool] = True
    can_shorten: ClassVar[bool] = True

    def __init__(self, generator: Any) -> None:
        self.generator = generator
        self.name = model_name(generator)

    def prompt_form(self, options: LoopOptions) -> PromptForm:
        """The refinement prompt's form: one message unless the generator takes a chat."""
        return "single"

    def check_max_tokens(self, max_tokens: int) -> None:
        """Refuse a run's `max_tokens` this generator cannot take.

        Raises:
            ValueError: Always, unless the generator is a chat model (see `ChatAdapter`).
        """
        raise ValueError(
            f"max_tokens={max_tokens} in the run's context applies to a chat-model generator; "
            f"this graph's generator is a {type(self.generator).__name__}"
        )

    def invoke(self, prompt: list[BaseMessage], state: Mapping[str, Any], step: Any) -> Any:
        """Call the generator once (sync); the output is read by `read`."""
        raise NotImplementedError

    async def ainvoke(self, prompt: list[BaseMessage], state: Mapping[str, Any], step: Any) -> Any:
        """Call the generator once (async); the output is read by `read`."""
        raise NotImplementedError

    def read(self, output: Any, index: int, schema: OutputSchema | None) -> Reply:
        """One output as an attempt's fields.

        Raises:
            TypeError: If an untyped generator returned something that is not text.
        """
        if schema is not None:
            return schema.read(output)
        if not isinstance(output, str | BaseMessage):
            raise TypeError(
                f"generator returned {type(output).__name__} on attempt {index}; return a "
                "string or an AIMessage (or pass output_schema= to refine an object)"
            )
        return untyped_reply(output)


class ChatAdapter(GeneratorAdapter):
    """A chat model: sent the prompt's messages, asked for a typed object natively."""

    kind = "chat"

    def __init__(self, generator: Any) -> None:
        super().__init__(generator)
        # What is called: a copy the loop holds, its client's own retries off (`held`).
        self.model: Any = held(generator)

    def prompt_form(self, options: LoopOptions) -> PromptForm:
        return options.prompt_form

    def check_max_tokens(self, max_tokens: int) -> None:
        """A run may lower the model's own `max_tokens`, never raise it.

        Raises:
            ValueError: If `max_tokens` is above the model's cap.
        """
        cap = getattr(self.generator, "max_tokens", None)
        if isinstance(cap, int) and max_tokens > cap:
            raise ValueError(
                f"max_tokens={max_tokens} in the run's context is above this deployment's cap "
                f"of {cap} output tokens per call (the model's max_tokens, REFINE_MAX_TOKENS "
                f"on a served graph); ask for at most {cap}"
            )

    def _model(self, options: LoopOptions) -> tuple[Runnable[Any, Any], dict[str, Any]]:
        """The model and its call arguments.

        When typed, the model asks for the object through the provider's structured
        output, with the run's settings built in: a structured-output chain does not
        pass call arguments on to the model.
        """
        kwargs = {} if options.max_tokens is None else {"max_tokens": options.max_tokens}
        schema = options.output_schema
        if schema is None:
            return self.model, kwargs
        model = self.model.model_copy(update=kwargs) if kwargs else self.model
        structured = schema.structured(model, cache=not kwargs)
        return (structured, {}) if structured is not None else (model, {})

    def invoke(self, prompt: list[BaseMessage], state: Mapping[str, Any], step: Any) -> Any:
        model, kwargs = self._model(step.options)
        return model.invoke(prompt, step.config, **kwargs)

    async def ainvoke(self, prompt: list[BaseMessage], state: Mapping[str, Any], step: Any) -> Any:
        model, kwargs = self._model(step.options)
        return await model.ainvoke(prompt, step.config, **kwargs)

    def read(self, output: Any, index: int, schema: OutputSchema | None) -> Reply:
        parts = structured_parts(output)
        if parts is None:
            return super().read(output, index, schema)
        if schema is None:  # only a typed call answers in parts
            return super().read(output, index, schema)
        raw, parsed = parts
        text, reasoning = split_reasoning(raw) if raw is not None else ("", None)
        return schema.read(text if parsed is None else parsed, reasoning)


class RunnableAdapter(GeneratorAdapter):
    """A graph or other runnable, such as a `create_agent` agent.

    It is sent `{"messages": [...]}` and answers with its last AI message (or its
    `structured_response`, when typed).
    """

    kind = "runnable"

    def invoke(self, prompt: list[BaseMessage], state: Mapping[str, Any], step: Any) -> Any:
        output = self.generator.invoke({"messages": prompt}, step.config)
        return _graph_answer(output, step.index, step.options.output_schema)

    async def ainvoke(self, prompt: list[BaseMessage], state: Mapping[str, Any], step: Any) -> Any:
        output = await self.generator.ainvoke({"messages": prompt}, step.config)
        return _graph_answer(output, step.index, step.options.output_schema)


class CallableAdapter(GeneratorAdapter):
    """A plain callable `(state) -> str | AIMessage` (sync or async): its own prompt."""

    kind = "callable"
    takes_prompt = False
    can_shorten = False

    def invoke(self, prompt: list[BaseMessage], state: Mapping[str, Any], step: Any) -> Any:
        return call_sync(self.generator, state, what="generator")

    async def ainvoke(self, prompt: list[BaseMessage], state: Mapping[str, Any], step: Any) -> Any:
        return await acall(self.generator, state)


_ADAPTERS: dict[Kind, type[GeneratorAdapter]] = {
    "chat": ChatAdapter,
    "runnable": RunnableAdapter,
    "callable": CallableAdapter,
}


def adapt(generator: Any) -> GeneratorAdapter:
    """The adapter for one generator (an adapter is returned as it is).

    Raises:
        ValueError: If `generator` is no chat model, runnable or callable.
    """
    if isinstance(generator, GeneratorAdapter):
        return generator
    kind = kind_of(generator)
    if kind is None:
        raise ValueError(
            "generator must be a chat model, a 'provider:model' string, a runnable or "
            f"compiled graph, or a callable (state) -> str; got {type(generator).__name__}"
        )
    return _ADAPTERS[kind](generator)


def adapt_ladder(generator: Any, option: str = "generator") -> list[GeneratorAdapter]:
    """The adapters of a generator or of a ladder of them (a list, cheapest first).

    Args:
        generator: One generator, or a list of them.
        option: The option that named it, for error messages.

    Raises:
        ValueError: If the list is empty or holds something that is not a generator
            (the message names its position).
    """
    if not isinstance(generator, list | tuple):
        return [adapt(generator)]
    if not generator:
        raise ValueError(
            "generator=[] is an empty ladder: pass one generator, or a list of them cheapest first"
        )
    rungs = []
    for position, rung in enumerate(generator):
        try:
            rungs.append(adapt(rung))
        except ValueError as exc:
            raise ValueError(f"{option}[{position}] of the ladder: {exc}") from None
    _check_distinct(rungs, option)
    return rungs


def _check_distinct(rungs: list[GeneratorAdapter], option: str) -> None:
    """Keep the rungs' names apart: `Attempt.model` and the record tell rungs by them.

    The same chat model twice (perhaps spelled two ways, `smollm2` and `openai:smollm2`)
    is refused. Two generators of another kind that share a name (two graphs, two
    lambdas) are told apart by their place: the later one is named `name@rung<i>`.

    Raises:
        ValueError: Naming both positions and the model they share.
    """
    first: dict[str, int] = {}
    for position, rung in enumerate(rungs):
        earlier = first.setdefault(rung.name, position)
        if earlier == position:
            continue
        if chat_model_of(rung.generator) is None:
            rung.name = f"{rung.name}@rung{position}"
            first[rung.name] = position
            continue
        raise ValueError(
            f"{option}[{earlier}] and {option}[{position}] of the ladder are both the model "
            f"{rung.name!r} (named more than once, perhaps spelled two ways); each rung of a "
            "ladder is a different model, cheapest first: drop one of them"
        )


def _graph_answer(output: Any, index: int, schema: OutputSchema | None = None) -> Any:
    """The answer in a graph generator's output state: its last AI message.

    With `output_schema`, the state's `structured_response` (what
    `create_agent(response_format=...)` gives) when it has one.

    Raises:
        RefineError: If the output has no AI message, or ends on a tool call.
    """
    structured = output.get("structured_response") if isinstance(output, Mapping) else None
    if schema is not None and structured is not None:
        return structured
    messages = output.get("messages") if isinstance(output, Mapping) else None
    if isinstance(output, AIMessage):
        messages = [output]
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage):
        raise RefineError(
            f"graph generator gave no final AI message on attempt {index} (its last message "
            f"is {type(last).__name__ if last is not None else 'missing'}); the generator "
            "must end with an AIMessage holding the answer"
        )
    if last.tool_calls:
        raise RefineError(
            f"graph generator ended on a tool call on attempt {index} "
            f"({[c['name'] for c in last.tool_calls]}); give the agent a final answer step"
        )
    return last
