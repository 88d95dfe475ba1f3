"""What a checkpointed thread keeps of the run it holds, so a rerun cannot mix settings.

A durable run writes its settings (the check and the options that change scores or
stops) into the metadata of every checkpoint it saves (`SETTINGS_KEY`). A rerun on the
thread continues an unfinished run only when its task and settings are the ones the run
was started with; otherwise `check_same_run` refuses it before any model call, naming
what differs, rather than scoring some rounds by one check and the rest by another, or
silently dropping the unfinished run for another task.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langgraph.runtime import get_runtime

from langgraph_refine._decisions._options import LoopOptions, kept_options
from langgraph_refine._errors import ThreadSettingsError
from langgraph_refine._kinds import model_name
from langgraph_refine._records._record import evaluator_kind

SETTINGS_KEY = "refine_settings"
"""The checkpoint metadata key holding a run's settings (a JSON object of strings)."""

KEPT_OPTIONS = kept_options()
"""The options a thread keeps (declared `kept=True` in `LoopOptions`): those that change
how attempts score, or when the loop stops and what it returns. The others (strategy,
memory, edits, ...) change what is tried next, which a resumed run may do differently
without mixing two measures."""

_SHOWN_TASK = 60
_BUILT_IN = "langgraph_refine.evaluators."


def thread_settings(options: LoopOptions, checks: str) -> dict[str, str]:
    """The settings a thread keeps of its run, each written as a short text.

    Args:
        options: The run's options.
        checks: The run's check as text (`describe_evaluator`, or the command line's
            specs).
    """
    settings = {"evaluator": checks}
    for name in KEPT_OPTIONS:
        settings[name] = _shown(getattr(options, name))
    return settings


def describe_evaluator(evaluator: Any) -> str:
    """An evaluator as text: its kind, and a built-in one's plain settings.

    Stable from one process to the next, so a rerun's check compares equal to the one
    the thread was started with. The library's own evaluators (`langgraph_refine.
    evaluators`) hold only their configuration, so their plain settings are shown (a
    combined one's parts too); any other evaluator is named by its kind alone, since its
    attributes may change as it runs (a counter, a log of calls).

    Example:
        >>> from langgraph_refine.evaluators import word_count
        >>> describe_evaluator(word_count(3, 5))
        'word_count(max_words=5, min_words=3)'
    """
    if evaluator is None:
        return "llm_judge"
    parts = getattr(evaluator, "parts", None)
    kind = evaluator_kind(evaluator) if not parts else str(getattr(evaluator, "name", "combined"))
    own = type(evaluator).__module__.startswith(_BUILT_IN)
    shown = [
        f"{key}={text}"
        for key, value in sorted(getattr(evaluator, "__dict__", {}).items() if own else ())
        if not key.startswith("_") and key != "parts" and (text := _plain(value)) is not None
    ]
    if parts:
        shown.insert(0, "+".join(describe_evaluator(p) for p in parts))
    return f"{kind}({', '.join(shown)})" if shown else kind


def settings_metadata(settings: Mapping[str, str]) -> dict[str, str]:
    """The run config's `metadata` entry that saves `settings` with each checkpoint."""
    return {SETTINGS_KEY: json.dumps(dict(settings), sort_keys=True)}


def check_same_run(snapshot: Any, task: str, settings: Mapping[str, str] | None) -> None:
    """Refuse to continue a thread's unfinished run with another task or other settings.

    Args:
        snapshot: The thread's state snapshot (an unfinished run).
        task: The task of this call.
        settings: This call's settings (None: only the task is compared).

    Raises:
        ThreadSettingsError: Naming each difference, before any model call.
    """
    differences: list[tuple[str, str, str]] = []
    saved_task = snapshot.values.get("task")
    if isinstance(saved_task, str) and saved_task != task:
        differences.append(("task", *texts_apart(saved_task, task)))
    saved = _saved_settings(snapshot)
    if saved is not None and settings is not None:
        for name in [*settings, *(k for k in saved if k not in settings)]:
            if saved.get(name) != settings.get(name):
                differences.append((name, saved.get(name, "unset"), settings.get(name, "unset")))
    if differences:
        raise ThreadSettingsError(differences)


def _saved_settings(snapshot: Any) -> dict[str, str] | None:
    raw = (getattr(snapshot, "metadata", None) or {}).get(SETTINGS_KEY)
    if not isinstance(raw, str):
        return None  # a thread written by a plain graph run, or an older release
    try:
        saved = json.loads(raw)
    except ValueError:
        return None
    return {str(k): str(v) for k, v in saved.items()} if isinstance(saved, dict) else None


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, BaseLanguageModel):
        return model_name(value)
    schema = getattr(value, "json_schema", None)
    if isinstance(schema, dict):  # an output schema: its name and a digest of its content
        digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:8]
        return f"{getattr(value, 'name', 'output')}#{digest}"
    return str(value)


def _plain(value: Any) -> str | None:
    if isinstance(value, str | int | float | bool) or value is None:
        return repr(value)
    if isinstance(value, list | tuple) and all(_plain(v) is not None for v in value):
        return repr(list(value))
    if isinstance(value, BaseLanguageModel):
        return model_name(value)
    return None


def texts_apart(was: str, now: str) -> tuple[str, str]:
    r"""Two different texts shown so that they look different: quoted, line breaks escaped.

    A long text is cut to the part around the first difference. Texts that differ only
    in their spaces and line breaks, or in characters that look alike (a composed and a
    decomposed accent), have the first character that differs named, escaped.

    Example:
        >>> was, now = texts_apart("One.\nTwo.", "One. Two.")
        >>> print(was, now)
        'One.\nTwo.' 'One. Two.' (they differ at character 5: '\n' then ' ')
    """
    at = next((i for i, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), None)
    at = min(len(was), len(now)) if at is None else at
    start = max(0, at - _SHOWN_TASK // 2) if max(len(was), len(now)) > _SHOWN_TASK else 0

    def window(text: str) -> str:
        quoted = repr(text[start : start + _SHOWN_TASK])
        more = "…" if len(text) > start + _SHOWN_TASK else ""
        return quoted[0] + ("…" if start else "") + quoted[1:-1] + more + quoted[-1]

    first, second = window(was), window(now)
    if _look_alike(was, now) or first == second:
        old, new = (ascii(text[at]) if at < len(text) else "the end" for text in (was, now))
        second += f" (they differ at character {at + 1}: {old} then {new})"
    return first, second


def _look_alike(was: str, now: str) -> bool:
    """True if two texts differ only in spaces and line breaks, or in look-alike characters."""
    if " ".join(was.split()) == " ".join(now.split()):
        return True
    return unicodedata.normalize("NFKC", was) == unicodedata.normalize("NFKC", now)


def run_of(runtime: Any) -> str | None:
    """The id of the run a node or hook runs in (`execution_info.run_id`), or None.

    LangGraph Server gives a run's first attempt its id; a script gives one with
    `config["run_id"]`.
    """
    info = getattr(runtime, "execution_info", None)
    run = getattr(info, "run_id", None)
    return str(run) if run is not None else None


def current_run() -> str | None:
    """The id of the run the calling node runs in (see `run_of`), or None outside a run."""
    try:
        runtime = get_runtime()
    except RuntimeError:  # called outside a graph's run
        return None
    return run_of(runtime)
