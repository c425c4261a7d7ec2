"""The sections of the HTML report, one function per kind of picture; each reads a loaded
release (its answers, intervals and manifest metadata) and returns HTML.

Every figure and table carries the uncertainty of what it shows, labelled for what it is
(:func:`uncertainty_caption`): an interval from the exact noise sd, a parametric-bootstrap
interval, or no error estimate and why (:mod:`dpcube.release.uncertainty`).

Sizes are capped so that a report stays readable and quick to write; every cap that applies is
said on the page (:data:`MAX_BARS`, :data:`MAX_HEAT_CELLS`, :data:`MAX_PAIRS`, :data:`MAX_GRID`,
:data:`MAX_OUTLINED`, :data:`MAX_TABLE_ROWS`; a release kind caps what it describes itself, e.g.
:attr:`dpcube.mechanisms.census.release.CensusRelease.REPORT_REGIONS`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import DPCubeError
from dpcube.release.base import Release, publication_warning
from dpcube.release.guarantee import NEIGHBOURS, guarantee_sentences, guarantee_tables, plain_value
from dpcube.release.uncertainty import DEFAULT_RUNS, Uncertainty
from dpcube.release.views import (
    ReportBars,
    ReportChoice,
    ReportFigure,
    ReportSection,
    ReportTable,
)
from dpcube.report import figures
from dpcube.report.html import esc, figure, key_value_table, slug, table, with_interval
from dpcube.schema import BoxedQuery, Nominal, Ordinal, Spatial

#: Bootstrap replicates of ``dpcube report`` (``dpcube query`` uses 200): every figure's
#: intervals come from one set of replicates, so a report costs ``REPORT_RUNS`` re-runs of the
#: mechanism (on a 256 x 256 HTF release, about 0.2 CPU s each); ``--runs`` changes it.
REPORT_RUNS = 50
#: Bootstrap replicates of the report ``dpcube release`` writes: the fewest accepted
#: (:data:`dpcube.release.uncertainty.MIN_RUNS`), so that releasing stays quick; the report says
#: so, and ``dpcube report REL --runs 200`` rewrites it with finer intervals.
RELEASE_REPORT_RUNS = 20
#: CPU seconds the report of ``dpcube release`` may spend on the bootstrap (one replicate is
#: timed first); beyond it the figures show the noise sd, labelled as noise only, not the error.
RELEASE_BOOTSTRAP_BUDGET_S = 10.0
#: Most bars of a 1-D marginal; a longer attribute is shown in consecutive blocks of bins.
MAX_BARS = 200
#: Most cells of a 2-D marginal heat map; larger pairs are left out (and listed).
MAX_HEAT_CELLS = 10_000
#: Most 2-D marginals per report (pairs in schema order).
MAX_PAIRS = 10
#: Most display rows/columns of a spatial heat map; a finer grid is shown in blocks of cells.
MAX_GRID = 100
#: Most height, in CSS pixels, of a map (a tall area): with its heading it fits on a printed page.
MAP_MAX_HEIGHT = 760
#: Most leaf rectangles outlined on a spatial heat map (the largest ones).
MAX_OUTLINED = 1500
#: Most rows of a table (cuboid, leaves); the rest is in ``dpcube export``.
MAX_TABLE_ROWS = 200


@dataclass(frozen=True)
class ReportOptions:
    """What the report's uncertainty is computed with: the interval ``level``; the bootstrap's
    ``runs`` (None: the replicates saved with the release, if it has them, else
    ``default_runs``) and ``seed`` (None: OS entropy). Every figure shares one set of replicates."""

    level: float = 0.95
    runs: int | None = None
    seed: int | None = None
    default_runs: int = REPORT_RUNS
    #: CPU seconds the bootstrap was estimated to need when it was skipped for its cost
    #: (:func:`noise_only`); None: not skipped.
    skipped_bootstrap_s: float | None = None


#: The reason of an uncertainty the report computed from the noise sd alone (bootstrap skipped).
NOISE_ONLY = "noise sd only, NOT the error"


def noise_only(release: Release, queries: Sequence[Any], level: float) -> Uncertainty:
    """Answers with ``+- z noise sd`` ranges where the noise sd is known (NaN elsewhere), labelled
    :data:`NOISE_ONLY`: for a bootstrap release whose bootstrap was skipped for its cost."""
    answers = np.asarray(release.answer_many(queries), dtype=np.float64)
    sd = np.sqrt(np.asarray(release.variance_many(queries), dtype=np.float64))
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    nan = np.full(len(answers), np.nan)
    return Uncertainty(
        answers, nan, sd, answers - z * sd, answers + z * sd, nan, "none", NOISE_ONLY, level
    )


def bootstrap_arguments(release: Release, options: ReportOptions) -> tuple[int | None, int | None]:
    """``(runs, seed)`` for :meth:`Release.uncertainty`: ``(None, None)`` when the release carries
    saved replicates and no number was asked for (they are used as saved, nothing re-runs)."""
    if options.runs is None and getattr(release, "stored_replicates", None) is not None:
        return None, None
    return (options.default_runs if options.runs is None else options.runs), options.seed


def estimate(release: Release, queries: Sequence[Any], options: ReportOptions) -> Uncertainty:
    """The release's answers to ``queries`` with their uncertainty (:meth:`Release.uncertainty`)."""
    if options.skipped_bootstrap_s is not None:
        return noise_only(release, queries, options.level)
    runs, seed = bootstrap_arguments(release, options)
    u: Uncertainty = release.uncertainty(queries, level=options.level, runs=runs, seed=seed)
    return u


def uncertainty_caption(u: Uncertainty) -> str:
    """The line under a figure or table saying what its intervals are.

    >>> nan = np.full(1, np.nan)
    >>> u = Uncertainty(np.ones(1), np.ones(1), np.ones(1), nan, nan, np.zeros(1), "exact", "linear", 0.95)
    >>> uncertainty_caption(u)[:78]
    'Error bars and intervals: 95% interval = estimate +- 1.96 x the exact noise sd'
    """
    pct = f"{100 * u.level:g}%"
    if u.kind == "bound":
        return (
            f"Error bars and intervals: {pct} bound interval, valid on any data ({u.reason}): it "
            "assumes nothing about the data, so it is wider than a model-based interval."
        )
    if u.kind == "exact":
        z = NormalDist().inv_cdf(0.5 + u.level / 2.0)
        return (
            f"Error bars and intervals: {pct} interval = estimate +- {z:.2f} x the exact noise sd "
            "(normal approximation). The estimate is linear in the noise and unbiased: the noise "
            "is its whole error."
        )
    if u.kind == "bootstrap":
        coarse = (
            f" {u.runs} runs give a coarse interval (dpcube query uses {DEFAULT_RUNS}; "
            f"dpcube report REL --runs {DEFAULT_RUNS} rewrites this file with more)."
            if u.runs < DEFAULT_RUNS
            else ""
        )
        hidden = (
            " The bootstrap cannot see how the records lie inside one released leaf."
            if "uniformity" in u.reason
            else ""
        )
        return (
            f"Error bars and intervals: {pct} parametric-bootstrap interval from {u.runs} re-runs "
            f"of the mechanism on the release itself (no budget spent), covering the error with "
            f"its bias, not only the noise ({u.reason}).{hidden}{coarse} NOT TRUSTED: a "
            "model-based interval, not valid by construction on every data set."
        )
    if u.reason == NOISE_ONLY:
        z = NormalDist().inv_cdf(0.5 + u.level / 2.0)
        bars = (
            f"Error bars: estimate +- {z:.2f} x the noise sd, NOISE SD ONLY, NOT THE ERROR"
            if np.isfinite(u.noise_sd).any()
            else "No error bars (this release does not know its noise sd)"
        )
        return (
            f"{bars}: the estimate is also biased, which only the parametric bootstrap measures. "
            "The bootstrap was skipped to keep dpcube release quick; dpcube report REL computes "
            "it (it re-runs the mechanism on the release; no budget spent)."
        )
    reason = (
        u.reason if u.reason.startswith("no error estimate") else f"no error estimate: {u.reason}"
    )
    return f"No error bars: {reason}."


# -- the guarantee ----------------------------------------------------------------------------


def guarantee_section(release: Release, options: ReportOptions, kind_reason: str) -> str:
    """What was released and under which guarantee (the manifest's metadata, nothing else): a
    banner, the guarantee in sentences, a summary table and the small tables of the mechanism's
    parameters, sensitivities, noise and notes (:mod:`dpcube.release.guarantee`; no JSON)."""
    m = release.metadata
    warning = publication_warning(m)
    if warning:
        banner = f'<div class="banner not-publish" id="publication">{esc(warning)}</div>'
    else:
        banner = (
            '<div class="banner publish" id="publication">For publication: noise from the '
            "operating system's entropy, charged once to the data set's budget ledger.</div>"
        )
    rows: list[tuple[str, str]] = [
        ("release id", f"<code>{esc(m.release_id)}</code>"),
        ("created", esc(m.created)),
        ("dpcube version", esc(m.library_version)),
        ("release kind", esc(release.kind)),
        ("mechanism", f"<code>{esc(m.mechanism)}</code>"),
        ("epsilon", esc(f"{m.epsilon:g}")),
        ("delta", esc("0 (pure epsilon-DP)" if not m.delta else f"{m.delta:g}")),
        ("neighbour", esc(f"{m.neighbour}: {NEIGHBOURS.get(m.neighbour, '')}".rstrip(": "))),
        ("privacy unit", esc(_unit_words(m.privacy_unit))),
        ("for publication", esc("yes" if m.for_publication else f"NO ({warning})")),
        ("error estimates", esc(f"{kind_reason}; intervals at level {options.level:g}")),
    ]
    rows += [
        (
            "declared public",
            esc(
                f"{d.get('figure')} = {plain_value(d.get('value'))} (declared by the "
                f"{d.get('declared_by')}: {d.get('how')})"
            ),
        )
        for d in m.declared_public
    ]
    sentences = " ".join(guarantee_sentences(m, warning))
    details = "".join(
        f"<h3>{esc(title)}</h3>"
        + key_value_table(
            f"table-guarantee-{slug(title.lower())}", [(esc(k), esc(v)) for k, v in items]
        )
        for title, items in guarantee_tables(m)
    )
    return (
        '<section id="guarantee"><h2>What was released, under which guarantee</h2>'
        f'{banner}<p id="guarantee-sentences">{esc(sentences)}</p>'
        f"{key_value_table('table-guarantee', rows)}{details}</section>\n"
    )


# -- marginals of a release over a schema -----------------------------------------------------


def _blocks(n: int, most: int) -> list[tuple[int, int]]:
    """Consecutive inclusive index blocks covering ``range(n)``, at most ``most`` of them.

    >>> _blocks(5, 10), _blocks(5, 2)
    ([(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)], [(0, 2), (3, 4)])
    """
    step = max(1, math.ceil(n / most))
    return [(i, min(i + step, n) - 1) for i in range(0, n, step)]


def _bin_labels(attribute: Any) -> list[str]:
    if isinstance(attribute, Ordinal | Nominal):
        return [str(x) for x in attribute.labels]
    return [str(i) for i in range(attribute.shape[0])]


def _boxed(release: Release, constraints: dict[str, Any], axes: dict[int, tuple[int, int]]) -> Any:
    """A query of the release's schema whose box is known (every other axis: its full range)."""
    assert release.schema is not None
    box = np.array([[0, n - 1] for n in release.schema.shape], dtype=np.int64)
    for axis, (lo, hi) in axes.items():
        box[axis] = (lo, hi)
    return BoxedQuery(constraints, box)


def one_way(
    release: Release, name: str, options: ReportOptions
) -> tuple[list[str], Uncertainty, bool]:
    """The 1-D marginal of attribute ``name``: labels, estimates with uncertainty, and whether
    bins were grouped into blocks (:data:`MAX_BARS`)."""
    assert release.schema is not None
    attribute = release.schema[name]
    axis = release.schema.axis_slice(name).start
    labels = _bin_labels(attribute)
    blocks = _blocks(len(labels), MAX_BARS)
    queries = [_boxed(release, {name: {"bins": [lo, hi]}}, {axis: (lo, hi)}) for lo, hi in blocks]
    shown = [labels[lo] if lo == hi else f"{labels[lo]} .. {labels[hi]}" for lo, hi in blocks]
    return shown, estimate(release, queries, options), len(blocks) < len(labels)


def two_way(
    release: Release, a: str, b: str, options: ReportOptions
) -> tuple[list[str], list[str], Uncertainty]:
    """The 2-D marginal of ``a`` x ``b``: labels of each and the estimates (``a`` major)."""
    assert release.schema is not None
    schema = release.schema
    ia, ib = schema.axis_slice(a).start, schema.axis_slice(b).start
    la, lb = _bin_labels(schema[a]), _bin_labels(schema[b])
    queries = [
        _boxed(release, {a: {"bins": [i, i]}, b: {"bins": [j, j]}}, {ia: (i, i), ib: (j, j)})
        for i in range(len(la))
        for j in range(len(lb))
    ]
    return la, lb, estimate(release, queries, options)


def marginal_sections(release: Release, options: ReportOptions) -> str:
    """1-D marginals as bar charts with error bars, 2-D marginals as heat maps (hover: estimate
    and interval), and a spatial attribute as a heat map on lat/lon axes."""
    assert release.schema is not None
    schema = release.schema
    parts: list[str] = []
    skipped: list[str] = []
    try:
        total = estimate(release, [_boxed(release, {}, {})], options)
        shown = with_interval(total.answers[0], total.lower[0], total.upper[0], total.trusted(0))
        parts.append(
            f'<p id="total">Released total: <b>{shown}</b></p>'
            f'<p class="dpcube-uncertainty">{esc(uncertainty_caption(total))}</p>'
        )
    except DPCubeError as exc:
        skipped.append(f"the total ({exc})")
    for attribute in schema.attributes:
        name = attribute.name
        if isinstance(attribute, Spatial):
            try:
                parts.append(spatial_grid_figure(release, options, outlines=None))
            except DPCubeError as exc:  # a data cube that published no cuboid holding `name`
                skipped.append(f"{name} ({exc})")
            continue
        try:
            labels, u, grouped = one_way(release, name, options)
        except DPCubeError as exc:  # a data cube that published no cuboid holding `name`
            skipped.append(f"{name} ({exc})")
            continue
        spec = figures.bar_chart(labels, u.answers, u.lower, u.upper, xlabel=name)
        note = (
            f" Bins are grouped into {len(labels)} consecutive blocks (at most {MAX_BARS} bars)."
            if grouped
            else ""
        )
        parts.append(
            figure(f"fig-marginal-{slug(name)}", f"Released counts by {name}", spec,
                   uncertainty_caption(u) + note)
        )  # fmt: skip
    plain = [a.name for a in schema.attributes if not isinstance(a, Spatial)]
    pairs = [
        (a, b)
        for a, b in itertools.combinations(plain, 2)
        if schema[a].shape[0] * schema[b].shape[0] <= MAX_HEAT_CELLS
    ]
    large = [
        f"{a} x {b}"
        for a, b in itertools.combinations(plain, 2)
        if schema[a].shape[0] * schema[b].shape[0] > MAX_HEAT_CELLS
    ]
    for a, b in pairs[:MAX_PAIRS]:
        try:
            la, lb, u = two_way(release, a, b, options)
        except DPCubeError as exc:
            skipped.append(f"{a} x {b} ({exc})")
            continue
        shape = (len(la), len(lb))
        spec = figures.heat_map(
            la, lb, u.answers.reshape(shape).T, u.lower.reshape(shape).T,
            u.upper.reshape(shape).T, xlabel=a, ylabel=b,
        )  # fmt: skip
        parts.append(
            figure(f"fig-marginal-{slug(a)}-{slug(b)}", f"Released counts by {a} and {b}",
                   spec, uncertainty_caption(u) + " Hover over a cell for its interval.",
                   height=max(360, min(900, 24 * len(lb) + 140)))
        )  # fmt: skip
    notes: list[str] = []
    if len(pairs) > MAX_PAIRS:
        notes.append(
            f"{len(pairs) - MAX_PAIRS} further pairs of attributes are not drawn (at most "
            f"{MAX_PAIRS} two-way marginals): "
            + ", ".join(f"{a} x {b}" for a, b in pairs[MAX_PAIRS:])
        )
    if large:
        notes.append(
            f"not drawn, more than {MAX_HEAT_CELLS:,} cells: {', '.join(large)} "
            "(use dpcube query --group-by)"
        )
    if skipped:
        notes.append("not available from this release: " + "; ".join(skipped))
    note_html = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    return (
        '<section id="marginals"><h2>Marginals</h2>'
        '<p class="note">Each figure sums the released cells over the other attributes '
        "(post-processing of the release, no budget spent).</p>"
        f"{''.join(parts)}{note_html}</section>\n"
    )


# -- spatial heat map -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Grid:
    """The 2-D grid a spatial picture is drawn on: row/column edges, axis names and a query for
    a block of cells."""

    row_edges: NDArray[np.float64]
    col_edges: NDArray[np.float64]
    row_label: str
    col_label: str
    query: Callable[[int, int, int, int], Any]
    #: Rows are latitudes and columns longitudes, in degrees (a map, drawn to its true shape).
    degrees: bool = False


def _grid(release: Release) -> _Grid:
    assert release.schema is not None
    schema = release.schema
    spatial = [a for a in schema.attributes if isinstance(a, Spatial)]
    if spatial:
        attribute = spatial[0]
        start = schema.axis_slice(attribute.name).start
        lat, lon = (np.asarray(s.edges, dtype=np.float64) for s in attribute.scales)
        name = attribute.name

        def query(r0: int, r1: int, c0: int, c1: int) -> Any:
            return _boxed(
                release, {name: {"bins": [[r0, r1], [c0, c1]]}},
                {start: (r0, r1), start + 1: (c0, c1)},
            )  # fmt: skip

        return _Grid(lat, lon, "latitude (degrees)", "longitude (degrees)", query, degrees=True)
    rows, cols = schema.attributes[:2]  # a leaf release over two ordinal axes

    def ordinal_query(r0: int, r1: int, c0: int, c1: int) -> Any:
        return _boxed(
            release, {rows.name: {"bins": [r0, r1]}, cols.name: {"bins": [c0, c1]}},
            {0: (r0, r1), 1: (c0, c1)},
        )  # fmt: skip

    def edges(a: Any) -> NDArray[np.float64]:
        return np.asarray(getattr(a, "edges", np.arange(a.shape[0] + 1)), dtype=np.float64)

    return _Grid(edges(rows), edges(cols), rows.name, cols.name, ordinal_query)


def spatial_grid_figure(
    release: Release, options: ReportOptions, outlines: NDArray[np.int64] | None
) -> str:
    """The released counts on the grid (blocks of at most :data:`MAX_GRID` per axis) on lat/lon
    axes, with the rectangles ``outlines`` (rows ``row0, row1, col0, col1``) drawn on top."""
    g = _grid(release)
    nr, nc = len(g.row_edges) - 1, len(g.col_edges) - 1
    rb, cb = _blocks(nr, MAX_GRID), _blocks(nc, MAX_GRID)
    queries = [g.query(r0, r1, c0, c1) for r0, r1 in rb for c0, c1 in cb]
    u = estimate(release, queries, options)
    shape = (len(rb), len(cb))
    row_edges = np.asarray([g.row_edges[lo] for lo, _ in rb] + [g.row_edges[nr]])
    col_edges = np.asarray([g.col_edges[lo] for lo, _ in cb] + [g.col_edges[nc]])
    shapes: list[dict[str, Any]] = []
    note = ""
    if outlines is not None and len(outlines):
        area = (outlines[:, 1] - outlines[:, 0]) * (outlines[:, 3] - outlines[:, 2])
        keep = np.argsort(-area, kind="stable")[:MAX_OUTLINED]
        for r0, r1, c0, c1 in outlines[keep].tolist():
            shapes.append(
                figures.rectangle(g.col_edges[c0], g.col_edges[c1], g.row_edges[r0],
                                  g.row_edges[r1])
            )  # fmt: skip
        note = f" White outlines: the {len(keep):,} released leaf rectangles" + (
            f" (the largest {MAX_OUTLINED:,} of {len(outlines):,})."
            if len(outlines) > MAX_OUTLINED
            else "."
        )
    blocked = len(rb) < nr or len(cb) < nc
    if blocked:
        note += (
            f" The {nr:,} x {nc:,} grid is shown in {len(rb)} x {len(cb)} blocks; each block's "
            "value is the released count inside it."
        )
    spec = figures.heat_map(
        col_edges, row_edges, u.answers.reshape(shape), u.lower.reshape(shape),
        u.upper.reshape(shape), xlabel=g.col_label, ylabel=g.row_label, categorical=False,
        shapes=shapes, hover_label="released count", degrees=g.degrees,
    )  # fmt: skip
    height = 620
    if g.degrees:
        # about 700 px of plotting width on a screen, so the map's height follows its shape,
        # within what fits on a printed page with its heading
        aspect = figures.map_aspect(col_edges, row_edges)
        height = int(min(MAP_MAX_HEIGHT, max(360, 700 / aspect + 100)))
        note += (
            f" Drawn to the area's shape: a degree of longitude is cos({_mid(row_edges):.2f}°) = "
            f"{math.cos(math.radians(_mid(row_edges))):.3f} times as wide as a degree of latitude."
        )
    return figure(
        "fig-spatial", "Released counts on the map", spec,
        uncertainty_caption(u) + " Hover over a block for its interval." + note, height=height,
    )  # fmt: skip


def _mid(edges: NDArray[np.float64]) -> float:
    return float(edges[0] + edges[-1]) / 2.0


def estimate_table(release: Release, spec: ReportTable, options: ReportOptions) -> str:
    """A table a release describes (:class:`dpcube.release.views.ReportTable`): its labels, then
    each row's estimates with their intervals, then its note and what the intervals are."""
    u = estimate(release, spec.queries, options)
    columns = list(spec.labels)
    headers = list(spec.value_headers) or [spec.value_header]
    per = len(headers)
    rows = [
        [esc(spec.labels[c][i]) for c in columns]
        + [
            with_interval(u.answers[k], u.lower[k], u.upper[k], u.trusted(k))
            for k in range(i * per, (i + 1) * per)
        ]
        for i in range(len(spec.queries) // per)
    ]
    heading = f"<h3>{esc(spec.heading)}</h3>" if spec.heading else ""
    note = f'<p class="note">{esc(spec.note)}</p>' if spec.note else ""
    return (
        heading
        + table(slug(spec.ident), [*columns, *headers], rows, labels=len(columns))
        + note
        + f'<p class="dpcube-uncertainty">{esc(uncertainty_caption(u))}</p>'
    )


def chosen_tables(release: Release, spec: ReportChoice, options: ReportOptions) -> str:
    """Tables shown one at a time (:class:`dpcube.release.views.ReportChoice`): a list of their
    names, and each table in a block of its own, all but the chosen one hidden."""
    ident = slug(spec.ident)
    entries = "".join(
        f'<option value="{i}">{esc(name)}</option>' for i, (name, _) in enumerate(spec.choices)
    )
    blocks = "".join(
        f'<div class="{ident}" id="{ident}-{i}"{"" if i == 0 else " hidden"}>'
        + estimate_table(release, chosen, options)
        + "</div>"
        for i, (_, chosen) in enumerate(spec.choices)
    )
    return (
        f'<h3>{esc(spec.heading)}</h3><label for="{ident}-select">{esc(spec.label)} </label>'
        f'<select id="{ident}-select">{entries}</select>{blocks}'
        f"<script>document.getElementById('{ident}-select').addEventListener('change',"
        f"function(e){{document.querySelectorAll('.{ident}').forEach(function(d){{"
        f"d.hidden=(d.id!=='{ident}-'+e.target.value);}});}});</script>"
    )


def bars_figure(release: Release, spec: ReportBars, options: ReportOptions) -> str:
    """A bar chart a release describes (:class:`dpcube.release.views.ReportBars`): one bar per
    query, with its interval as error bars."""
    u = estimate(release, spec.queries, options)
    chart = figures.bar_chart(
        list(spec.labels), u.answers, u.lower, u.upper, xlabel=spec.xlabel, ylabel=spec.ylabel
    )
    return figure(slug(spec.ident), spec.title, chart, uncertainty_caption(u))


def release_section(release: Release, spec: ReportSection, options: ReportOptions) -> str:
    """A section a release describes (:class:`dpcube.release.views.ReportSection`): its title
    and note, the map of its grid with its outlines (when it has them), its charts, its
    tables."""
    note = f'<p class="note">{esc(spec.note)}</p>' if spec.note else ""
    outlines = spec.map_outlines
    drawn = "" if outlines is None else spatial_grid_figure(release, options, outlines)
    charts = "".join(bars_figure(release, c, options) for c in spec.charts)
    tables = "".join(
        chosen_tables(release, t, options)
        if isinstance(t, ReportChoice)
        else estimate_table(release, t, options)
        for t in spec.tables
    )
    return (
        f'<section id="{esc(spec.ident)}"><h2>{esc(spec.title)}</h2>'
        f"{note}{drawn}{charts}{tables}</section>\n"
    )


# -- the plan of --mechanism auto -------------------------------------------------------------


#: How the report draws each family of figures a release may ask for
#: (:meth:`dpcube.release.base.Release.report_parts`).
FIGURES: dict[ReportFigure, Callable[[Any, ReportOptions], str]] = {
    "marginals": marginal_sections,
}


def report_part(
    release: Release, part: ReportFigure | ReportSection, options: ReportOptions
) -> str:
    """One part of the report of ``release``: a family of figures, or a section it describes."""
    if isinstance(part, ReportSection):
        return release_section(release, part, options)
    return FIGURES[part](release, options)


def plan_section(plan: dict[str, Any]) -> str:
    """The plan ``--mechanism auto`` made (from the schema and workload, no data): every
    candidate's expected error, and the matrix-mechanism strategies against the lower bound."""
    parts = [
        f"<p>Workload <code>{esc(plan.get('workload'))}</code>: {esc(plan.get('queries'))} "
        f"queries over {esc(plan.get('cells'))} cells. Chosen: <b>{esc(plan.get('recommended'))}"
        f"</b>. {esc(plan.get('reason', ''))}</p>"
    ]
    rows = [
        [
            esc(c.get("label")),
            esc(c.get("mechanism")),
            esc(c.get("basis")),
            esc("n/a" if c.get("expected_error") is None else f"{c['expected_error']:.4g}"),
            esc(c.get("note") or ""),
        ]
        for c in plan.get("candidates", [])
    ]
    parts.append(
        table("table-plan", ["candidate", "mechanism", "basis", "expected total squared error",
                             "note"], rows, labels=3)
    )  # fmt: skip
    exact = [
        c for c in plan.get("candidates", [])
        if c.get("basis") == "exact" and isinstance(c.get("expected_error"), int | float)
    ]  # fmt: skip
    if exact:
        spec = figures.error_chart(
            [str(c.get("label")) for c in exact],
            [float(c["expected_error"]) for c in exact],
            xlabel="candidate mechanism",
        )
        parts.append(
            figure("fig-plan", "Expected error of each candidate on the workload", spec,
                   "Expected total squared error over the workload's queries, computed exactly "
                   "from the schema and the workload (no data read): no noise is drawn, so there "
                   "is no interval. Candidates whose error rests on benchmarks are in the table.")
        )  # fmt: skip
    matrix = plan.get("matrix") or {}
    strategies = matrix.get("strategies") or {}
    bound = matrix.get("svdb")
    if strategies and isinstance(bound, int | float):
        ordered = sorted(strategies.items(), key=lambda kv: kv[1].get("nominal_error", math.inf))
        is_bound = bool(matrix.get("svdb_is_lower_bound"))
        spec = figures.error_chart(
            [n for n, _ in ordered],
            [float(r.get("nominal_error", math.nan)) for _, r in ordered],
            xlabel="matrix-mechanism strategy",
            bound=float(bound),
            bound_label="svdb lower bound" if is_bound else "svdb (Gaussian bound, for scale)",
        )
        caption = (
            "Expected total squared error of each matrix-mechanism strategy (nominal noise "
            "variance), computed from the workload alone: no noise is drawn, so there is no "
            "interval. Dashed line: "
            + (
                "the svdb lower bound of the Gaussian matrix mechanism."
                if is_bound
                else "svdb, the Gaussian mechanism's lower bound, shown for scale "
                "(it is not a bound for Laplace noise)."
            )
        )
        parts.append(
            figure("fig-plan-strategies", "Matrix-mechanism strategies against the lower bound",
                   spec, caption)
        )  # fmt: skip
    return f'<section id="plan"><h2>The plan (--mechanism auto)</h2>{"".join(parts)}</section>\n'


def _unit_words(unit: Any) -> str:
    """The manifest's privacy unit in words."""
    if not isinstance(unit, dict):
        return "one row (a neighbouring data set adds or removes one row)"
    bounds = ", ".join(
        f"{k.replace('_', ' ')} {v}" for k, v in unit.items() if k != "column" and v is not None
    )
    column = f" of column {unit.get('column')!r}" if unit.get("column") else ""
    return f"one unit{column}, all its rows ({bounds}; the rows beyond were not counted)"


__all__ = [
    "MAX_BARS",
    "MAX_GRID",
    "MAX_HEAT_CELLS",
    "MAX_OUTLINED",
    "MAX_PAIRS",
    "MAX_TABLE_ROWS",
    "NOISE_ONLY",
    "RELEASE_BOOTSTRAP_BUDGET_S",
    "RELEASE_REPORT_RUNS",
    "REPORT_RUNS",
    "ReportOptions",
    "bars_figure",
    "bootstrap_arguments",
    "chosen_tables",
    "estimate",
    "estimate_table",
    "guarantee_section",
    "marginal_sections",
    "noise_only",
    "plan_section",
    "release_section",
    "report_part",
    "spatial_grid_figure",
    "uncertainty_caption",
]
