"""Each release kind answers for itself: the size of its labelled table, its explorer view, its
export tables and its report's parts are methods on its class, read by the service, the report
and the command line without naming kinds."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest

from dpcube.release.base import Release, load_release
from dpcube.release.cells import CellRelease
from dpcube.release.views import ReportChoice, ReportFigure, ReportPart, ReportSection, ReportTable
from dpcube.report import sections
from dpcube.report.build import build_report
from dpcube.serve.served import ServedRelease

WHERE: dict[str, dict[str, Any]] = {
    "cells": {"age": [1, 2]},
    "cube": {"a": "x"},
    "grid": {"loc": [[10.0, 12.0], [20.0, 24.0]]},
    "census": {"region": "GA"},
}
#: What each kind's explorer view holds (a data cube its cuboids, a census release its region
#: hierarchy, a spatial one its bounds and leaves, plain cells nothing beyond the schema).
VIEW_KEYS = {
    "cells": set(),
    "cube": {"cuboids"},
    "grid": {"bounds", "leaves"},
    "census": {"hierarchy"},
}


@pytest.fixture(scope="module")
def releases(release_dirs: dict[str, Path]) -> dict[str, Release]:
    return {name: load_release(path) for name, path in release_dirs.items()}


@pytest.mark.parametrize("name", sorted(WHERE))
def test_table_size_is_the_labelled_tables_row_count(
    releases: dict[str, Release], name: str
) -> None:
    release = releases[name]
    cuboid = ["a"] if name == "cube" else None
    rows = release.to_arrow(cuboid=cuboid).num_rows
    assert release.table_size(cuboid, {}) == rows > 0
    where = WHERE[name]
    from dpcube.release.tables import labelled_table

    narrowed = labelled_table(release, cuboid=cuboid, where=where).num_rows
    # an upper bound worked out before the table is built (census: every region x size)
    assert narrowed <= release.table_size(cuboid, where)
    if name != "census":  # exact; a spatial release's rows are then grid cells, not leaves
        assert release.table_size(cuboid, where) == narrowed
    if name in ("cells", "cube"):
        assert narrowed < rows


@pytest.mark.parametrize("name", sorted(WHERE))
def test_the_description_carries_the_kinds_own_view(
    releases: dict[str, Release], release_dirs: dict[str, Path], name: str
) -> None:
    view = releases[name].explorer_view()
    assert set(view) == VIEW_KEYS[name]
    described = ServedRelease.load(release_dirs[name], runs=20, seed=1).describe()
    assert {k: described[k] for k in view} == view


def test_export_tables_one_per_published_cuboid(releases: dict[str, Release]) -> None:
    cube = releases["cube"]
    published = [list(c) for c in cube.published]  # type: ignore[attr-defined]
    assert len(published) > 1 and cube.export_tables() == published
    for name in ("cells", "grid", "census"):
        assert releases[name].export_tables() == [None]
        with pytest.raises(Exception, match="cuboid= applies to data-cube releases"):
            releases[name].table_cuboid(["age"])


def test_report_parts_are_the_kinds_own(releases: dict[str, Release]) -> None:
    assert set(sections.FIGURES) == set(typing.get_args(ReportFigure))
    assert releases["cells"].report_parts(10) == ("marginals",)
    (census,) = releases["census"].report_parts(10)
    assert isinstance(census, ReportSection) and census.ident == "census"
    (bars,) = census.charts
    assert bars.ident == "fig-census-nation" and len(bars.queries) == len(bars.labels)
    nation, drill_down = census.tables
    assert isinstance(nation, ReportTable) and isinstance(drill_down, ReportChoice)
    # one query per region and size column, row by row
    assert len(nation.queries) == len(nation.labels["region"]) * len(nation.value_headers)
    assert all(len(t.labels["region"]) <= 11 for _, t in drill_down.choices)  # itself + 10 rows
    cube, marginals = releases["cube"].report_parts(10)
    assert isinstance(cube, ReportSection) and marginals == "marginals"
    published = releases["cube"].published  # type: ignore[attr-defined]
    assert [t.heading for t in cube.tables] == [
        f"Cuboid: {', '.join(c) or 'total (no attribute)'}" for c in published
    ]
    (grid,) = releases["grid"].report_parts(3)
    assert isinstance(grid, ReportSection) and grid.map_outlines is not None
    (leaves,) = grid.tables  # cut to the 3 leaves with the largest counts, of 4
    assert len(leaves.queries) == 3 and "the 3 leaves with the largest" in leaves.heading
    estimates = releases["grid"].answer_many(leaves.queries)
    assert list(estimates) == sorted(estimates, reverse=True)


def test_a_cut_table_says_so(releases: dict[str, Release]) -> None:
    cube, _ = releases["cube"].report_parts(2)
    assert isinstance(cube, ReportSection)
    cut = [t for t in cube.tables if len(t.queries) == 2 and t.note]
    assert cut and all("dpcube export --cuboid" in str(t.note) for t in cut)


class _NewKind(CellRelease):
    """A kind no front end knows by name: its view and figures are its own."""

    kind = "test_new_kind"

    def explorer_view(self) -> dict[str, Any]:
        return {"note": "drawn by the kind itself"}

    def report_parts(self, max_rows: int) -> tuple[ReportPart, ...]:
        return ()


def test_a_new_kind_is_served_and_reported_without_front_end_changes(
    releases: dict[str, Release], release_dirs: dict[str, Path]
) -> None:
    cells = releases["cells"]
    assert isinstance(cells, CellRelease)
    new = _NewKind.__new__(_NewKind)
    new.__dict__.update(cells.__dict__)
    item = ServedRelease.load(release_dirs["cells"], runs=20, seed=1)
    item.release = new
    described = item.describe()
    assert described["kind"] == "test_new_kind"
    assert described["note"] == "drawn by the kind itself"
    html = build_report(new)
    assert "No pictures for a test_new_kind release yet" in html
    assert "No pictures" not in build_report(cells)
