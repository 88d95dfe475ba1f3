"""A ladder of models on the command line: `--model` repeated, and who wrote what.

`--model cheap --model strong` (cheapest first) makes the loop's generator a ladder (see
`create_refine_graph`); a batch line's `model` may be a name or a list of them. The
summary, the rows and the report then say which model wrote each attempt, and the calls
and cost per model: the sum of the `usage` of the attempts each model wrote (an attempt's
usage counts its generation and its judging, so a model's calls include the judge calls
of its rounds).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph_refine._display import cost_text
from langgraph_refine.cli._errors import CliError


def parse_models(values: Sequence[str] | None, *, option: str = "--model") -> tuple[str, ...]:
    """The model names `--model` gave, cheapest first (none: empty).

    Raises:
        CliError: For an empty name or a name given twice.

    Example:
        >>> parse_models(["cheap", " strong "])
        ('cheap', 'strong')
    """
    names: list[str] = []
    for value in values or []:
        name = value.strip() if isinstance(value, str) else ""
        if not name:
            raise CliError(
                f"{option} {value!r} is empty: give a model name, e.g. {option} openai:gpt-4o-mini "
                f"(repeat {option} for a ladder of models, cheapest first)",
                exit_code=2,
            )
        if name in names:
            raise CliError(
                f"{option} {name!r} is given twice: each rung of a ladder of models is a "
                "different model, cheapest first",
                exit_code=2,
            )
        names.append(name)
    return tuple(names)


def line_models(value: object) -> tuple[str, ...]:
    """A batch line's `model`: a model name, or a list of them (a ladder, cheapest first).

    Raises:
        CliError: For another type, an empty list, or an empty or repeated name.
    """
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise CliError(
            "'model' must be a model name or a non-empty list of them (a ladder of models, "
            f"cheapest first), got {value!r:.80}"
        )
    return parse_models(value, option="'model'")


def per_model(attempts: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Attempts, calls and cost by the model that wrote them, in order of first use.

    Args:
        attempts: `Attempt`s, or attempts as JSON objects (a batch row's).

    Returns:
        `{model: {"attempts": n, "calls": n, "cost": usd or None}}`; the cost is None
        once one of the model's attempts has an unknown cost. Attempts with no model (a
        reviewer's edit) are left out.

    Example:
        >>> per_model([{"model": "a", "usage": {"calls": 2, "cost": 0.01}},
        ...            {"model": "b", "usage": {"calls": 2, "cost": None}}])["b"]
        {'attempts': 1, 'calls': 2, 'cost': None}
    """
    models: dict[str, dict[str, Any]] = {}
    for attempt in attempts:
        model = _get(attempt, "model")
        if not isinstance(model, str) or not model:
            continue
        usage = _get(attempt, "usage")
        calls, cost = _get(usage, "calls"), _get(usage, "cost") if usage is not None else 0.0
        add_usage(models, model, 1, _int(calls), cost)
    return models


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def add_usage(
    totals: dict[str, dict[str, Any]], model: str, attempts: int, calls: int, cost: Any
) -> None:
    """Add one model's attempts, calls and cost to `totals` (an unknown cost stays unknown)."""
    entry = totals.setdefault(model, {"attempts": 0, "calls": 0, "cost": 0.0})
    entry["attempts"] += attempts
    entry["calls"] += calls
    known = isinstance(cost, int | float) and not isinstance(cost, bool)
    entry["cost"] = entry["cost"] + cost if known and entry["cost"] is not None else None


def merge(totals: dict[str, dict[str, Any]], more: Mapping[str, Mapping[str, Any]]) -> None:
    """Add another run's `per_model` figures to `totals`."""
    for model, entry in more.items():
        add_usage(totals, model, entry["attempts"], entry["calls"], entry["cost"])


def models_text(models: Mapping[str, Mapping[str, Any]]) -> str:
    """Calls and cost per model in one line.

    Example:
        >>> models_text({"a": {"attempts": 2, "calls": 4, "cost": 0.004},
        ...              "b": {"attempts": 1, "calls": 2, "cost": None}})
        'a 2 attempts, 4 calls, $0.004; b 1 attempt, 2 calls, cost unknown'
    """
    parts = []
    for model, entry in models.items():
        n, calls = entry["attempts"], entry["calls"]
        parts.append(
            f"{model} {n} attempt{'' if n == 1 else 's'}, {calls} call{'' if calls == 1 else 's'}"
            f", {cost_text(entry['cost'])}"
        )
    return "; ".join(parts)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class LineGenerators:
    """The generator of each batch line: its own `model`, else the batch's.

    Args:
        settings: How the batch builds models (`cli._models.ModelSettings`, which builds
            each model once for the batch, whichever lines name it).
        default: The batch's generator (`--model`), a chat model or a ladder of them.
    """

    def __init__(self, settings: Any, default: Any) -> None:
        self.settings = settings
        self.default = default

    def __call__(self, models: tuple[str, ...] | None) -> Any:
        """The generator for a line whose `model` is `models` (None: the batch's)."""
        if not models:
            return self.default
        rungs = [self.settings.chat_model(name, option="'model'") for name in models]
        return rungs[0] if len(rungs) == 1 else rungs


DEFAULT_COLOR = "#3949ab"
MODEL_COLORS = (DEFAULT_COLOR, "#e65100", "#2e7d32", "#6a1b9a", "#00838f", "#ad1457")
"""The report's attempt tree colors each model's attempts (in order of first use)."""


def model_colors(attempts: Iterable[Any]) -> dict[str, str]:
    """A color per model that wrote attempts, in order of first use."""
    models = list(per_model(attempts))
    return {model: MODEL_COLORS[i % len(MODEL_COLORS)] for i, model in enumerate(models)}


def model_legend(colors: Mapping[str, str]) -> str:
    """The HTML legend of the attempt tree's colors (nothing for a single model)."""
    if len(colors) < 2:
        return ""
    items = "".join(
        f'<span data-model="{html.escape(model, quote=True)}"><i class="swatch" '
        f'style="background:{color}"></i>{html.escape(model)}</span>'
        for model, color in colors.items()
    )
    return f'<p class="legend models">{items}</p>'


def models_table(models: Mapping[str, Mapping[str, Any]]) -> str:
    """An HTML table of attempts, calls and cost by model (nothing when no model is known)."""
    if not models:
        return ""
    rows = "".join(
        f'<tr data-model="{html.escape(model, quote=True)}"><td>{html.escape(model)}</td>'
        f'<td class="num">{entry["attempts"]}</td><td class="num">{entry["calls"]}</td>'
        f'<td class="num">{html.escape(cost_text(entry["cost"]))}</td></tr>'
        for model, entry in models.items()
    )
    return (
        '<table class="models"><caption>by model (the attempts each model wrote, with '
        "their judging)</caption><thead><tr><th>model</th><th>attempts</th><th>calls</th>"
        f"<th>cost</th></tr></thead><tbody>{rows}</tbody></table>"
    )
