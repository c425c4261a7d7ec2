"""Each release's HTML report (``dpcube report``), opened in a real headless Chromium through the
service's route ``GET /api/releases/{name}/report``: every figure block must hold a Plotly plot
that was drawn (an SVG of non-zero size, with marks in it), and the browser console must have no
SEVERE entry (a script error, a resource that failed to load). Screenshots are kept as artefacts.
"""

from __future__ import annotations

from typing import Any

import pytest

# one worker runs every browser test (make test: -n 2 --dist loadgroup), so the releases, the
# server and Chromium (session fixtures) start once, not once per worker
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

#: For every ``.dpcube-figure``: its id, how many Plotly SVGs it holds, the size of the main one,
#: and how many drawn marks (paths, points, heat-map images) are in it.
FIGURES_JS = """
return Array.from(document.querySelectorAll('.dpcube-figure')).map(function (fig) {
  var svgs = fig.querySelectorAll('svg.main-svg');
  var box = svgs.length ? svgs[0].getBoundingClientRect() : {width: 0, height: 0};
  var marks = fig.querySelectorAll('.plot path, .plot image, .plot .point, .heatmaplayer image, '
                                   + '.barlayer path, .scatterlayer path').length;
  return {id: fig.id, svgs: svgs.length, width: box.width, height: box.height, marks: marks,
          visible: fig.offsetParent !== null};
});
"""


@pytest.mark.parametrize("name", ["cube", "map", "census"])
def test_report_figures_render(name: str, driver: Any, served_url: str, wait: Any,
                               screenshots: Any, severe_console: Any) -> None:  # fmt: skip
    severe_console(driver)  # drain what earlier pages logged
    driver.get(f"{served_url}api/releases/{name}/report")
    wait(driver, lambda d: d.execute_script("return document.readyState") == "complete",
         "the report to load")  # fmt: skip
    figures = driver.execute_script(FIGURES_JS)
    assert figures, f"the {name} report has no .dpcube-figure"
    # Plotly draws synchronously from each inline script; wait anyway for every figure's SVG
    wait(driver, lambda d: all(f["svgs"] > 0 for f in d.execute_script(FIGURES_JS)),
         "every figure's Plotly SVG")  # fmt: skip
    figures = driver.execute_script(FIGURES_JS)
    for fig in figures:
        assert fig["id"].startswith("fig-"), fig
        if fig["visible"]:  # a figure inside a collapsed drill-down level has no layout size
            assert fig["width"] > 100 and fig["height"] > 100, fig
        assert fig["marks"] > 0, fig  # something was drawn in it, not only axes
    assert any(f["visible"] for f in figures)
    # served over HTTP, the report links to the explorer page opened on this release
    link = driver.find_element("css selector", "#explorer-link a")
    assert link.is_displayed() and link.get_attribute("href") == f"{served_url}?release={name}"
    # Every SEVERE entry fails the test (the service answers the browser's own /favicon.ico
    # request with 204, so that one is no error either).
    assert severe_console(driver) == []
    driver.execute_script(  # the picture shows the first figure, not only the guarantee table
        "document.querySelector('.dpcube-figure').scrollIntoView({block: 'start'});"
    )
    screenshots(driver, f"report-{name}")
