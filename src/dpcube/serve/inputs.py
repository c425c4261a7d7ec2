"""What the service reads from a request, checked before anything is answered.

- :func:`read_json`: a request body or a JSON ``where`` parsed strictly: a key repeated in one
  object is refused, naming the key (JSON parsers, this one's default included, keep the last
  value, so ``{"sex": "F", "sex": "M"}`` would answer for M; the CLI refuses it too), as are
  ``NaN``/``Infinity`` (not JSON) and nesting deeper than :data:`MAX_JSON_DEPTH`;
- :func:`check_level`: a confidence level whose two-sided normal quantile is a finite positive
  number in double precision (``0.9999999999999999`` is below 1 but ``0.5 + level / 2`` rounds
  to 1, an infinite quantile; ``1e-300`` rounds to 0.5, an empty interval).

Every refusal is a :class:`RequestRefused`: a status (422, 413) and one line, which the app
answers in its one error shape ``{"error": line}``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from dpcube.release.uncertainty import MAX_LEVEL, computable_level

#: Deepest nesting of arrays and objects accepted in a request (the deepest query the service
#: answers, a spatial box of bins inside a batch, is 6 deep).
MAX_JSON_DEPTH = 32


class RequestRefused(Exception):
    """A request refused before it is answered: an HTTP status and one line."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return obj


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (write a number, or null)")


def _too_deep(value: Any, room: int) -> bool:
    """Whether ``value`` nests arrays/objects more than ``room`` deep."""
    if room == 0:
        return True
    for item in value.values() if type(value) is dict else value:
        kind = type(item)
        if (kind is dict or kind is list) and _too_deep(item, room - 1):
            return True
    return False


def read_json(data: bytes | str, what: str) -> Any:
    """``data`` parsed as strict JSON; ``what`` names it in a refusal ("the request body").

    >>> read_json(b'{"queries": [{"sex": "F"}]}', "the request body")
    {'queries': [{'sex': 'F'}]}
    >>> read_json('{"sex": "F", "sex": "M"}', "where")
    Traceback (most recent call last):
    dpcube.serve.inputs.RequestRefused: where repeats the key 'sex' in one object; give each key once (one constraint per attribute)
    >>> read_json("[" * 40 + "]" * 40, "where")
    Traceback (most recent call last):
    dpcube.serve.inputs.RequestRefused: where nests arrays and objects more than 32 deep; no query needs more than 6
    """
    try:
        value = json.loads(data, object_pairs_hook=_unique_keys, parse_constant=_not_json_constant)
    except _RepeatedKey as exc:
        raise RequestRefused(
            422,
            f"{what} repeats the key {exc.key!r} in one object; give each key once "
            "(one constraint per attribute)",
        ) from None
    except RecursionError:
        value = None
        deep = True
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, too many digits, bad UTF-8
        raise RequestRefused(422, f"{what} is not valid JSON: {exc}") from None
    else:
        kind = type(value)
        if isinstance(data, bytes):
            brackets = data.count(b"[") + data.count(b"{")
        else:
            brackets = data.count("[") + data.count("{")
        # fewer brackets than the limit cannot nest deeper: most requests skip the walk
        deep = (
            (kind is dict or kind is list)
            and brackets > MAX_JSON_DEPTH
            and _too_deep(value, MAX_JSON_DEPTH)
        )
    if deep:
        raise RequestRefused(
            422,
            f"{what} nests arrays and objects more than {MAX_JSON_DEPTH} deep; no query needs "
            "more than 6",
        )
    return value


def check_level(level: Any, where: str = "level") -> float:
    """``level`` as a confidence level whose interval can be computed
    (:func:`dpcube.release.uncertainty.computable_level`: ``0.5 < 0.5 + level / 2 < 1`` in
    double precision, so the normal quantile is finite and positive).

    >>> check_level(0.95)
    0.95
    >>> check_level(0.9999999999999999)
    Traceback (most recent call last):
    dpcube.serve.inputs.RequestRefused: level must be a confidence level between 0 and 1 whose interval can be computed (e.g. 0.95; at most 0.9999999999999998), got 0.9999999999999999
    """
    number = level if isinstance(level, float | int) and not isinstance(level, bool) else None
    if number is None or not math.isfinite(number) or not computable_level(number):
        raise RequestRefused(
            422,
            f"{where} must be a confidence level between 0 and 1 whose interval can be computed "
            f"(e.g. 0.95; at most {MAX_LEVEL!r}), got {level!r}",
        )
    return float(number)


__all__ = ["MAX_JSON_DEPTH", "RequestRefused", "check_level", "read_json"]
