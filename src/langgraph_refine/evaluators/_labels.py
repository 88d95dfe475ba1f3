"""Labels: a person's verdict on a response to a task, what a judge is calibrated against.

A label is `{"task": str, "response": str, "passed": bool, "criteria": {name: bool} | None}`.
They come from a JSONL file, a list in code, a LangSmith dataset (`langsmith_labels`)
or the loop's own human reviews kept in a LangGraph store (`store_labels`: approve is a
pass; edit, reject and revise are not, for the attempt the reviewer was shown).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore
from pydantic import BaseModel, ConfigDict

from langgraph_refine._records._reviews import stored_reviews


class Label(BaseModel):
    """A person's verdict on one response.

    Attributes:
        task: The task the response answers.
        response: The response the person judged.
        passed: Whether the person would pass it.
        criteria: The person's verdict per criterion (names as the judge's criteria),
            or None.
        group: What the label's task is, for the held-out folds (labels of one group
            are never on both sides of a fold); None: the `task` text.
        judge: The identity of the judge that scored the response, for a review the
            loop recorded (see `evaluators._identity`); None for labels made elsewhere.
    """

    model_config = ConfigDict(frozen=True)

    task: str
    response: str
    passed: bool
    criteria: dict[str, bool] | None = None
    group: str | None = None
    judge: dict[str, Any] | None = None


LabelsLike = str | os.PathLike[str] | Iterable[Mapping[str, Any] | Label]
"""A JSONL file's path, or labels (dicts or `Label`s) in code."""

_EXAMPLE = '{"task": "...", "response": "...", "passed": true}'


def read_labels(labels: LabelsLike) -> list[Label]:
    """Labels from a JSONL file (one label per line) or from dicts / `Label`s in code.

    Raises:
        ValueError: For no labels, a missing or mistyped key (naming the label or line
            and the key), or a file that cannot be read.

    Example:
        >>> read_labels([{"task": "t", "response": "r", "passed": True}])[0].passed
        True
    """
    if isinstance(labels, str | os.PathLike):
        read = _from_file(Path(labels))
    else:
        if isinstance(labels, Mapping):
            raise ValueError(
                f"labels must be a list of labels, got one dict ({labels!r:.80}); wrap it in a list"
            )
        read = [_label(item, f"label {i + 1}") for i, item in enumerate(labels)]
    if not read:
        raise ValueError(
            f"no labels to calibrate with: give at least one, e.g. {_EXAMPLE} "
            "(a JSONL file, a list, or store_labels(store) after some human reviews)"
        )
    return read


def _from_file(path: Path) -> list[Label]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"labels file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"labels file {str(path)!r} cannot be read: {exc}") from None
    labels = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{where} is not JSON ({exc.msg}); write one label per line, e.g. {_EXAMPLE}"
            ) from None
        labels.append(_label(item, where))
    return labels


def _label(item: Any, where: str) -> Label:
    """One label, checked: its keys, their types."""
    if isinstance(item, Label):
        return item
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be a dict like {_EXAMPLE}, got {item!r:.80}")
    missing = [key for key in ("task", "response", "passed") if key not in item]
    if missing:
        raise ValueError(f"{where} has no {', '.join(map(repr, missing))}; a label is {_EXAMPLE}")
    for key in ("task", "response"):
        if not isinstance(item[key], str):
            raise ValueError(f"{where}: {key!r} must be a string, got {item[key]!r:.80}")
    if not isinstance(item["passed"], bool):
        raise ValueError(f"{where}: 'passed' must be true or false, got {item['passed']!r:.80}")
    criteria = item.get("criteria")
    if criteria is not None and (
        not isinstance(criteria, Mapping)
        or not all(isinstance(k, str) and isinstance(v, bool) for k, v in criteria.items())
    ):
        raise ValueError(
            f"{where}: 'criteria' must map each criterion to true or false, got {criteria!r:.80}"
        )
    group = item.get("group")
    if group is not None and not isinstance(group, str | int):
        raise ValueError(
            f"{where}: 'group' must be a string naming the label's task, got {group!r:.80}"
        )
    return Label(
        task=item["task"],
        response=item["response"],
        passed=item["passed"],
        criteria=dict(criteria) if criteria is not None else None,
        group=None if group is None else str(group),
        judge=item.get("judge") if isinstance(item.get("judge"), dict) else None,
    )


def store_labels(store: BaseStore) -> list[Label]:
    """The human reviews the loop kept in a LangGraph store, as labels.

    Every review of a run with a store is kept (the graph's, `RefineMiddleware`'s, the
    command line's `run --review --store FILE`): approve is a pass; edit, reject and
    revise are not, for the attempt the reviewer was shown. Recalibrating is one call:
    `calibrate(judge, store_labels(store))`.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> store_labels(InMemoryStore())
        []
    """
    return [
        Label(
            task=item["task"],
            response=item["response"],
            passed=bool(item["passed"]),
            judge=item.get("judge") if isinstance(item.get("judge"), dict) else None,
        )
        for item in stored_reviews(store)
        if item.get("task") and isinstance(item.get("response"), str)
    ]


def langsmith_labels(dataset: str, *, client: Any = None) -> list[Label]:
    """The examples of a LangSmith dataset, as labels.

    Each example's inputs hold `task`; its outputs `response`, `passed` and optionally
    `criteria`.

    Args:
        dataset: The dataset's name.
        client: A `langsmith.Client` (default: one built from the environment).

    Raises:
        ValueError: For an example without those keys (naming it).
    """
    if client is None:
        from langsmith import Client

        client = Client()
    labels = []
    for example in client.list_examples(dataset_name=dataset):
        item = {**(example.inputs or {}), **(example.outputs or {})}
        labels.append(_label(item, f"LangSmith example {example.id}"))
    return labels
