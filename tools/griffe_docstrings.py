"""A Griffe extension that lets the docstrings' reStructuredText habits render as Markdown in the
API reference (mkdocs.yml, mkdocstrings ``extensions:``), without editing the docstrings.

- doctest examples (``>>> `` lines and the output after them, up to a blank line) become fenced
  ``pycon`` blocks: as plain Markdown a ``>>>`` paragraph is a block quote, and ``x["a"]`` in it a
  link reference;
- a Sphinx role, ``:func:`plan``` or ``:data:`NO_NOISE```, becomes inline code;
- the ``#:`` comment lines right above a module or class attribute (the project's way to document
  a constant) become that attribute's docstring, as Sphinx reads them.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?[a-z]+:`~?!?([^`]+)`")
_FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_docstring(text: str) -> str:
    r"""``text`` with doctest runs fenced and Sphinx roles as code.

    >>> markdown_docstring("Sum.\n\n>>> f(1)\n2\n\nSee :func:`g`.").splitlines()
    ['Sum.', '', '```pycon', '>>> f(1)', '2', '```', '', 'See `g`.']
    """
    out: list[str] = []
    lines = text.splitlines()
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            fenced = not fenced
        if fenced or not line.lstrip().startswith(">>>"):
            out.append(line if fenced else _ROLE.sub(r"`\1`", line))
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


def comment_docstring(source: list[str], lineno: int) -> str | None:
    r"""The text of the ``#:`` comment lines right above line ``lineno`` (1-based) of ``source``.

    >>> comment_docstring(["x = 1", "#: The answer,", "#: always.", "ANSWER = 42"], 4)
    'The answer,\nalways.'
    """
    found: list[str] = []
    i = lineno - 2
    while i >= 0 and source[i].lstrip().startswith("#:"):
        found.append(source[i].lstrip()[2:].removeprefix(" "))
        i -= 1
    return "\n".join(reversed(found)) or None


class MarkdownDocstrings(griffe.Extension):
    """Give attributes their ``#:`` comments as docstrings, then rewrite every docstring with
    :func:`markdown_docstring` as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is None and obj.is_attribute and obj.lineno and obj.filepath:
            lines = obj.lines_collection
            source = lines[obj.filepath] if obj.filepath in lines else []
            text = comment_docstring(source, obj.lineno)
            if text is not None:
                obj.docstring = griffe.Docstring(text, lineno=obj.lineno - 1, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
