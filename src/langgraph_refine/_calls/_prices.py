"""What a model call costs: the `genai-prices` data, and the prices a user gives.

A call is priced from the model's name and provider as LangChain reports them
(`ls_model_name` / `ls_provider` in the call's metadata, or `model_name` /
`model_provider` in a reply's `response_metadata`) and from its token usage. Prices a user
gives (`Budget(prices=...)`, in US dollars per million tokens, keyed by the model's name
or by `provider:model` as `Attempt.model` spells it) win over the data; without them the
lookup uses `genai-prices`, which ships its price data (no network).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import genai_prices

from langgraph_refine._kinds import chat_model_of

PRICE_KEYS = ("input", "output", "cache_read")
"""The keys of one model's price: USD per million input, output and cached-input tokens."""

# LangChain's provider names where genai-prices names the provider differently.
_PROVIDER_IDS = {
    "google_genai": "google",
    "google_vertexai": "google",
    "google_anthropic_vertex": "anthropic",
    "bedrock": "aws",
    "bedrock_converse": "aws",
    "amazon_bedrock": "aws",
    "xai": "x-ai",
    "azure_openai": "azure",
}


@dataclass(frozen=True)
class ModelRef:
    """A model as LangChain names it: the model's name and, when known, its provider."""

    model: str
    provider: str | None = None

    def __str__(self) -> str:
        return f"{self.model!r}" + (f" (provider {self.provider!r})" if self.provider else "")


@dataclass(frozen=True)
class Price:
    """A user-given price in USD per million tokens; cached input defaults to `input`."""

    input: float
    output: float
    cache_read: float | None = None


def check_prices(value: Any) -> dict[str, Price] | None:
    """`Budget(prices=...)` as `Price`s by model name, checked.

    Raises:
        ValueError: If it is not a mapping of model names to `{"input": ..., "output": ...}`
            with numbers >= 0 (`"cache_read"` optional).
    """
    if value is None:
        return None
    example = '{"my-model": {"input": 0.15, "output": 0.6}}'
    if not isinstance(value, Mapping):
        raise ValueError(
            f"Budget.prices must map model names to prices, e.g. {example}; "
            f"got {type(value).__name__}"
        )
    prices: dict[str, Price] = {}
    for model, price in value.items():
        if isinstance(price, Price):
            prices[str(model)] = price
            continue
        if not isinstance(model, str) or not model.strip() or not isinstance(price, Mapping):
            raise ValueError(
                f"Budget.prices[{model!r}] must be a mapping like {example} "
                "(USD per million tokens)"
            )
        unknown = sorted(set(map(str, price)) - set(PRICE_KEYS))
        missing = [key for key in ("input", "output") if key not in price]
        if unknown or missing:
            raise ValueError(
                f"Budget.prices[{model!r}] needs 'input' and 'output' (optional 'cache_read'), "
                f"in USD per million tokens; got keys {sorted(map(str, price))}"
            )
        numbers = {key: _usd(model, key, price[key]) for key in price}
        prices[model] = Price(**numbers)
    return prices


def _usd(model: str, key: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or value < 0
    ):
        raise ValueError(
            f"Budget.prices[{model!r}][{key!r}] must be a number >= 0 (USD per million "
            f"tokens), got {value!r}"
        )
    return float(value)


def ref_from_metadata(metadata: Mapping[str, Any] | None, **kwargs: Any) -> ModelRef | None:
    """The model a callback's start event is about, from its LangSmith params.

    `metadata` holds `ls_model_name` / `ls_provider` (LangChain adds them for every chat
    model); `invocation_params` (in `kwargs`) is the fallback for the model's name.
    """
    metadata = metadata or {}
    params = kwargs.get("invocation_params") or {}
    model = metadata.get("ls_model_name") or params.get("model") or params.get("model_name")
    if not isinstance(model, str) or not model:
        return None
    provider = metadata.get("ls_provider")
    return ModelRef(model, provider if isinstance(provider, str) and provider else None)


def ref_of_model(generator: Any) -> ModelRef | None:
    """The model a generator's calls will name, known before any call; None if unknown.

    A chat model (or a runnable binding one) names its model and provider as its calls'
    metadata will (`ls_model_name`, `ls_provider`); any other generator is unknown until
    it calls.
    """
    model = chat_model_of(generator)
    if model is None:
        return None
    try:
        params = model._get_ls_params()
    except Exception:  # a model whose tracing parameters cannot be built
        return None
    name, provider = params.get("ls_model_name"), params.get("ls_provider")
    if not isinstance(name, str) or not name:
        return None
    return ModelRef(name, provider if isinstance(provider, str) and provider else None)


def ref_from_reply(message: Any) -> ModelRef | None:
    """The model a reply names in its `response_metadata` (`model_name`, `model_provider`)."""
    metadata = getattr(message, "response_metadata", None) or {}
    model = metadata.get("model_name") or metadata.get("model")
    if not isinstance(model, str) or not model:
        return None
    provider = metadata.get("model_provider")
    return ModelRef(model, provider if isinstance(provider, str) and provider else None)


class Pricing:
    """Prices model calls: the user's prices first, then the `genai-prices` data.

    Args:
        prices: User-given prices by model name, or None.
    """

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices = dict(prices or {})

    def given(self, ref: ModelRef) -> Price | None:
        """The user's price for `ref`, or None if the user gave none.

        Keyed `provider:model` (as `Attempt.model` names it) wins over the model's name.
        """
        if ref.provider is not None:
            found = self.prices.get(f"{ref.provider}:{ref.model}")
            if found is not None:
                return found
        return self.prices.get(ref.model)

    def knows(self, ref: ModelRef | None) -> bool:
        """True if calls to `ref` can be priced."""
        return ref is not None and (self.given(ref) is not None or _data_knows(ref))

    def cost(self, ref: ModelRef | None, usage: Mapping[str, Any]) -> float | None:
        """USD for one call with LangChain `usage_metadata`; None if the price is unknown."""
        if ref is None:
            return None
        input_tokens = int(usage.get("input_tokens", 0) or 0)
        output_tokens = int(usage.get("output_tokens", 0) or 0)
        details = usage.get("input_token_details") or {}
        cached = min(int(details.get("cache_read", 0) or 0), input_tokens)
        price = self.given(ref)
        if price is not None:
            cache_price = price.input if price.cache_read is None else price.cache_read
            fresh = input_tokens - cached
            usd = fresh * price.input + cached * cache_price + output_tokens * price.output
            return usd / 1_000_000
        if not _data_knows(ref):
            return None
        tokens = genai_prices.Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cached,
            cache_write_tokens=int(details.get("cache_creation", 0) or 0),
        )
        return float(
            genai_prices.calc_price(tokens, ref.model, provider_id=_provider_id(ref)).total_price
        )


def _provider_id(ref: ModelRef) -> str | None:
    if ref.provider is None:
        return None
    return _PROVIDER_IDS.get(ref.provider, ref.provider)


@functools.lru_cache(maxsize=256)
def _data_knows(ref: ModelRef) -> bool:
    """True if `genai-prices` has a price for the model (at its provider, when one is named).

    A provider genai-prices does not know (a local server, a test double) prices nothing:
    guessing another provider's price for the same model name could be far off.
    """
    try:
        genai_prices.calc_price(
            genai_prices.Usage(input_tokens=0, output_tokens=0),
            ref.model,
            provider_id=_provider_id(ref),
        )
    except LookupError:
        return False
    return True


def unknown_price_message(ref: ModelRef | None, what: str, *, started: bool = False) -> str:
    """The error for a call that cannot be priced while `max_cost` is set.

    Args:
        ref: The model, or None when the call names none.
        what: Who made the call (`"generator"`, `"evaluator"`, `"agent"`).
        started: True when a chat model's start was seen (no reply yet), False for a
            reply that names no priced model.
    """
    if ref is not None:
        named, model, fix = (
            f"no price is known for model {ref}, called by the {what}",
            ref.model,
            "",
        )
    elif started:
        named, model = f"the {what} called a chat model that reports no model name", "MODEL"
        fix = " (LangChain's ls_model_name: give the model a `model` or `model_name` field)"
    else:
        named, model = f"the {what} made a model call whose model is unknown", "MODEL"
        fix = (
            " (a plain callable or a client outside LangChain: return an AIMessage whose "
            "response_metadata names the model, with its usage_metadata)"
        )
    return (
        f"{named}, so max_cost cannot be kept{fix}. Give its price in USD per million "
        f'tokens: Budget(max_cost=..., prices={{"{model}": {{"input": 0.15, "output": 0.6}}}}) '
        f"(on the command line: --price {model}=0.15,0.6)"
    )
