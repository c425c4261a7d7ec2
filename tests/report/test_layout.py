"""The report's text and layout as written (no browser; ``tests/browser/test_report_layout.py``
checks the drawn page): the guarantee in sentences and small tables with no JSON, in
``report.html`` and ``report.md``; every table in a box that scrolls sideways; a print layout;
maps whose axes keep the area's true shape and read in degrees.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpcube import Histogram, Identity, Schema, load_release
from dpcube.report import build_report
from dpcube.schema import Spatial

from .test_report import KINDS, saved


def guarantee_html(text: str) -> str:
    section = text.split('<section id="guarantee">', 1)[1].split("</section>", 1)[0]
    return re.sub(r"<[^>]+>", " ", section)


def plotly_layout(text: str, plot_id: str) -> dict[str, Any]:
    """The layout passed to ``Plotly.newPlot`` for the graph ``plot_id``."""
    call = text.split(f'Plotly.newPlot("{plot_id}", ', 1)[1]
    decoder = json.JSONDecoder()
    _, end = decoder.raw_decode(call)  # the data
    layout, _ = decoder.raw_decode(call[end + 2 :])
    assert isinstance(layout, dict)
    return layout


@pytest.mark.parametrize(("mechanism", "case_id"), [k[:2] for k in KINDS],
                         ids=[k[1] for k in KINDS])  # fmt: skip
def test_the_guarantee_is_sentences_and_small_tables(
    mechanism: str, case_id: str, tmp_path: Path
) -> None:
    rel = saved(mechanism, case_id, tmp_path)
    release = load_release(rel)
    text = build_report(release, seed=1)
    words = guarantee_html(text)
    m = release.metadata
    assert f"epsilon = {m.epsilon:g}" in words and "neighbours" in words
    assert "{" not in words and "}" not in words and "&quot;" not in words
    assert 'id="table-guarantee-parameters-of-the-mechanism"' in text
    assert 'id="table-guarantee-noise"' in text
    markdown = (rel / "report.md").read_text()
    assert "{" not in markdown and "}" not in markdown, markdown
    assert "## The guarantee" in markdown and "| --- | --- |" in markdown
    for key in m.params:  # every parameter has its row, named in words
        assert f"| {key.replace('_', ' ')} |" in markdown


def test_every_table_scrolls_in_its_own_box_and_there_is_a_print_layout(tmp_path: Path) -> None:
    text = build_report(load_release(saved("census-hierarchy", "census-dp", tmp_path)), seed=1)
    tables = re.findall(r"(.{0,40})<table ", text)
    assert tables and all(before.endswith('<div class="table-scroll">') for before in tables)
    style = text.split("<style>", 1)[1].split("</style>", 1)[0]
    assert re.search(r"\.table-scroll \{[^}]*overflow-x: auto", style)
    assert "@media print" in style and "@page" in style


def map_release(tmp_path: Path, bbox: tuple[float, float, float, float]) -> Any:
    schema = Schema([Spatial("p", ("lat", "lon"), bbox, (8, 6))])
    counts = np.random.default_rng(1).integers(0, 5, size=schema.shape)
    out = Identity(epsilon=1.0).release(Histogram(schema, counts), random_state=1)
    return load_release(out.save(tmp_path / "map"))


@pytest.mark.parametrize(
    "bbox",
    [(39.80, 116.20, 40.12, 116.52), (59.0, 10.0, 61.0, 14.0), (-34.2, 18.3, -33.7, 18.9)],
    ids=["beijing", "south-norway", "cape-town"],
)
def test_the_map_keeps_the_true_shape_of_its_area(
    bbox: tuple[float, float, float, float], tmp_path: Path
) -> None:
    lat0, lon0, lat1, lon1 = bbox
    text = build_report(map_release(tmp_path, bbox), seed=1)
    layout = plotly_layout(text, "fig-spatial-plot")
    x, y = layout["xaxis"], layout["yaxis"]
    # Exactly the area, in degrees.
    assert x["range"] == pytest.approx([lon0, lon1]) and y["range"] == pytest.approx([lat0, lat1])
    assert x["ticksuffix"] == y["ticksuffix"] == "°"
    assert "degrees" in x["title"]["text"] and "degrees" in y["title"]["text"]
    # A degree of latitude is drawn 1/cos(mid-latitude) times as long as one of longitude, and
    # Plotly shrinks the plotting area (not the extent) to keep it: the drawn width over height
    # is then dlon cos(mid) / dlat (the browser test measures it in pixels).
    assert y["scaleanchor"] == "x" and x["constrain"] == y["constrain"] == "domain"
    mid = math.radians((lat0 + lat1) / 2)
    assert y["scaleratio"] == pytest.approx(1 / math.cos(mid), rel=1e-12)
    drawn = (lon1 - lon0) / ((lat1 - lat0) * y["scaleratio"])
    assert drawn == pytest.approx((lon1 - lon0) * math.cos(mid) / (lat1 - lat0), rel=1e-12)
