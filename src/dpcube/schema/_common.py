"""What every part of the schema shares: the domain-size limit, the checks of a schema file's
fields (one line naming the attribute, the field and the value), and the query-value readers."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, TypeAlias

from dpcube.errors import QueryError, SchemaError


def _memory_bytes() -> int:
    """Physical memory of this machine (8 GiB where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 8 * 2**30


def _memory_limit() -> int:
    # A dense int64 array and a few working copies of it (prefix sums, noise, answers): 64 bytes
    # a cell, so the default uses at most about an eighth of memory per copy.
    return max(2**20, _memory_bytes() // 64)


#: Largest number of cells materialised by default on this machine (memory / 64 bytes, at least
#: 2**20); the environment variable ``DPCUBE_MAX_CELLS`` overrides it (see :func:`default_max_cells`).
DEFAULT_MAX_CELLS = _memory_limit()


def default_max_cells() -> int:
    """The domain limit: ``$DPCUBE_MAX_CELLS`` if set, else :data:`DEFAULT_MAX_CELLS`."""
    env = os.environ.get("DPCUBE_MAX_CELLS", "").strip()
    if not env:
        return DEFAULT_MAX_CELLS
    try:
        value = int(env.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise SchemaError(f"DPCUBE_MAX_CELLS={env!r} must be a positive integer number of cells")
    return value


def _limit_source(limit: int) -> str:
    if os.environ.get("DPCUBE_MAX_CELLS", "").strip():
        return f"the {limit:,} set by DPCUBE_MAX_CELLS"
    if limit == DEFAULT_MAX_CELLS:
        gib = _memory_bytes() / 2**30
        return (
            f"the {limit:,} that may be materialised (the default, sized to this machine's "
            f"{gib:.0f} GiB of memory; set DPCUBE_MAX_CELLS to raise it)"
        )
    return f"the {limit:,} that may be materialised (max_cells; DPCUBE_MAX_CELLS sets the default)"


# -- one validator for every schema field ------------------------------------------------------


def _is_number(x: Any) -> bool:
    """A real number (Python or numpy), not a boolean and not text."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and type(x).__name__ != "bool_"


def _field_number(value: Any, attribute: str, field_name: str) -> float:
    """A finite real number (not a boolean, not a string) for ``attribute``'s ``field_name``."""
    if not _is_number(value):
        raise SchemaError(f"attribute {attribute!r}: {field_name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise SchemaError(f"attribute {attribute!r}: {field_name} must be finite, got {value!r}")
    return float(value)


def _field_list(
    value: Any, attribute: str, field_name: str, what: str, count: int | None = None
) -> list[Any]:
    """A list (or tuple) for a field, of exactly ``count`` items when given."""
    expected = f"a list of {count} {what}" if count else f"a list of {what}"
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise SchemaError(
            f"attribute {attribute!r}: {field_name} must be {expected}, got {value!r}"
        )
    if count is not None and len(value) != count:
        raise SchemaError(
            f"attribute {attribute!r}: {field_name} must be {expected}, got {len(value)}: {list(value)!r}"
        )
    return list(value)


def _field_numbers(
    value: Any, attribute: str, field_name: str, count: int | None = None
) -> tuple[float, ...]:
    items = _field_list(value, attribute, field_name, "numbers", count)
    return tuple(_field_number(x, attribute, f"{field_name} item {i}") for i, x in enumerate(items))


def _field_integers(value: Any, attribute: str, field_name: str, count: int) -> tuple[int, ...]:
    """``count`` whole numbers >= 1; a single number stands for all of them."""
    items = [value] * count if _is_number(value) or isinstance(value, bool) else value
    items = _field_list(items, attribute, field_name, "positive integers", count)
    out: list[int] = []
    for x in items:
        if not _is_number(x) or not math.isfinite(x) or not float(x).is_integer():
            raise SchemaError(
                f"attribute {attribute!r}: {field_name} must be whole numbers (integers), got {x!r}"
            )
        if x < 1:
            raise SchemaError(
                f"attribute {attribute!r}: {field_name} must be at least 1, got {x!r}"
            )
        out.append(int(x))
    return tuple(out)


def _field_names(
    value: Any, attribute: str, field_name: str, count: int | None = None
) -> tuple[str, ...]:
    """Names (columns, categories): scalars read as the text written."""
    items = _field_list(value, attribute, field_name, "names", count)
    for x in items:
        if isinstance(x, Mapping | list | tuple):
            raise SchemaError(
                f"attribute {attribute!r}: {field_name} must be scalar names, got {x!r}"
            )
    return tuple(str(x) for x in items)


Interval: TypeAlias = tuple[int, int]
Box: TypeAlias = tuple[Interval, ...]


def _name_list(values: Iterable[Any], what: str, attribute: str) -> tuple[str, ...]:
    names = tuple(str(v) for v in values)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SchemaError(
                f"attribute {attribute!r}: duplicate {what} {name!r}; names must be unique"
            )
        seen.add(name)
    return names


def _interval(value: Any, size: int, attribute: str, axis: str = "") -> Interval:
    where = f"attribute {attribute!r}{' ' + axis if axis else ''}"
    if (
        not isinstance(value, Sequence)
        or isinstance(value, str)
        or len(value) != 2
        or not all(_is_number(v) and math.isfinite(v) and float(v).is_integer() for v in value)
    ):
        raise QueryError(
            f"{where}: expected an inclusive index interval [lo, hi] of two integers, got {value!r}"
        )
    lo, hi = int(value[0]), int(value[1])
    if lo > hi:
        raise QueryError(f"{where}: interval [{lo}, {hi}] is reversed; write it as [{hi}, {lo}]")
    if not 0 <= lo <= hi < size:
        raise QueryError(f"{where}: interval [{lo}, {hi}] is not inside [0, {size - 1}]")
    return lo, hi


# -- query values: from the attribute's unit to bins --------------------------------------------


def _query_number(x: Any, where: str) -> float:
    """A finite number from a query (a number, or text that reads as one: the CLI passes text)."""
    if isinstance(x, str):
        try:
            value = float(x.strip())
        except ValueError:
            raise QueryError(f"{where}: expected a number, got {x!r}") from None
    elif _is_number(x):
        value = float(x)
    else:
        raise QueryError(f"{where}: expected a number, got {x!r}")
    if not math.isfinite(value):
        raise QueryError(f"{where}: expected a finite number, got {x!r}")
    return value


def _value_pair(value: Any, where: str) -> tuple[float, float]:
    """``v`` (meaning ``v..v``) or ``[lo, hi]`` as two numbers, not reversed."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != 2:
            raise QueryError(
                f"{where}: expected a value or an inclusive range [lo, hi] of two values, got {value!r}"
            )
        lo, hi = _query_number(value[0], where), _query_number(value[1], where)
    else:
        lo = hi = _query_number(value, where)
    if lo > hi:
        raise QueryError(
            f"{where}: range [{lo:g}, {hi:g}] is reversed; write it as [{hi:g}, {lo:g}]"
        )
    return lo, hi


def _fmt(x: float) -> str:
    """A value as a user writes it: ``30`` rather than ``30.0``, ``33.8`` rather than
    ``33.800000000000004`` (12 significant digits).

    >>> _fmt(30.0), _fmt(33.800000000000004), _fmt(-0.25)
    ('30', '33.8', '-0.25')
    """
    r = float(f"{x:.12g}")
    return str(int(r)) if r.is_integer() and abs(r) < 2**53 else repr(r)


# -- bin edges: computed from the numbers as the schema writes them ------------------------------


def _declared(x: float) -> Fraction:
    """The decimal number a schema wrote for ``x`` (the shortest text that reads back as ``x``,
    which is what a YAML or JSON ``33.7`` was), as an exact fraction."""
    return Fraction(Decimal(repr(float(x))))


def stepped_edges(lo: float, width: float, bins: int) -> tuple[float, ...]:
    """``lo + i * width`` for ``i = 0..bins``, worked out exactly on the declared decimals and
    then rounded once to the nearest float: an edge the schema implies, such as ``36``, is the
    float of 36 and not the ``36.00000000005821`` that adding ``width`` in floating point
    gives.

    >>> stepped_edges(33.7, 0.1, 3)
    (33.7, 33.8, 33.9, 34.0)
    >>> stepped_edges(0, 0.1, 3) == (0.0, 0.1, 0.2, 0.3)
    True
    """
    a, w = _declared(lo), _declared(width)
    den = math.lcm(a.denominator, w.denominator)
    start = a.numerator * (den // a.denominator)
    step = w.numerator * (den // w.denominator)
    if max(abs(start), abs(start + bins * step), den) < 2**53:
        # every numerator and the denominator are floats exactly, and IEEE division rounds once
        import numpy as np

        numerators = start + np.arange(bins + 1, dtype=np.int64) * step
        return tuple((numerators.astype(np.float64) / float(den)).tolist())
    # Python divides integers with one correct rounding, however large they are
    return tuple((start + i * step) / den for i in range(bins + 1))


def split_edges(lo: float, hi: float, parts: int) -> tuple[float, ...]:
    """``lo + (hi - lo) * i / parts`` for ``i = 0..parts``, worked out exactly on the declared
    decimals and rounded once (:func:`stepped_edges`); the ends are ``lo`` and ``hi`` themselves.

    >>> split_edges(33.7, 34.3, 6)
    (33.7, 33.8, 33.9, 34.0, 34.1, 34.2, 34.3)
    """
    a, b = _declared(lo), _declared(hi)
    den = math.lcm(a.denominator, b.denominator)
    start = a.numerator * (den // a.denominator)
    end = b.numerator * (den // b.denominator)
    return tuple((start * (parts - i) + end * i) / (den * parts) for i in range(parts + 1))
