"""The query text language of ``--where`` (the command line) and ``where=`` (the HTTP service
and its explorer page): ``attr=lo..hi, attr=Category, attr in (A, B), loc=lat0..lat1:lon0..lon1,
attr=#i..j``, or a JSON object, read into the Python API's query dict
(:meth:`dpcube.schema.Schema.box` reads that).

Values are inclusive and in the attribute's unit; ``#`` names bins by number; ``attr in (A, B)``
is the set of categories (or hierarchy nodes) ``{"in": ["A", "B"]}``, while ``attr=A..B`` is the
range of categories from A to B in the schema's order. The text says nothing about a schema: an
unknown attribute or a value outside the domain is refused later, by the release that answers
the query.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dpcube.errors import QueryError, UsageError


def _number(text: str) -> int | float | None:
    """``text`` as an int or a float, or None when it is not a number."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def _range(text: str, *, bins: bool = False) -> Any:
    """``lo..hi`` as ``[lo, hi]`` (numbers where both are numbers, else labels); ``v`` alone."""
    if ".." not in text:
        if bins:
            n = _number(text)
            if not isinstance(n, int):
                raise QueryError(f"bin number {text!r} must be an integer ('#3' or '#3..5')")
            return [n, n]
        return text
    lo, hi = (part.strip() for part in text.split("..", 1))
    a, b = _number(lo), _number(hi)
    if bins and not (isinstance(a, int) and isinstance(b, int)):
        raise QueryError(f"bins {text!r} must be two integers '#lo..hi'")
    if a is None or b is None:
        return [lo, hi]  # category labels: first..last
    return [a, b]


def _constraint(text: str) -> Any:
    """One ``--where`` value: ``lo..hi`` (values, inclusive), ``lat0..lat1:lon0..lon1`` (a box),
    ``#i..j`` or ``#r0..r1:c0..c1`` (bins by number), or a category / node / value as text."""
    text = text.strip()
    bins = text.startswith("#")
    if bins:
        text = text[1:].strip()
    if ":" in text and ".." in text:
        lat, lon = text.split(":", 1)
        value: Any = [_range(lat.strip(), bins=bins), _range(lon.strip(), bins=bins)]
    else:
        value = _range(text, bins=bins)
    return {"bins": value} if bins else value


def _json_keys(text: str) -> list[str]:
    """The top-level keys of a JSON object in the order written, repeats included."""
    keys: list[str] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys[:] = [k for k, _ in pairs]
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return keys


def _no_repeats(names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise QueryError(
                f"--where names attribute {name!r} twice; give one constraint per attribute "
                "(an interval lo..hi covers a range)"
            )
        seen.add(name)


#: ``attr in (A, B, ...)``: a set of categories.
_SET = re.compile(r"^\s*(?P<name>[^=()]*?)\s+in\s*\((?P<members>.*)\)\s*$", re.DOTALL)


def _parts(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses (a set ``(A, B)`` is one part)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                raise QueryError(f"--where has a ')' without its '(' in {text!r}")
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise QueryError(f"--where has a '(' without its ')' in {text!r}")
    parts.append(text[start:])
    return parts


def _set(part: str) -> tuple[str, dict[str, list[str]]] | None:
    """``attr in (A, B)`` as ``("attr", {"in": ["A", "B"]})``; None for any other part."""
    match = _SET.match(part)
    if match is None:
        return None
    name = match["name"].strip()
    members = [m.strip() for m in match["members"].split(",")]
    if not name or not members or any(not m for m in members):
        raise QueryError(
            f"--where part {part.strip()!r}: a set is 'attribute in (A, B, ...)' with at least "
            "one category and no empty one"
        )
    return name, {"in": members}


def parse_where(text: str) -> dict[str, Any]:
    """A query from JSON or from ``attr=lo..hi, attr=Category, attr in (A, B),
    loc=lat0..lat1:lon0..lon1``; ``attr=#i..j`` names bins by number. Values are inclusive, in
    the attribute's unit. ``attr=A..B`` is the *range* of categories A to B in the schema's
    order; ``attr in (A, B)`` the *set* of A and B.

    >>> parse_where("age=18..64, sex=F, income=#3..5")
    {'age': [18, 64], 'sex': 'F', 'income': {'bins': [3, 5]}}
    >>> parse_where("carrier in (UA, DL), month=1..3")
    {'carrier': {'in': ['UA', 'DL']}, 'month': [1, 3]}
    >>> parse_where("loc=33.9..34.1:-118.3..-118.1, size=1")
    {'loc': [[33.9, 34.1], [-118.3, -118.1]], 'size': '1'}
    >>> parse_where('{"age": [0, 17]}')
    {'age': [0, 17]}
    """
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise QueryError(f"--where is not valid JSON: {exc}") from None
        except RecursionError:
            raise QueryError(
                "--where nests arrays and objects too deeply to read; no query needs more than 6"
            ) from None
        if not isinstance(value, dict):
            raise QueryError("--where JSON must be an object {attribute: constraint}")
        _no_repeats(list(_json_keys(text)))
        return value
    query: dict[str, Any] = {}
    for part in _parts(text):
        found = _set(part)
        if found is not None:
            _no_repeats([*query, found[0]])
            query[found[0]] = found[1]
            continue
        name, sep, value = part.partition("=")
        if not sep:
            raise QueryError(
                f"--where part {part.strip()!r} must look like attribute=value or "
                "attribute in (A, B)"
            )
        _no_repeats([*query, name.strip()])
        query[name.strip()] = _constraint(value)
    return query


def split_names(text: str, option: str) -> list[str]:
    """``"sex,income"`` as names; an empty name is an error naming ``option``.

    >>> split_names("sex, income", "--group-by")
    ['sex', 'income']
    """
    names = [n.strip() for n in text.split(",")]
    if not text.strip() or any(not n for n in names):
        raise UsageError(f"{option} expects attribute names separated by commas, got {text!r}")
    return names


__all__ = ["parse_where", "split_names"]
