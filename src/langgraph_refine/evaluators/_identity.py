"""What a judge is, for a calibration: its checks, model, criteria and prompt.

A calibration's threshold holds for the judge it was measured on only: another model,
other criteria or another prompt score the same responses differently. So a
calibration records its judge's identity (`judge_identity`) and every surface compares
it with the judge it is about to calibrate (`mismatches`), refusing another before any
call. Reviews kept as labels carry the identity of the judge that scored them too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langgraph_refine._kinds import model_name
from langgraph_refine.evaluators._base import BaseEvaluator

FIELDS = ("evaluator", "model", "criteria", "prompt")
"""The fields compared; `spec` (the command line's `-e` text) too when both sides have it."""


def judge_identity(
    judge: BaseEvaluator, *, criteria: Sequence[str] = (), spec: str | None = None
) -> dict[str, Any]:
    """What `judge` is, as a calibration records it.

    Args:
        judge: The judge (any evaluator; composite ones are described part by part).
        criteria: The criteria each request adds (a run's `criteria`), after the
            judge's own.
        spec: The command line's `-e` specs, as written (None in code).

    Returns:
        `evaluator` (the checks' names, nested), `model` (the models judging, comma
        separated; "" for checks that call none), `criteria` (every criterion the
        judge reads), `prompt` (a digest of its fixed prompt text; "" for none) and
        `spec`.

    Example:
        >>> from langgraph_refine.evaluators import word_count
        >>> judge_identity(word_count(1, 5))
        {'evaluator': 'word_count', 'model': '', 'criteria': [], 'prompt': '', 'spec': None}
    """
    models: list[str] = []
    own: list[str] = []
    prompts: list[str] = []
    for part in _walk(judge):
        model = getattr(part, "model", None)
        if part.calls_model and model is not None:
            models.append(model_name(model))
        own.extend(_criteria_of(part))
        if part.prompt_text:
            prompts.append(part.prompt_text)
    digest = hashlib.sha256("\x00".join(prompts).encode()).hexdigest()[:16] if prompts else ""
    return {
        "evaluator": _shape(judge),
        "model": ", ".join(dict.fromkeys(models)),
        "criteria": own + [c.strip() for c in criteria if c.strip()],
        "prompt": digest,
        "spec": spec,
    }


def mismatches(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """How the judge `current` differs from the one `recorded` (empty: the same judge).

    Example:
        >>> made = {"evaluator": "llm_judge", "model": "openai:a", "criteria": [], "prompt": "x"}
        >>> mismatches(made, {**made, "model": "openai:b"})
        ["model: calibrated with 'openai:a', this judge has 'openai:b'"]
    """
    fields = [*FIELDS]
    if recorded.get("spec") is not None and current.get("spec") is not None:
        fields.insert(0, "spec")
    return [
        f"{name}: calibrated with {_shown(recorded.get(name))}, this judge has "
        f"{_shown(current.get(name))}"
        for name in fields
        if _comparable(recorded.get(name)) != _comparable(current.get(name))
    ]


def _comparable(value: Any) -> Any:
    return list(value) if isinstance(value, list | tuple) else ("" if value is None else value)


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "no criteria" if not value else repr(list(value))
    return repr(value) if value else "none"


def _walk(judge: BaseEvaluator) -> Iterator[BaseEvaluator]:
    yield judge
    inner = getattr(judge, "judge", None)  # a calibrated judge: the judge underneath
    if isinstance(inner, BaseEvaluator):
        yield from _walk(inner)
    for part in getattr(judge, "parts", None) or ():
        if isinstance(part, BaseEvaluator):
            yield from _walk(part)


def _shape(judge: BaseEvaluator) -> str:
    """The checks' names, nested: `cascade(word_count, llm_judge)`."""
    inner = getattr(judge, "judge", None)
    if isinstance(inner, BaseEvaluator):
        return _shape(inner)
    parts = [p for p in getattr(judge, "parts", None) or () if isinstance(p, BaseEvaluator)]
    if not parts:
        return judge.name
    return f"{judge.name}({', '.join(_shape(p) for p in parts)})"


def _criteria_of(part: BaseEvaluator) -> list[str]:
    """The criteria a judge was built with, one per line (an LLM judge's `- ` list)."""
    value = getattr(part, "criteria", None)
    if not value:
        return []
    lines = value.splitlines() if isinstance(value, str) else [str(c) for c in value]
    return [line.strip().removeprefix("- ").strip() for line in lines if line.strip()]
