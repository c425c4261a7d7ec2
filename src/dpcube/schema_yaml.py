"""Reading a schema's YAML: the scalars as written, no aliases.

Kept apart from :mod:`dpcube.schema` so that only reading a YAML schema file imports PyYAML
(``dpcube query`` reads a release's schema from its JSON manifest and never needs it).
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class _NoAliasLoader(yaml.SafeLoader):
    """A safe loader that refuses aliases: a "billion laughs" file fails at its first alias."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"aliases (*{event.anchor}) are not allowed; write the value out",
                event.start_mark,
            )
        return super().compose_node(parent, index)


class _TextLoader(_NoAliasLoader):
    """Every plain scalar stays the string written (``NO``, ``01``, ``~``)."""


class _CoreLoader(_NoAliasLoader):
    """YAML 1.2 core schema: ``true``/``false``, ``null``/``~``, decimal/0x/0o integers, floats;
    ``yes``/``no``/``on``/``off`` and sexagesimal numbers stay strings."""


# No implicit types at all for the text loader; only the core schema's for the other.
_TextLoader.yaml_implicit_resolvers = {}
_CoreLoader.yaml_implicit_resolvers = {}


def _core_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text.lstrip("+"))
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if digits.startswith("0o"):
        return sign * int(digits[2:], 8)
    return sign * int(digits)


for _tag, _pattern in (
    ("tag:yaml.org,2002:null", r"~|null|Null|NULL|"),
    ("tag:yaml.org,2002:bool", r"true|True|TRUE|false|False|FALSE"),
    ("tag:yaml.org,2002:int", r"[-+]?[0-9]+|[-+]?0o[0-7]+|[-+]?0x[0-9a-fA-F]+"),
    (
        "tag:yaml.org,2002:float",
        r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
    ),
):
    _CoreLoader.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern})$"), None)
_CoreLoader.add_constructor("tag:yaml.org,2002:int", _core_int)

#: Fields whose values are names: read as the text written, whatever YAML would make of them.
_TEXT_FIELDS = ("name", "kind", "column", "columns", "categories", "root")


def _as_text(core: Any, raw: Any, in_mapping: bool) -> Any:
    """``raw`` (all strings) in the shape of ``core``; a null mapping value stays None."""
    if isinstance(core, dict) and isinstance(raw, dict) and len(core) == len(raw):
        return {
            rk: _as_text(cv, rv, True)
            for (_, cv), (rk, rv) in zip(core.items(), raw.items(), strict=True)
        }
    if isinstance(core, dict) or isinstance(raw, dict):
        return core  # keys that collapse differently (``1`` and ``"1"``): keep the typed reading
    if isinstance(core, list) and isinstance(raw, list):
        return [_as_text(c, r, False) for c, r in zip(core, raw, strict=True)]
    return None if in_mapping and core is None else raw


def load_yaml(text: str) -> Any:
    """Load a schema's YAML: numbers by the YAML 1.2 core schema, names (categories, hierarchy
    nodes, columns) as the strings written, aliases refused."""
    core = yaml.load(text, Loader=_CoreLoader)
    raw = yaml.load(text, Loader=_TextLoader)
    if isinstance(core, dict) and isinstance(raw, dict):
        pairs = zip(core.get("attributes") or [], raw.get("attributes") or [], strict=False)
        for c, r in pairs:
            if isinstance(c, dict) and isinstance(r, dict):
                for key in (*_TEXT_FIELDS, "hierarchy"):
                    if key in c and key in r:
                        c[key] = _as_text(c[key], r[key], key == "hierarchy")
    return core


def yaml_error_line(exc: yaml.YAMLError) -> str:
    """A YAML error as one line: the problem and where."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return f"{exc.problem or exc.context or 'syntax error'}{where}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
