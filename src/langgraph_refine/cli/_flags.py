"""The loop's flags of `run` and `batch`, and a batch line's keys, from `LoopOptions`.

An option whose field has a plain type (a number, a whole number, true/false, one of a
`Literal`'s values, a list of texts) needs nothing written for the command line: its
declaration gives the flag and its help (`declare(flags=..., help=...)`), its field's type
says how a value is read (the same for a flag and a batch line), `DEFAULTS` gives the
default the help shows. A command takes these flags with `cli._shared.with_shared_flags`;
adding such a field to `LoopOptions` puts it on `run`, `batch` and a batch line at once.

The options whose values need reading of their own (a budget's limits, a schema file, a
memory window, models, checks, the edits mode) are read by hand: their flags in
`cli._shared.SharedFlags`, their batch-line keys in `cli._options`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from types import NoneType, UnionType
from typing import (
    Annotated,
    Any,
    Literal,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

import typer

from langgraph_refine._decisions._options import (
    DEFAULTS,
    LoopOptions,
    criteria_list,
    declaration,
    declared,
)
from langgraph_refine.cli._errors import CliError, given

Kind = Literal["number", "whole", "flag", "choice", "texts"]
"""How a plain option's value is read: its field's type, told apart by `kind_of`."""

_METAVARS: Mapping[Kind, str] = {"number": "X", "whole": "N", "choice": "NAME", "texts": "TEXT"}
_TYPES: Mapping[Kind, tuple[tuple[type, ...], str]] = {
    "number": ((int, float), "a number"),
    "whole": ((int,), "a whole number"),
    "flag": ((bool,), "true or false"),
}
"""What a batch line's value must be, for the kinds JSON gives as such (and the words)."""
_TYPER_TYPES: Mapping[Kind, Any] = {
    "number": float | None,
    "whole": int | None,
    "flag": bool,
    "choice": str | None,
    "texts": list[str] | None,
}


def parse_choice(value: object, choices: Sequence[str], *, option: str) -> str:
    """`value` if it is one of `choices` (case and `-`/`_` do not matter).

    Raises:
        CliError: Naming the option, the value and the allowed values.
    """
    if isinstance(value, str):
        text = value.strip().lower().replace("-", "_")
        if text in choices:
            return text
    raise CliError(f"{option} must be one of {', '.join(choices)}; got {given(value)}")


@dataclass(frozen=True)
class LoopFlag:
    """One plain loop option as the command line and a batch line take it.

    Args:
        name: The `LoopOptions` field (and the command's parameter).
        flag: Its flag (`--target-score`).
        kind: How its value is read.
        choices: The allowed values of a `choice`.
        nullable: A batch line may give null (the field's type allows None).
    """

    name: str
    flag: str
    kind: Kind
    choices: tuple[str, ...] = ()
    nullable: bool = False

    def read(self, value: object, *, option: str) -> Any:
        """The field's value from what a flag or a batch line gave.

        Args:
            value: The given value (typer's, or a line's JSON value).
            option: How the user named it, for messages (`--target-score`, `'target_score'`).

        Raises:
            CliError: For a value of the wrong type or outside the choices.
        """
        if value is None and self.nullable:
            return None
        if self.kind == "choice":
            return parse_choice(value, self.choices, option=option)
        if self.kind == "texts":
            texts = [value] if isinstance(value, str) else value
            if isinstance(texts, list | tuple) and any(
                isinstance(text, str) and not text.strip() for text in texts
            ):
                raise CliError(
                    f"{option} is given an empty text; give each criterion's words, e.g. "
                    f"{option} 'Mentions rain'",
                    exit_code=2,
                )
            try:
                return tuple(criteria_list(value, option=option))
            except ValueError as exc:
                raise CliError(str(exc)) from None
        expected: tuple[type, ...]
        expected, wanted = _TYPES[self.kind]
        if isinstance(value, bool) != (self.kind == "flag") or not isinstance(value, expected):
            raise CliError(f"{option} must be {wanted}, got {given(value)}")
        return float(cast(float, value)) if self.kind == "number" else value

    def parameter(self) -> inspect.Parameter:
        """The command's keyword parameter for typer: not given is None (False for a flag)."""
        option = typer.Option(self.flag, metavar=_METAVARS.get(self.kind), help=self.help())
        return inspect.Parameter(
            self.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=False if self.kind == "flag" else None,
            annotation=Annotated[_TYPER_TYPES[self.kind], option],
        )

    def help(self) -> str:
        """The declared help, with the choices and the default the loop uses."""
        text = declaration(self.name).help
        if self.choices:
            text += f" One of: {', '.join(self.choices)}."
        default = getattr(DEFAULTS, self.name)
        if self.kind in ("number", "whole", "choice") and default is not None:
            text += f" Default: {default}."
        return text


def kind_of(annotation: Any) -> tuple[Kind, tuple[str, ...], bool] | None:
    """How a field of this type is read: its kind, choices and whether None is allowed.

    None for a type that needs reading of its own (a budget, a schema, a union of kinds).

    Example:
        >>> kind_of(int | None), kind_of(Literal["a", "b"]), kind_of(dict)
        (('whole', (), True), ('choice', ('a', 'b'), False), None)
    """
    nullable = False
    if get_origin(annotation) in (Union, UnionType):
        args = [arg for arg in get_args(annotation) if arg is not NoneType]
        nullable = len(args) < len(get_args(annotation))
        if len(args) != 1:
            return None
        annotation = args[0]
    if get_origin(annotation) is Literal:
        return "choice", tuple(str(value) for value in get_args(annotation)), nullable
    if get_origin(annotation) is tuple and get_args(annotation) == (str, ...):
        return "texts", (), nullable
    plain: Mapping[Any, Kind] = {float: "number", bool: "flag", int: "whole"}
    kind = plain.get(annotation)
    return None if kind is None else (kind, (), nullable)


@functools.cache
def loop_flags(surface: str) -> tuple[LoopFlag, ...]:
    """The plain options `surface` (`RUN`, `BATCH` or `LINE`) takes, in declaration order.

    An option with a type of its own (`kind_of` is None) or more than one flag is read by
    hand (`cli._shared`, `cli._options`).
    """
    types = get_type_hints(LoopOptions)
    taken = set(declared(surface))
    found: list[LoopFlag] = []
    for f in fields(LoopOptions):
        kind = kind_of(types[f.name])
        flags = declaration(f.name).flags
        if f.name in taken and kind is not None and len(flags) == 1:
            found.append(LoopFlag(f.name, flags[0], *kind))
    return tuple(found)


def declared_flags(parameter: inspect.Parameter) -> tuple[str, ...]:
    """The flags a command's own `Annotated[..., typer.Option(...)]` parameter declares."""
    options = [
        meta
        for meta in getattr(parameter.annotation, "__metadata__", ())
        if hasattr(meta, "param_decls")
    ]
    return tuple(
        decl
        for option in options
        for decl in (option.default, *(option.param_decls or ()))
        if isinstance(decl, str) and decl.startswith("--")
    )
