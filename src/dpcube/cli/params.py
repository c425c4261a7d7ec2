"""``--param key=value``: check each value against the parameter's declared domain.

``dpcube release --param`` values are parsed as JSON where they parse (``3``, ``[1, 2]``,
``true``) and kept as text otherwise; :func:`coerce_params` then checks each against the
mechanism's declaration of that parameter (:class:`dpcube.mechanisms.params.ParamSpec`: type,
bounds, choices), the same check its constructor makes, and refuses a value outside it with one
line naming the mechanism, the parameter, the value and the domain. A parameter a mechanism does
not declare falls back to the annotation of its ``__init__`` (a wrong type is refused); names the
constructor does not have are refused by :func:`refuse_unknown_params`.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

from dpcube.errors import DPCubeError, ParameterError, UsageError

_NAMES = {int: "an integer", float: "a number", str: "text", bool: "true or false"}


def _allowed(hint: Any) -> list[Any] | None:
    """The plain types a hint admits, or None for anything (Any, unknown generics)."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(hint):
            sub = _allowed(arg)
            if sub is None:
                return None
            out.extend(sub)
        return out
    if hint is type(None) or hint is None:
        return [type(None)]
    if typing.get_origin(hint) is typing.Literal:
        return [type(v) for v in typing.get_args(hint)]
    base = origin or hint
    if base in (int, float, str, bool):
        return [base]
    if base in (list, tuple, collections.abc.Sequence):
        return [list]
    if base in (dict, collections.abc.Mapping):
        return [dict]
    return None


def _check(value: Any, allowed: list[Any]) -> tuple[bool, Any]:
    if isinstance(value, bool):
        return bool in allowed, value
    if value is None:
        return type(None) in allowed, value
    if isinstance(value, int):
        if int in allowed:
            return True, value
        return float in allowed, float(value)
    if isinstance(value, float):
        if float in allowed:
            return True, value
        if int in allowed and value.is_integer():
            return True, int(value)
        return False, value
    if isinstance(value, str):
        return str in allowed, value
    if isinstance(value, list):
        return list in allowed, value
    if isinstance(value, dict):
        return dict in allowed, value
    return False, value


#: Constructor arguments set by their own ``dpcube release`` flags, never by ``--param``.
PRIVACY_FLAGS = ("epsilon", "delta", "neighbour")


def refuse_unknown_params(cls: Any, params: dict[str, Any]) -> None:
    """Refuse a ``--param`` name that ``cls``'s constructor does not take (or that has a flag of
    its own: ``--epsilon``, ``--delta``, ``--neighbour``), naming the names it accepts."""
    accepted = cls.accepted_params()
    for key in params:
        if key not in accepted:
            flag = f"--{key.replace('_', '-')}" if key in PRIVACY_FLAGS else None
            hint = f"use {flag}" if flag else "accepted: " + (", ".join(accepted) or "none")
            raise ParameterError(f"--param {key}: {cls.name} has no such parameter ({hint})")


def coerce_params(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` checked against ``cls``'s declared domains (ints widened to float where a
    number is expected, ``2.0`` narrowed to 2 where an integer is;
    :class:`~dpcube.errors.ParameterError` outside the domain), undeclared ones against
    ``cls.__init__``'s annotations (:class:`UsageError` on a wrong type)."""
    try:
        hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    except Exception:
        hints = {}
    specs_of = getattr(cls, "param_spec_map", None)
    specs = specs_of() if callable(specs_of) else {}
    out: dict[str, Any] = {}
    for name, value in params.items():
        if name in specs:
            owner = getattr(cls, "name", cls.__name__)
            out[name] = specs[name].check(owner, value, flag=f"--param {name}")
            continue
        allowed = _allowed(hints[name]) if name in hints else None
        if allowed is None:
            out[name] = value
            continue
        ok, coerced = _check(value, allowed)
        if not ok:
            expected = " or ".join(
                dict.fromkeys(
                    "null" if t is type(None) else "a list" if t is list else
                    "a mapping" if t is dict else _NAMES.get(t, t.__name__)
                    for t in allowed
                )
            )  # fmt: skip
            raise UsageError(
                f"--param {name}={value!r}: {getattr(cls, 'name', cls.__name__)} expects "
                f"{expected} for {name!r}"
            )
        out[name] = coerced
    return out


def bootstrap_runs(text: str) -> int:
    """``--bootstrap-runs N``: 0 (store none) or a number of replicates the bootstrap allows
    (:func:`dpcube.release.uncertainty.check_runs`), refused while the command line is parsed,
    before anything is counted or charged (a :class:`UsageError`: one line, exit 2)."""
    from dpcube.release.uncertainty import check_runs

    try:
        runs = int(text)
        return 0 if runs == 0 else check_runs(runs)
    except (ValueError, DPCubeError) as exc:
        raise UsageError(
            f"--bootstrap-runs must be 0 (store none) or a number of replicates the bootstrap "
            f"allows: {exc}"
        ) from None


def query_runs(text: str) -> int:
    """``--runs N``: a number of replicates the bootstrap allows."""
    from dpcube.release.uncertainty import check_runs

    try:
        return check_runs(int(text))
    except (ValueError, DPCubeError) as exc:
        raise UsageError(f"--runs {text}: {exc}") from None


__all__ = [
    "PRIVACY_FLAGS",
    "bootstrap_runs",
    "coerce_params",
    "query_runs",
    "refuse_unknown_params",
]
