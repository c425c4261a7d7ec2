"""HTML building blocks of the report: escaping, numbers, tables, figures and the page itself.

Everything here is pure text assembly. The page is self-contained: its only script is Plotly's
JavaScript, read from the ``plotly`` wheel and inlined once (:func:`plotly_js`), plus the few
lines that draw the figures and switch the census drill-down; no ``src``/``href`` points at the
network, no web font is named.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from dpcube.release.formats import json_ready

#: Stable element ids start with these (browser tests locate figures and tables by them).
FIGURE_CLASS = "dpcube-figure"
TABLE_CLASS = "dpcube-table"

#: Class of the box around every table: it scrolls sideways on a screen when the table is wider
#: than the page, so the page itself never does.
SCROLL_CLASS = "table-scroll"

#: Widths, in CSS pixels (96 per inch), of the paper the print layout is made for, and of the
#: margin printed on each side; the printable width is what is left (A4: 794 - 2 x 57 = 680 px).
PAPER_WIDTH_PX = {"A4": 210 / 25.4 * 96, "Letter": 8.5 * 96}
PRINT_MARGIN_MM = 15

STYLE = f"""
body {{ font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 0 auto; max-width: 1200px; padding: 1em 2em; color: #1b1b1b;
       overflow-wrap: anywhere; }}
h1 {{ font-size: 1.6em; }} h2 {{ border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }}
.{SCROLL_CLASS} {{ max-width: 100%; overflow-x: auto; margin: .5em 0 1em 0; }}
table {{ border-collapse: collapse; font-size: .9em; }}
th, td {{ border: 1px solid #ddd; padding: .25em .6em; text-align: right; vertical-align: top;
         overflow-wrap: normal; }}
th {{ background: #f3f3f3; }} td.label, th.label {{ text-align: left; }}
table.key-value td, table.key-value th {{ text-align: left; overflow-wrap: anywhere; }}
table.key-value th {{ width: 14em; font-weight: 600; }}
.ci {{ color: #666; font-size: .85em; white-space: nowrap; }}
.untrusted {{ color: #b00; font-weight: bold; }}
.banner {{ padding: .8em 1em; margin: 1em 0; border-radius: 4px; font-weight: 600; }}
.banner.publish {{ background: #e7f5e9; border: 1px solid #6bb77b; }}
.banner.not-publish {{ background: #fde8e8; border: 1px solid #d33; color: #8a0000; }}
.dpcube-uncertainty {{ color: #444; font-size: .9em; margin-top: .2em; }}
.note {{ color: #555; font-size: .9em; }}
.dpcube-figure {{ margin: 1.5em 0; max-width: 100%; }}
code {{ background: #f5f5f5; padding: 0 .2em; }}
@page {{ margin: {PRINT_MARGIN_MM}mm; }}
@media print {{
  body {{ max-width: none; padding: 0; font-size: 10pt; }}
  h2 {{ break-after: avoid; }} h3 {{ break-after: avoid; }}
  .{SCROLL_CLASS} {{ overflow: visible; }}
  table {{ width: 100%; table-layout: auto; font-size: 7.5pt; }}
  th, td {{ padding: .15em .3em; overflow-wrap: anywhere; }}
  td.label, th.label {{ overflow-wrap: normal; }}
  .ci {{ white-space: normal; }}
  tr, .dpcube-figure {{ break-inside: avoid; }}
  #explorer-note, select, label[for=census-state-select] {{ display: none; }}
  .census-state[hidden] {{ display: none; }}
  .modebar-container {{ display: none; }}
}}
"""

#: Width, in CSS pixels, of the printed figures: the printable width of the narrower paper
#: (A4: 680 px), so that they fit on either without the browser shrinking the whole page.
PRINT_FIGURE_WIDTH_PX = math.floor(min(PAPER_WIDTH_PX.values()) - 2 * PRINT_MARGIN_MM * 96 / 25.4)

#: Redraws every Plotly figure at :data:`PRINT_FIGURE_WIDTH_PX` as printing starts (a figure
#: laid out for a wider screen would otherwise run off the paper, or make the browser shrink the
#: whole page to fit it), and at the screen's width after. ``Plotly.relayout`` draws
#: synchronously, before the page is printed (``Plotly.Plots.resize`` waits 100 ms first, too
#: late); the width is fixed, as the browser may not have laid the page out for the paper yet.
PRINT_SCRIPT = (
    """
(function () {
  var printing = false;
  function figures() { return document.querySelectorAll('.plotly-graph-div'); }
  function toPaper() {
    if (printing || !window.Plotly) { return; }
    printing = true;
    figures().forEach(function (gd) {
      var width = Math.min(PRINT_WIDTH, gd.getBoundingClientRect().width);
      if (gd._fullLayout && width > 0) { Plotly.relayout(gd, {width: width}); }
    });
  }
  function toScreen() {
    if (!printing || !window.Plotly) { return; }
    printing = false;
    figures().forEach(function (gd) {
      if (gd._fullLayout) { Plotly.relayout(gd, {width: null, autosize: true}); }
    });
  }
  var print = window.matchMedia ? window.matchMedia('print') : null;
  if (print && print.addEventListener) {
    print.addEventListener('change', function (e) { if (e.matches) { toPaper(); } else { toScreen(); } });
  }
  window.addEventListener('beforeprint', toPaper);
  window.addEventListener('afterprint', toScreen);
})();
"""
).replace("PRINT_WIDTH", str(PRINT_FIGURE_WIDTH_PX))

#: Shown on every Plotly figure: no link to Plotly's site, no cloud editing.
PLOTLY_CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "showLink": False,
    "showSendToCloud": False,
}


def esc(text: Any) -> str:
    """HTML-escaped text.

    >>> esc('<b> & "x"')
    '&lt;b&gt; &amp; &quot;x&quot;'
    """
    return html.escape(str(text), quote=True)


def slug(text: str) -> str:
    """A stable id fragment: letters, digits and ``-`` only.

    >>> slug("sex,income"), slug("age"), slug("a b/c")
    ('sex-income', 'age', 'a-b-c')
    """
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "x"


def number(x: Any) -> str:
    """A released figure for reading: thousands separated, fewer decimals as it grows;
    ``n/a`` where there is none (NaN).

    >>> [number(v) for v in (1234567.8, 123.45, -4.567, 0.01234, float("nan"))]
    ['1,234,568', '123.5', '-4.57', '0.0123', 'n/a']
    """
    v = float(x)
    if not math.isfinite(v):
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.1 or a == 0:
        return f"{v:.2f}"
    return f"{v:.3g}"


def with_interval(estimate: float, lower: float, upper: float, trusted: bool = True) -> str:
    """A table cell: the estimate and, when known, its interval, marked where it is not trusted
    (a model-based interval: :attr:`dpcube.release.uncertainty.Uncertainty.untrusted`).

    >>> with_interval(10, 8.04, 11.96)
    '10.0 <span class="ci">[8.04 .. 12.0]</span>'
    >>> with_interval(10, float("nan"), float("nan"))
    '10.0'
    >>> with_interval(10, 8.04, 11.96, trusted=False)[-49:]
    '<span class="untrusted">NOT TRUSTED</span></span>'
    """
    cell = esc(number(estimate))
    if math.isfinite(float(lower)) and math.isfinite(float(upper)):
        mark = "" if trusted else ' <span class="untrusted">NOT TRUSTED</span>'
        cell += f' <span class="ci">[{esc(number(lower))} .. {esc(number(upper))}]{mark}</span>'
    return cell


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</``, NaN and infinities as null).

    >>> script_json({"a": [1.0, float("nan")], "b": "</script>"})
    '{"a":[1.0,null],"b":"<\\\\/script>"}'
    """
    text = json.dumps(json_ready(value), separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def table(
    element_id: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    labels: int = 1,
    caption: str | None = None,
) -> str:
    """A ``<table class="dpcube-table">``; cells are HTML already (escape them first); the first
    ``labels`` columns are left-aligned labels."""
    head = "".join(
        f'<th class="label">{esc(h)}</th>' if i < labels else f"<th>{esc(h)}</th>"
        for i, h in enumerate(header)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="label">{c}</td>' if i < labels else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>\n"
        for row in rows
    )
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (
        f'<div class="{SCROLL_CLASS}"><table class="{TABLE_CLASS}" id="{esc(element_id)}">{cap}'
        f"<thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table></div>"
    )


def key_value_table(element_id: str, rows: Sequence[tuple[str, str]]) -> str:
    """A small two-column table of ``(name, value)`` rows, both HTML already (escape them
    first), in a box that scrolls sideways when a value is too long for the page.

    >>> key_value_table("t", [("epsilon", "1")])
    '<div class="table-scroll"><table class="key-value" id="t"><tr><th>epsilon</th><td>1</td></tr></table></div>'
    """
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return (
        f'<div class="{SCROLL_CLASS}"><table class="key-value" id="{esc(element_id)}">{body}'
        "</table></div>"
    )


def figure(
    element_id: str, title: str, spec: Mapping[str, Any], uncertainty: str, height: int = 420
) -> str:
    """A figure block: ``<div class="dpcube-figure" id="fig-...">`` holding its title, the Plotly
    graph (drawn by an inline script from ``spec = {"data": [...], "layout": {...}}``) and the
    line saying what its error bars are."""
    plot_id = f"{element_id}-plot"
    return (
        f'<div class="{FIGURE_CLASS}" id="{esc(element_id)}">'
        f"<h3>{esc(title)}</h3>"
        f'<div id="{esc(plot_id)}" class="plotly-graph-div" '
        f'style="height:{int(height)}px; width:100%;"></div>'
        f'<p class="dpcube-uncertainty">{esc(uncertainty)}</p>'
        f"<script>Plotly.newPlot({script_json(plot_id)}, {script_json(spec['data'])}, "
        f"{script_json(spec['layout'])}, {script_json(PLOTLY_CONFIG)});</script>"
        "</div>\n"
    )


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """Plotly's JavaScript from the installed ``plotly`` wheel (no CDN), made safe to inline."""
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs()).replace("</script", "<\\/script")


#: Marks the inlined Plotly library (tests and the exact-figure scan skip its text).
PLOTLY_START = "<!-- dpcube: plotly.js (from the plotly wheel) -->"
PLOTLY_END = "<!-- dpcube: end of plotly.js -->"


def page(
    title: str,
    release_id: str,
    head_meta: Mapping[str, str],
    body: str,
    *,
    with_plotly: bool = True,
) -> str:
    """The whole document. ``head_meta``: further ``<meta name=... content=...>`` pairs;
    ``with_plotly``: inline Plotly's JavaScript (a page without figures leaves it out)."""
    from dpcube.release.base import REPORT_HTML_MARKER

    metas = "".join(f'<meta name="{esc(k)}" content="{esc(v)}">\n' for k, v in head_meta.items())
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"{REPORT_HTML_MARKER}\n"
        f'<meta name="dpcube-release-id" content="{esc(release_id)}">\n'
        f"{metas}"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n"
        + (f"{PLOTLY_START}\n<script>{plotly_js()}</script>\n{PLOTLY_END}\n" if with_plotly else "")
        + f"</head>\n<body>\n{body}<script>{PRINT_SCRIPT}</script>\n</body>\n</html>\n"
    )


__all__ = [
    "FIGURE_CLASS",
    "PAPER_WIDTH_PX",
    "PLOTLY_END",
    "PLOTLY_START",
    "PRINT_FIGURE_WIDTH_PX",
    "PRINT_MARGIN_MM",
    "SCROLL_CLASS",
    "TABLE_CLASS",
    "esc",
    "figure",
    "key_value_table",
    "number",
    "page",
    "plotly_js",
    "script_json",
    "slug",
    "table",
    "with_interval",
]
