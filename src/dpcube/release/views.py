"""What a release kind asks the HTML report to show, as data: the report
(:mod:`dpcube.report.sections`) renders it, the release says what it is.

A release lists its report's parts (:meth:`dpcube.release.base.Release.report_parts`), each
either a :data:`ReportFigure`, a family of figures the report draws from the release's schema
and answers, or a :class:`ReportSection` the release describes itself: a title, a note, bar
charts and tables of estimates given by their labels and queries (the report answers each query
with its interval), tables shown one at a time from a list, and where it has one, the outlines
of its leaves on the map of its spatial grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: Families of figures the report draws from the schema and the answers alone: ``marginals``
#: (one- and two-way marginals of the schema's attributes with intervals).
ReportFigure = Literal["marginals"]


@dataclass(frozen=True)
class ReportTable:
    """A table of estimates: the rows' labels (text, shown as given) and one query per row,
    answered by the report with its interval in the last column (``value_header``).

    ``ident`` names the table for a reader of the page (its element id, which the report makes
    of letters, digits and ``-``); ``note`` follows the table (that it was cut, where to find
    the rest). With ``value_headers`` the table has several value columns: ``queries`` then
    holds one query per row and column, row by row (``queries[row * len(value_headers) +
    column]``). An empty ``heading`` shows none."""

    ident: str
    heading: str
    labels: Mapping[str, Sequence[str]]
    queries: Sequence[Mapping[str, Any]]
    note: str | None = None
    value_header: str = "released count [interval]"
    value_headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportChoice:
    """Tables shown one at a time, the one chosen from a list (a region drilled down):
    ``heading``, the list's ``label``, and one ``(name, table)`` per entry of the list; the first
    is shown until another is chosen. ``ident`` names the list (letters, digits and ``-``)."""

    ident: str
    heading: str
    label: str
    choices: tuple[tuple[str, ReportTable], ...]


@dataclass(frozen=True)
class ReportBars:
    """A bar chart of estimates with their intervals: one bar per query, named by ``labels``."""

    ident: str
    title: str
    labels: Sequence[str]
    queries: Sequence[Mapping[str, Any]]
    xlabel: str
    ylabel: str = "released count"


@dataclass(frozen=True)
class ReportSection:
    """A section of the report: ``title``, an optional ``note``, the map of the spatial grid
    with ``map_outlines`` drawn on it (rectangles ``(r0, r1, c0, c1)`` of grid cells, end
    exclusive) when given, then ``charts``, then ``tables`` (a table, or tables chosen from a
    list)."""

    ident: str
    title: str
    tables: tuple[ReportTable | ReportChoice, ...] = ()
    note: str | None = None
    map_outlines: Any = None
    charts: tuple[ReportBars, ...] = ()


#: One part of a release's report.
ReportPart = ReportFigure | ReportSection

__all__ = [
    "ReportBars",
    "ReportChoice",
    "ReportFigure",
    "ReportPart",
    "ReportSection",
    "ReportTable",
]
