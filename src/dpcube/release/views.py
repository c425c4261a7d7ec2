"""What a release kind asks the HTML report to show, as data: the report
(:mod:`dpcube.report.sections`) renders it, the release says what it is.

A release lists its report's parts (:meth:`dpcube.release.base.Release.report_parts`), each
either a :data:`ReportFigure`, a family of figures the report draws from the release's schema
and answers, or a :class:`ReportSection` the release describes itself: a title, a note, tables
of estimates given by their labels and one query per row (the report answers each query with
its interval), and where it has one, the outlines of its leaves on the map of its spatial grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: Families of figures the report draws from the schema and the answers alone: ``marginals``
#: (one- and two-way marginals of the schema's attributes with intervals) and ``census`` (group
#: sizes per region of a census hierarchy: the nation, its regions, one region drilled down).
ReportFigure = Literal["marginals", "census"]


@dataclass(frozen=True)
class ReportTable:
    """A table of estimates: the rows' labels (text, shown as given) and one query per row,
    answered by the report with its interval in the last column (``value_header``).

    ``ident`` names the table for a reader of the page (its element id, which the report makes
    of letters, digits and ``-``); ``note`` follows the table (that it was cut, where to find
    the rest)."""

    ident: str
    heading: str
    labels: Mapping[str, Sequence[str]]
    queries: Sequence[Mapping[str, Any]]
    note: str | None = None
    value_header: str = "released count [interval]"


@dataclass(frozen=True)
class ReportSection:
    """A section of the report: ``title``, an optional ``note``, the map of the spatial grid
    with ``map_outlines`` drawn on it (rectangles ``(r0, r1, c0, c1)`` of grid cells, end
    exclusive) when given, then ``tables``."""

    ident: str
    title: str
    tables: tuple[ReportTable, ...] = ()
    note: str | None = None
    map_outlines: Any = None


#: One part of a release's report.
ReportPart = ReportFigure | ReportSection

__all__ = ["ReportFigure", "ReportPart", "ReportSection", "ReportTable"]
