"""The HTML report's layout in a real headless Chromium, at the width of a sheet of A4 and of
Letter paper, on screen and in the print layout (``@media print``), and printed to PDF:

- nothing is wider than the page: ``document.scrollWidth`` never exceeds the viewport, every
  table sits in its own sideways-scrolling box on screen and fits the paper in print, every
  figure fits;
- the map is drawn at the true shape of its area: the plotting area's width over height is
  ``dlon cos(mid-latitude) / dlat`` of the schema's bounding box, with degrees on the axes;
- the guarantee is sentences and small tables: no JSON text (``{``) in that section.

Screenshots of every layout are kept as artefacts (``screenshots`` fixture).
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

REPO = Path(__file__).resolve().parents[2]
#: CSS pixels per millimetre (96 per inch).
PX_PER_MM = 96 / 25.4
#: The sheets, in CSS pixels, as (width, height): A4 210 x 297 mm (794 px wide), Letter
#: 8.5 x 11 in (816 px wide).
PAPERS = {"A4": (210 * PX_PER_MM, 297 * PX_PER_MM), "Letter": (8.5 * 96, 11 * 96)}
#: The report's printed margin on each side (its ``@page`` rule); the print layout must fit the
#: width left: 680 px on A4, 703 px on Letter.
PRINT_MARGIN_MM = 15

#: Per element: how far it reaches past the viewport's right edge, and its id/class; tables
#: and their boxes, figures, and every element of the body (whatever overflows).
LAYOUT_JS = """
var vw = document.documentElement.clientWidth;
function far(el) { return el.getBoundingClientRect().right - vw; }
function name(el) { return el.tagName + '#' + (el.id || '') + '.' + (el.className.baseVal === undefined ? el.className : ''); }
var tables = Array.from(document.querySelectorAll('table')).map(function (t) {
  var box = t.parentElement;
  return {table: name(t), box: name(box), boxClass: box.className,
          boxOverflow: getComputedStyle(box).overflowX, boxPast: far(box),
          tableWider: t.getBoundingClientRect().width - box.clientWidth};
});
var past = Array.from(document.body.querySelectorAll('*')).filter(function (el) {
  if (el.closest('.table-scroll')) { return false; }  // a scrolling box's content may be wider
  var r = el.getBoundingClientRect();
  return r.width > 0 && r.right - vw > 0.5;
}).map(function (el) { return name(el) + ' by ' + far(el).toFixed(1) + ' px'; });
return {viewport: vw, scrollWidth: document.documentElement.scrollWidth, tables: tables,
        past: past.slice(0, 10),
        figures: Array.from(document.querySelectorAll('.main-svg')).map(far)};
"""

#: The map's plotting area (Plotly's drag rectangle over the x-y subplot), its axis ranges and
#: tick labels.
MAP_JS = """
var gd = document.getElementById('fig-spatial-plot');
var area = gd.querySelector('rect.nsewdrag').getBoundingClientRect();
var fl = gd._fullLayout;
return {width: area.width, height: area.height, x: fl.xaxis.range, y: fl.yaxis.range,
        xticks: Array.from(gd.querySelectorAll('.xtick text')).map(function (t) { return t.textContent; }),
        yticks: Array.from(gd.querySelectorAll('.ytick text')).map(function (t) { return t.textContent; }),
        xtitle: fl.xaxis.title.text, ytitle: fl.yaxis.title.text};
"""


@pytest.fixture
def page(driver: Any) -> Iterator[Any]:
    """The session's Chromium, given back as it was (viewport and media) after the test."""
    yield driver
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


def open_report(driver: Any, path: Path, width: float, media: str, wait: Any) -> None:
    """Open ``path`` in a viewport ``width`` CSS pixels wide, with the ``media`` CSS type."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": round(width), "height": 1100, "deviceScaleFactor": 1, "mobile": False},
    )
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": media})
    driver.get(path.as_uri())
    wait(driver, lambda d: d.execute_script("return document.readyState") == "complete",
         "the report to load")  # fmt: skip
    wait(driver, lambda d: d.execute_script(
        "return Array.from(document.querySelectorAll('.plotly-graph-div'))"
        ".every(function (g) { return g.querySelector('.main-svg') !== null; });"),
        "every figure drawn")  # fmt: skip
    # Plotly redraws a figure on the window's resize (a media switch is one): settle at this width
    driver.execute_script(
        "document.querySelectorAll('.plotly-graph-div').forEach(function (g) {"
        " if (g._fullLayout) { Plotly.Plots.resize(g); } });"
    )


def full_page_screenshot(driver: Any, screenshots: Any, name: str, width: float) -> None:
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": round(width), "height": min(height, 12000), "deviceScaleFactor": 1,
         "mobile": False},
    )  # fmt: skip
    screenshots(driver, name)


@pytest.mark.parametrize("paper", sorted(PAPERS))
@pytest.mark.parametrize("name", ["cube", "map", "census"])
def test_nothing_runs_off_the_page(name: str, paper: str, page: Any,
                                   browser_releases: dict[str, Path], wait: Any,
                                   screenshots: Any) -> None:  # fmt: skip
    report = browser_releases[name] / "report.html"
    sheet_width, _ = PAPERS[paper]
    printable = sheet_width - 2 * PRINT_MARGIN_MM * PX_PER_MM
    for media, width in (("screen", sheet_width), ("print", printable)):
        open_report(page, report, width, media, wait)
        layout = page.execute_script(LAYOUT_JS)
        where = f"{name} report, {media} at {width:.0f} px ({paper})"
        # The page never scrolls sideways; every figure's SVG ends inside the viewport (half a
        # pixel of slack for sub-pixel layout).
        assert layout["scrollWidth"] <= layout["viewport"], (where, layout["past"])
        assert layout["past"] == [], where
        assert all(right <= 0.5 for right in layout["figures"]), (where, layout["figures"])
        assert layout["tables"], where
        for t in layout["tables"]:
            # each table has its own box, which ends inside the page
            assert t["boxClass"] == "table-scroll", (where, t)
            assert t["boxPast"] <= 0.5, (where, t)
            if media == "screen":  # a wider table scrolls inside its box
                assert t["boxOverflow"] == "auto", (where, t)
            else:  # on paper nothing can scroll: the table wraps to the printable width
                assert t["boxOverflow"] == "visible" and t["tableWider"] <= 0.5, (where, t)
        full_page_screenshot(page, screenshots, f"report-{name}-{paper}-{media}", width)


def test_the_screen_layout_does_scroll_a_wide_table(
    page: Any, browser_releases: dict[str, Path], wait: Any
) -> None:
    """The census table (a column per group size, each cell with its interval) is wider than an
    A4 sheet on screen: its box scrolls it (the check above is not vacuous), the page does not."""
    open_report(page, browser_releases["census"] / "report.html", PAPERS["A4"][0], "screen", wait)
    layout = page.execute_script(LAYOUT_JS)
    nation = next(t for t in layout["tables"] if t["table"].startswith("TABLE#table-census-nation"))
    assert nation["tableWider"] > 0, nation
    assert layout["scrollWidth"] <= layout["viewport"]


def bbox_of_the_example_map() -> tuple[float, float, float, float]:
    schema = yaml.safe_load((REPO / "examples" / "location" / "schema.yaml").read_text())
    lat0, lon0, lat1, lon1 = next(a for a in schema["attributes"] if a["kind"] == "spatial")["bbox"]
    return float(lat0), float(lon0), float(lat1), float(lon1)


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_the_map_has_the_true_shape_of_its_area(
    paper: str, page: Any, browser_releases: dict[str, Path], wait: Any, screenshots: Any
) -> None:
    lat0, lon0, lat1, lon1 = bbox_of_the_example_map()
    # Width over height of the area on the ground (equirectangular at the mid-latitude),
    # computed here from the schema, not by the library: 0.766 for the example, a city taller
    # than wide.
    expected = (lon1 - lon0) * math.cos(math.radians((lat0 + lat1) / 2)) / (lat1 - lat0)
    for media in ("screen", "print"):
        width = PAPERS[paper][0] - (2 * PRINT_MARGIN_MM * PX_PER_MM if media == "print" else 0)
        open_report(page, browser_releases["map"] / "report.html", width, media, wait)
        drawn = page.execute_script(MAP_JS)
        # The axes span exactly the bounding box, labelled in degrees.
        assert drawn["x"] == pytest.approx([lon0, lon1]) and drawn["y"] == pytest.approx(
            [lat0, lat1]
        )
        assert "degrees" in drawn["xtitle"] and "degrees" in drawn["ytitle"]
        assert drawn["xticks"] and all(t.endswith("°") for t in drawn["xticks"] + drawn["yticks"])
        # Tolerance: Plotly places the plotting area on whole pixels, so each side may be off by
        # up to 1 px; the ratio w/h is then off by at most about (1/w + 1/h) relative.
        w, h = drawn["width"], drawn["height"]
        tolerance = 1 / w + 1 / h
        assert w / h == pytest.approx(expected, rel=tolerance), (media, drawn)
        assert h > w  # taller than wide, as the area is
        page.execute_script("document.getElementById('fig-spatial').scrollIntoView();")
        screenshots(page, f"report-map-{paper}-{media}")


def test_the_guarantee_is_words_not_json(page: Any, browser_releases: dict[str, Path],
                                         wait: Any) -> None:  # fmt: skip
    for name in ("cube", "map", "census"):
        open_report(page, browser_releases[name] / "report.html", PAPERS["A4"][0], "screen", wait)
        text = page.execute_script("return document.getElementById('guarantee').innerText;")
        assert "epsilon = 1" in text and "neighbours" in text, text
        assert "{" not in text and "}" not in text, text
        tables = page.find_elements("css selector", "#guarantee table")
        assert len(tables) >= 3  # the summary, the parameters, the sensitivity, ...


@pytest.mark.parametrize("paper", sorted(PAPERS))
@pytest.mark.parametrize("name", ["map", "census"])
def test_prints_to_pdf(name: str, paper: str, page: Any, browser_releases: dict[str, Path],
                       wait: Any, tmp_path: Path) -> None:  # fmt: skip
    """Chromium prints the report, opened in a desktop-wide window, on the sheet: every figure
    is redrawn, as printing starts, at most as wide as the printable width of A4 (the narrower
    sheet; nothing but the report's own print handler redraws a Plotly figure when printing, so
    without it the figure keeps the window's width), and the PDF has a few pages (not one page
    per table column). The PDF is kept in the test's temporary directory."""
    from selenium.webdriver.common.print_page_options import PrintOptions

    open_report(page, browser_releases[name] / "report.html", 1100, "screen", wait)
    figures = page.execute_script(
        "window.dpcubeWidths = []; var gs = document.querySelectorAll('.plotly-graph-div');"
        "gs.forEach(function (g) { g.on('plotly_afterplot', function () {"
        " window.dpcubeWidths.push(g._fullLayout.width); }); }); return gs.length;"
    )
    screen_width = page.execute_script(
        "return document.querySelector('.main-svg').getBoundingClientRect().width;"
    )
    options = PrintOptions()
    sheet_w, sheet_h = PAPERS[paper]
    options.page_width = sheet_w / PX_PER_MM / 10  # centimetres
    options.page_height = sheet_h / PX_PER_MM / 10
    options.background = True
    pdf = base64.b64decode(page.print_page(options))
    assert pdf.startswith(b"%PDF")
    (tmp_path / f"report-{name}-{paper}.pdf").write_bytes(pdf)
    printable_a4 = PAPERS["A4"][0] - 2 * PRINT_MARGIN_MM * PX_PER_MM
    assert screen_width > printable_a4 + 100  # the window is wider than the paper
    widths = page.execute_script("return window.dpcubeWidths;")
    narrow = [w for w in widths if w <= printable_a4 + 0.5]
    assert len(narrow) >= figures >= 1, (widths, printable_a4)
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert 1 <= pages <= 12, pages
