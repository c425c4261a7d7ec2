"""Declared parameter domains: one :class:`ParamSpec` per constructor parameter of a mechanism.

A mechanism lists its parameters once, in ``param_specs``; that one declaration is what

- the constructor checks (:meth:`dpcube.mechanisms.base.Mechanism.__init_subclass__` wraps every
  ``__init__`` so that each argument is checked, and converted, before the body runs);
- ``dpcube release --param`` and ``dpcube audit --param`` coerce a value with
  (:func:`dpcube.cli.params.coerce_params`);
- the audit and the fuzz tests draw values from (:meth:`ParamSpec.examples`);
- the parameter table of ``docs/parameters.md`` is generated from (:func:`parameter_table`).

A value outside its domain raises :class:`~dpcube.errors.ParameterError`, one line naming the
mechanism, the parameter, the value and the domain, before anything is counted or charged.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcube.errors import ParameterError

#: The kinds of value a parameter takes.
KINDS = ("int", "float", "bool", "choice", "names", "text", "structured")


_TYPE_NAMES: dict[type, str] = {
    str: "text",
    int: "an integer",
    float: "a number",
    list: "a list",
    tuple: "a list",
    dict: "a mapping",
    Mapping: "a mapping",
    Path: "a file path",
}


def _number(x: float) -> str:
    """A bound as written: whole numbers in full (``1000000``, not ``1e+06``).

    >>> _number(1e6), _number(0.5), _number(2**40)
    ('1000000', '0.5', '1099511627776')
    """
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**63 else f"{x:g}"


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"


@dataclass(frozen=True)
class ParamSpec:
    """The domain of one constructor parameter.

    ``kind``: ``int`` (a whole number; ``2.0`` is taken as 2), ``float`` (a finite real number),
    ``bool``, ``choice`` (one of ``choices``), ``names`` (distinct non-empty names, as a list or a
    comma-separated text), ``text`` (any non-empty text) or ``structured`` (a value whose shape
    the mechanism checks against the schema before the charge: a workload, a strategy, a list of
    cuboids; only its meaning is declared here). ``low``/``high`` bound a number; ``low_open`` /
    ``high_open`` make a bound strict. ``optional``: ``None`` is accepted (it means the default
    behaviour, e.g. a height chosen from the data). ``accepts``: the types a ``structured`` value
    may have. ``meaning``: one line a user reads.
    """

    name: str
    kind: str
    meaning: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[Any, ...] = ()
    optional: bool = False
    #: ``structured`` only: the types of value accepted (and named in the domain); () for any.
    accepts: tuple[type, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"ParamSpec {self.name}: unknown kind {self.kind!r}")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"ParamSpec {self.name}: a choice needs choices")

    # -- describing the domain ---------------------------------------------------------------
    def _bounds(self) -> str:
        low, high = self.low, self.high
        if low is not None and high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f" in {left}{_number(low)}, {_number(high)}{right}"
        if low is not None:
            return f" {'>' if self.low_open else '>='} {_number(low)}"
        if high is not None:
            return f" {'<' if self.high_open else '<='} {_number(high)}"
        return ""

    def domain(self) -> str:
        """The domain in words, e.g. ``a number > 0``, ``one of 'row', 'col'``.

        >>> ParamSpec("c", "float", "m", low=0, low_open=True).domain()
        'a number > 0'
        >>> ParamSpec("T", "int", "steps", low=1, high=64, optional=True).domain()
        'an integer in [1, 64], or null'
        """
        if self.kind == "int":
            text = "an integer" + self._bounds()
        elif self.kind == "float":
            text = "a number" + self._bounds()
        elif self.kind == "bool":
            text = "true or false"
        elif self.kind == "choice":
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif self.kind == "names":
            text = "distinct names (a list, or text separated by commas)"
        elif self.kind == "text":
            text = "non-empty text"
        elif self.accepts:
            kinds = " or ".join(
                dict.fromkeys(_TYPE_NAMES.get(t, f"a {t.__name__}") for t in self.accepts)
            )
            text = f"{kinds}, checked against the schema"
        else:
            text = "a value checked against the schema"
        return text + (", or null" if self.optional else "")

    # -- checking ----------------------------------------------------------------------------
    def refuse(self, owner: str, value: Any, why: str = "", flag: str = "") -> ParameterError:
        """The one-line refusal: ``owner: parameter NAME=VALUE is outside its domain ...``
        (``flag`` replaces ``parameter NAME``, e.g. ``--param NAME`` on the command line)."""
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        reason = f" ({why})" if why else ""
        return ParameterError(
            f"{owner}: {flag or 'parameter ' + self.name}={shown} is outside its domain{reason}: "
            "expected "
            f"{self.domain()} ({self.meaning})"
        )

    def _in_bounds(self, x: float) -> bool:
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return not (self.high is not None and (x >= self.high if self.high_open else x > self.high))

    def check(self, owner: str, value: Any, flag: str = "") -> Any:
        """``value`` converted to the declared kind (``2.0`` to 2 for an integer, ``3`` to 3.0 for
        a number, a numpy scalar to a Python one), or :class:`ParameterError` naming ``owner``
        (and ``flag``, see :meth:`refuse`).

        >>> ParamSpec("c", "float", "the UG constant", low=0, low_open=True).check("ug", -1)
        Traceback (most recent call last):
        ...
        dpcube.errors.ParameterError: ug: parameter c=-1 is outside its domain: expected a number > 0 (the UG constant)
        """
        if value is None:
            if self.optional:
                return None
            raise self.refuse(owner, value, "null is not allowed", flag)
        if self.kind in ("int", "float"):
            if _is_bool(value) or not isinstance(value, numbers.Real):
                raise self.refuse(owner, value, "not a number", flag)
            x = float(value)
            if not math.isfinite(x):
                raise self.refuse(owner, value, "not finite", flag)
            if self.kind == "int":
                if not x.is_integer():
                    raise self.refuse(owner, value, "not a whole number", flag)
                converted: Any = int(value) if isinstance(value, numbers.Integral) else int(x)
            else:
                converted = x
            if not self._in_bounds(x):
                raise self.refuse(owner, value, flag=flag)
            return converted
        if self.kind == "bool":
            if not _is_bool(value):
                raise self.refuse(owner, value, "not true or false", flag)
            return bool(value)
        if self.kind == "choice":
            if (
                isinstance(value, str | int | float)
                and not _is_bool(value)
                and value in self.choices
            ):
                return value
            raise self.refuse(owner, value, flag=flag)
        if self.kind == "names":
            return self._check_names(owner, value, flag)
        if self.kind == "text":
            if not isinstance(value, str) or not value.strip():
                raise self.refuse(owner, value, flag=flag)
            return value
        if self.accepts and (_is_bool(value) or not isinstance(value, self.accepts)):
            raise self.refuse(owner, value, f"not {self.domain().split(',')[0]}", flag)
        return value  # structured: checked against the schema by the mechanism

    def _check_names(self, owner: str, value: Any, flag: str = "") -> Any:
        if isinstance(value, str):
            items: list[Any] = [v.strip() for v in value.split(",")]
            if value.strip() == "":
                items = []
        elif isinstance(value, Sequence) and not isinstance(value, bytes):
            items = list(value)
        else:
            raise self.refuse(owner, value, "not a list of names", flag)
        seen: set[str] = set()
        for item in items:
            if not isinstance(item, str) or not item.strip():
                raise self.refuse(owner, value, f"{item!r} is not a name", flag)
            if item in seen:
                raise self.refuse(owner, value, f"{item!r} is named twice", flag)
            seen.add(item)
        return value

    # -- values to try (the audit and the fuzz tests) ----------------------------------------
    def examples(self) -> tuple[list[Any], list[Any]]:
        """(values inside the domain, values outside it), the bounds and their neighbours first.

        >>> ParamSpec("a", "float", "share", low=0, high=1, low_open=True, high_open=True).examples()[1]
        [0.0, -1.0, 1.0, 2.0, nan, inf, '0.5', True, None]
        """
        inside: list[Any] = []
        outside: list[Any] = []
        if self.kind in ("int", "float"):
            step = 1 if self.kind == "int" else 0.5
            for bound, is_open, sign in (
                (self.low, self.low_open, 1),
                (self.high, self.high_open, -1),
            ):
                if bound is None:
                    continue
                edge = int(bound) if self.kind == "int" else float(bound)
                (outside if is_open else inside).append(edge)
                outside.append(edge - sign * step * 2 if is_open else edge - sign * step)
            if self.low is not None and self.high is not None:
                mid = (self.low + self.high) / 2
                inside.append(round(mid) if self.kind == "int" else mid)
            elif self.low is not None:
                inside.append(int(self.low) + 1 if self.kind == "int" else self.low + 1.0)
            elif self.high is not None:
                inside.append(int(self.high) - 1 if self.kind == "int" else self.high - 1.0)
            else:
                inside.append(1 if self.kind == "int" else 1.0)
            if self.kind == "int":
                outside.append(1.5)
            outside.extend([math.nan, math.inf])
            # junk types
            outside.extend([str(inside[-1]), True])
        elif self.kind == "bool":
            inside.extend([True, False])
            outside.extend(["yes", 1])
        elif self.kind == "choice":
            inside.extend(self.choices)
            outside.extend(["no-such-choice", 3.5])
        elif self.kind == "names":
            outside.extend(["a,a", [""], 7])
        elif self.kind == "text":
            outside.extend(["", 7])
        if self.optional:
            inside.append(None)
        elif self.kind != "structured":
            outside.append(None)
        return inside, [v for v in outside if not self._accepts(v)]

    def _accepts(self, value: Any) -> bool:
        try:
            self.check("?", value)
        except ParameterError:
            return False
        return True


def specs_by_name(specs: Iterable[ParamSpec]) -> dict[str, ParamSpec]:
    """``{name: spec}``; a later spec of the same name replaces an earlier one."""
    return {s.name: s for s in specs}


def parameter_table(mechanisms: Sequence[tuple[str, Sequence[ParamSpec]]]) -> str:
    """The Markdown table of every mechanism's parameters and domains (``docs/parameters.md``)."""
    lines = [
        "| mechanism | parameter | domain | meaning |",
        "|---|---|---|---|",
    ]
    for name, specs in mechanisms:
        if not specs:
            lines.append(f"| `{name}` | (none) | | |")
        for spec in specs:
            domain = spec.domain().replace("|", "\\|")
            meaning = spec.meaning.replace("|", "\\|")
            lines.append(f"| `{name}` | `{spec.name}` | {domain} | {meaning} |")
    return "\n".join(lines) + "\n"


__all__ = ["KINDS", "ParamSpec", "parameter_table", "specs_by_name"]
