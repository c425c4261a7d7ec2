"""The explorer page in a real headless Chromium.

Each test opens ``/`` of a real ``dpcube serve`` process, picks a release in the page, runs a query
through the widgets, and checks the number the page shows against a direct POST to the API: the
raw value the page received (``data-value``) must equal the API's answer exactly, the interval's
ends likewise, and the text shown must be that value rounded for display. The query the page sent
(shown under the answer) must be the one the widgets describe. Screenshots are kept as artefacts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

# one worker runs every browser test (make test: -n 2 --dist loadgroup), so the releases, the
# server and Chromium (session fixtures) start once, not once per worker
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

Wait = Callable[[Any, Callable[[Any], Any], str], Any]
Api = Callable[..., Any]


def by_id(driver: Any, element_id: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id)


def select(driver: Any, element_id: str) -> Any:
    from selenium.webdriver.support.ui import Select

    return Select(by_id(driver, element_id))


def open_release(driver: Any, url: str, name: str, wait: Wait) -> None:
    """Open the explorer, wait for its release list, and pick ``name`` in the page's select."""
    driver.get(url)
    wait(driver, lambda d: by_id(d, "release-select").is_enabled(), "the release list")
    select(driver, "release-select").select_by_value(name)
    wait(driver, lambda d: d.find_element("tag name", "body").get_attribute("data-release") == name,
         f"release {name} to load")  # fmt: skip
    assert by_id(driver, "query-form").is_displayed()


@dataclass
class Shown:
    """What the page shows after an answer."""

    text: str  # the answer as displayed
    value: float  # the raw number it received
    lower: float | None
    upper: float | None
    level: float
    query: dict[str, Any]  # the query it sent
    covers: str


def answer_in_page(driver: Any, wait: Wait) -> Shown:
    """Click Answer and read the result (or fail with the page's error line)."""
    by_id(driver, "answer-button").click()
    wait(driver, lambda d: by_id(d, "result").is_displayed() or by_id(d, "error").is_displayed(),
         "the answer or an error")  # fmt: skip
    error = by_id(driver, "error")
    assert not error.is_displayed(), f"the page showed an error: {error.text}"
    interval = by_id(driver, "answer-interval")
    lower, upper = interval.get_attribute("data-lower"), interval.get_attribute("data-upper")
    return Shown(
        text=by_id(driver, "answer-value").text,
        value=float(by_id(driver, "answer-value").get_attribute("data-value")),
        lower=None if lower is None else float(lower),
        upper=None if upper is None else float(upper),
        level=float(interval.get_attribute("data-level")),
        query=json.loads(by_id(driver, "answer-query").text),
        covers=by_id(driver, "answer-covers").text,
    )


def error_in_page(driver: Any, wait: Wait) -> str:
    """Click Answer and return the one error line the page shows instead of a result."""
    by_id(driver, "answer-button").click()
    wait(driver, lambda d: by_id(d, "error").is_displayed(), "an error line")
    assert not by_id(driver, "result").is_displayed()
    return str(by_id(driver, "error").text)


def assert_same_as_api(shown: Shown, api: Api, release: str, query: dict[str, Any]) -> Any:
    """The page sent ``query`` and shows exactly the API's answer to it."""
    assert shown.query == query
    data = api(release, query, shown.level)
    expected = data["answers"][0]
    assert shown.value == expected["answer"]
    assert shown.lower == expected["lower"] and shown.upper == expected["upper"]
    assert data["level"] == shown.level
    # The text is the value rounded for display: within half a unit of its last shown digit.
    decimals = len(shown.text.split(".")[1]) if "." in shown.text else 0
    assert abs(float(shown.text) - expected["answer"]) <= 0.5 * 10.0**-decimals + 1e-12
    assert f"{round(shown.level * 100)} % interval" in shown.covers
    return data


def test_release_list_and_report_links(driver: Any, served_url: str, wait: Wait,
                                       severe_console: Any) -> None:  # fmt: skip
    import httpx

    listed = [
        r["name"] for r in httpx.get(served_url + "api/releases", timeout=30).json()["releases"]
    ]
    driver.get(served_url)
    wait(driver, lambda d: by_id(d, "release-select").is_enabled(), "the release list")
    options = [o.get_attribute("value") for o in select(driver, "release-select").options]
    assert options == ["", *listed]  # a prompt, then every served release in the API's order
    assert by_id(driver, "release-count").text == f"{len(listed)} release(s) served"
    for name in listed:
        select(driver, "release-select").select_by_value(name)
        wait(driver, lambda d, n=name: d.find_element("tag name", "body").get_attribute("data-release") == n,
             f"release {name}")  # fmt: skip
        banner = by_id(driver, "publication-banner")
        assert banner.is_displayed() and "NOT FOR PUBLICATION" in banner.text  # seeded releases
        assert "epsilon = 1" in by_id(driver, "guarantee").text
        link = by_id(driver, "report-link")
        assert link.is_displayed()
        assert link.get_attribute("href") == f"{served_url}api/releases/{name}/report"
    assert severe_console(driver) == []


def test_cube_query_through_the_page(driver: Any, served_url: str, wait: Wait, api_answer: Api,
                                     screenshots: Any, severe_console: Any) -> None:  # fmt: skip
    open_release(driver, served_url, "cube", wait)
    cuboids = select(driver, "cuboid-select")
    labels = [o.text for o in cuboids.options]
    assert len(labels) == 10  # k=2 over 5 attributes: every two-way cuboid, C(5, 2)
    cuboids.select_by_visible_text("sex \u00d7 income")
    wait(driver, lambda d: d.find_elements("id", "categories-income"), "the cuboid's widgets")
    assert not driver.find_elements("id", "range-lo-age")  # only the cuboid's attributes
    select(driver, "categories-sex").select_by_value("F")
    select(driver, "categories-income").select_by_value(">50K")
    shown = answer_in_page(driver, wait)
    data = assert_same_as_api(shown, api_answer, "cube", {"sex": "F", "income": ">50K"})
    assert data["error_kind"] == "exact" and "exact standard deviation" in shown.covers

    # an ordinal range in the attribute's unit and a hierarchy node, at another level
    cuboids.select_by_visible_text("age \u00d7 education")
    wait(driver, lambda d: d.find_elements("id", "range-lo-age"), "the age widget")
    by_id(driver, "range-lo-age").send_keys("20")
    by_id(driver, "range-hi-age").send_keys("39")
    select(driver, "node-education").select_by_value("College")
    select(driver, "level-select").select_by_value("0.9")
    shown = answer_in_page(driver, wait)
    assert shown.level == 0.9
    assert_same_as_api(shown, api_answer, "cube", {"age": [20, 39], "education": "College"})
    # two hierarchy nodes: the set of their leaves
    education = select(driver, "node-education")
    education.select_by_value("Primary")  # a leaf of School (examples/adult/schema.yaml)
    shown = answer_in_page(driver, wait)
    query = {"age": [20, 39], "education": {"in": ["Primary", "College"]}}
    assert_same_as_api(shown, api_answer, "cube", query)
    education.deselect_all()
    education.select_by_value("College")
    screenshots(driver, "explorer-cube")
    assert severe_console(driver) == []


def test_cube_bad_ranges_get_one_line(driver: Any, served_url: str, wait: Wait, api_answer: Api,
                                      severe_console: Any) -> None:  # fmt: skip
    open_release(driver, served_url, "cube", wait)
    select(driver, "cuboid-select").select_by_visible_text("age \u00d7 workclass")
    wait(driver, lambda d: d.find_elements("id", "range-lo-age"), "the age widget")
    # categories that skip others: the set of them, one query (their sum), as the API answers it
    workclass = select(driver, "categories-workclass")
    labels = [o.get_attribute("value") for o in workclass.options]
    apart = [labels[0], labels[2]]
    for label in apart:
        workclass.select_by_value(label)
    shown = answer_in_page(driver, wait)
    assert_same_as_api(shown, api_answer, "cube", {"workclass": {"in": apart}})
    workclass.deselect_all()
    # ages are whole years (bins [a, a+1)): 20.5 is not a bin edge; the service says which are
    by_id(driver, "range-lo-age").send_keys("20.5")
    by_id(driver, "range-hi-age").send_keys("39")
    assert "does not fall on bin edges" in error_in_page(driver, wait)
    by_id(driver, "overlapping").click()  # widen to the bins the range overlaps
    shown = answer_in_page(driver, wait)
    assert_same_as_api(
        shown, api_answer, "cube", {"age": {"values": [20.5, 39], "overlapping": True}}
    )
    # 20.5..39 overlaps the bins of 20..39, so the widened answer is theirs, and the page says so
    assert "the answer covers age 20..39" in by_id(driver, "answer-covered").text
    assert shown.value == api_answer("cube", {"age": [20, 39]})["answers"][0]["answer"]
    # SEVERE console entries here are only the page's own 400 responses, which it shows as text
    assert all("400" in e["message"] for e in severe_console(driver))


def test_map_rectangle_on_the_heat_map(driver: Any, served_url: str, wait: Wait, api_answer: Api,
                                       screenshots: Any, severe_console: Any) -> None:  # fmt: skip
    from selenium.webdriver.common.action_chains import ActionChains

    info = __import__("httpx").get(served_url + "api/releases/map", timeout=30).json()
    (loc,) = info["schema"]["attributes"]
    lat0, lat1 = loc["lat_range"]
    lon0, lon1 = loc["lon_range"]
    rows, cols = loc["resolution"]
    open_release(driver, served_url, "map", wait)
    canvas = by_id(driver, "heatmap-loc")
    wait(driver, lambda d: canvas.get_attribute("data-state") != "loading", "the heat map")
    assert canvas.get_attribute("data-state") == "ready", by_id(driver, "heatmap-legend-loc").text
    colours = driver.execute_script(
        "const c = arguments[0], d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "const s = new Set(); for (let i = 0; i < d.length; i += 4 * 97) s.add(d[i] + ',' + d[i+1] + ',' + d[i+2]);"
        "return s.size;",
        canvas,
    )
    assert colours >= 5  # a drawn heat map, not a blank canvas

    # drag a rectangle: from 100 px left/up of the centre to 20 px right/10 px up of it
    size = canvas.size["width"]
    ActionChains(driver).move_to_element_with_offset(
        canvas, -100, -100
    ).click_and_hold().move_by_offset(120, 90).release().perform()
    wait(driver, lambda d: canvas.get_attribute("data-box"), "the drawn box")
    (r0, r1), (c0, c1) = json.loads(canvas.get_attribute("data-box"))
    # where the drag went, within one grid cell (pixel rounding, the 1 px border)
    x0, x1, y0, y1 = size / 2 - 100, size / 2 + 20, size / 2 - 100, size / 2 - 10
    assert abs(c0 - int(x0 / size * cols)) <= 1 and abs(c1 - int(x1 / size * cols)) <= 1
    assert (
        abs(r1 - int((size - y0) / size * rows)) <= 1
        and abs(r0 - int((size - y1) / size * rows)) <= 1
    )

    def edge(lo: float, hi: float, n: int, i: int) -> float:  # as dpcube.schema.Spatial.scales
        return lo + (hi - lo) * i / n

    lat = [edge(lat0, lat1, rows, r0), edge(lat0, lat1, rows, r1 + 1)]
    lon = [edge(lon0, lon1, cols, c0), edge(lon0, lon1, cols, c1 + 1)]
    typed = {k: float(by_id(driver, f"{k}-loc").get_attribute("value"))
             for k in ("lat-lo", "lat-hi", "lon-lo", "lon-hi")}  # fmt: skip
    # the inputs show the drawn cells' edges to 15 digits, well inside the service's edge
    # tolerance (1e-9 of the axis span)
    for got, want, span in ((typed["lat-lo"], lat[0], lat1 - lat0), (typed["lat-hi"], lat[1], lat1 - lat0),
                            (typed["lon-lo"], lon[0], lon1 - lon0), (typed["lon-hi"], lon[1], lon1 - lon0)):  # fmt: skip
        assert abs(got - want) <= 1e-14 * abs(want) and abs(got - want) < 1e-9 * span
    box = {"lat": [typed["lat-lo"], typed["lat-hi"]], "lon": [typed["lon-lo"], typed["lon-hi"]]}
    shown = answer_in_page(driver, wait)
    data = assert_same_as_api(shown, api_answer, "map", {"loc": box})
    assert data["error_kind"] == "bound" and "valid on any data" in shown.covers
    # the lat/lon box snapped to the grid covers exactly the drawn cells
    cells = api_answer("map", {"loc": {"bins": [[r0, r1], [c0, c1]]}})["answers"][0]
    assert cells["answer"] == shown.value
    screenshots(driver, "explorer-map")

    # a drag that ends outside the canvas (to the east) stops at the grid's last column
    ActionChains(driver).move_to_element_with_offset(
        canvas, 50, 50
    ).click_and_hold().move_by_offset(size, 20).release().perform()
    wait(driver, lambda d: json.loads(canvas.get_attribute("data-box"))[1][1] == cols - 1,
         "a box clamped to the last column")  # fmt: skip
    (r0, r1), (c0, c1) = json.loads(canvas.get_attribute("data-box"))
    assert r0 < r1 and c0 < c1
    shown = answer_in_page(driver, wait)
    cells = api_answer("map", {"loc": {"bins": [[r0, r1], [c0, c1]]}})["answers"][0]
    assert shown.value == cells["answer"]
    assert severe_console(driver) == []


def test_census_hierarchy_navigation(driver: Any, served_url: str, wait: Wait, api_answer: Api,
                                     screenshots: Any, severe_console: Any) -> None:  # fmt: skip
    open_release(driver, served_url, "census", wait)
    assert by_id(driver, "region-current").text == "nation"
    assert not by_id(driver, "overlapping").is_displayed()  # no value ranges in a census query
    by_id(driver, "region-child-North").click()
    wait(driver, lambda d: by_id(d, "region-current").text == "North", "region North")
    children = by_id(driver, "region-children").text
    assert all(name in children for name in ("N1", "N2", "N3"))
    by_id(driver, "region-child-N2").click()
    wait(driver, lambda d: by_id(d, "region-current").text == "N2", "region N2")
    by_id(driver, "size-lo").send_keys("1")
    by_id(driver, "size-hi").send_keys("2")
    shown = answer_in_page(driver, wait)
    assert_same_as_api(shown, api_answer, "census", {"region": "N2", "size": [1, 2]})
    assert not by_id(driver, "breakdown").is_displayed()  # N2 has no region below it
    # back up the path: the breadcrumb names every region above
    by_id(driver, "region-up-nation").click()
    wait(driver, lambda d: by_id(d, "region-current").text == "nation", "back at the root")
    shown = answer_in_page(driver, wait)
    assert_same_as_api(shown, api_answer, "census", {"region": "nation", "size": [1, 2]})
    # under the answer, the same question for each region below the chosen one
    table = by_id(driver, "breakdown")
    assert table.is_displayed()
    rows = table.find_elements("css selector", "tbody tr")
    assert [r.get_attribute("data-label") for r in rows] == ["North", "South", "West"]
    for row in rows:
        query = {"region": row.get_attribute("data-label"), "size": [1, 2]}
        expected = api_answer("census", query)["answers"][0]["answer"]
        assert float(row.get_attribute("data-value")) == expected
    screenshots(driver, "explorer-census")
    assert severe_console(driver) == []


def test_page_bin_arithmetic_matches_the_library(driver: Any, served_url: str, wait: Wait) -> None:
    """The page's copies of the schema's bin arithmetic (the tops its hints show, the grid edges
    a drawn rectangle snaps to) equal dpcube.schema's, float for float."""
    from dpcube.schema import Ordinal, Spatial
    from dpcube.serve.served import attribute_info

    driver.get(served_url)
    wait(driver, lambda d: by_id(d, "release-select").is_enabled(), "the page's script")
    ordinals = [
        Ordinal.from_range("age", 0, 99, 1),  # whole numbers: a bin [a, a+1) ends at a
        Ordinal.from_range("hours", 17, 90, 10),  # the last bin is cut at 90
        Ordinal.from_range("ratio", 0, 10, 2.5),  # real-valued: a bin ends at its upper edge
        Ordinal.from_edges("income", [0, 50000, 150000, 1000000]),
        Ordinal.from_edges("score", [0, 0.5, 1.25, 2]),
    ]
    for attribute in ordinals:
        scale = driver.execute_script(
            "return window.dpcubeExplorer.ordinalScale(arguments[0]);", attribute_info(attribute)
        )
        assert scale["lows"] == list(attribute.scale.edges[:-1]), attribute.name
        assert scale["tops"] == list(attribute.scale.tops), attribute.name
        assert scale["whole"] == attribute.scale.whole, attribute.name
    spatial = Spatial("loc", ("lat", "lon"), (33.7, -118.7, 34.4, -117.8), (1024, 7))
    lat, lon = spatial.scales
    edges = "return window.dpcubeExplorer.spatialEdges(arguments[0]);"
    assert driver.execute_script(edges, attribute_info(spatial)) == [
        list(lat.edges),
        list(lon.edges),
    ]
