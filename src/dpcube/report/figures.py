"""Plotly figure specifications (``{"data": [...], "layout": {...}}``) of the report, as plain
JSON-able dicts: built without ``plotly.graph_objects`` (no pandas import, no per-figure
validation cost) and drawn in the page by the inlined Plotly.js (:func:`dpcube.report.html.figure`).
Pure functions of released estimates and their intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray


def _list(values: Any) -> list[Any]:
    return [float(x) for x in np.asarray(values, dtype=np.float64).ravel().tolist()]


def bar_chart(
    labels: Sequence[str],
    estimate: Any,
    lower: Any,
    upper: Any,
    *,
    xlabel: str,
    ylabel: str = "released count",
) -> dict[str, Any]:
    """Bars of ``estimate`` with asymmetric error bars from ``lower`` to ``upper`` (none where NaN).

    >>> spec = bar_chart(["a", "b"], [5.0, 7.0], [3.0, 6.0], [8.0, 9.0], xlabel="x")
    >>> spec["data"][0]["error_y"]["array"], spec["data"][0]["error_y"]["arrayminus"]
    ([3.0, 2.0], [2.0, 1.0])
    """
    est = np.asarray(estimate, dtype=np.float64)
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    trace: dict[str, Any] = {
        "type": "bar",
        "x": [str(x) for x in labels],
        "y": _list(est),
        "customdata": np.stack([lo, hi], axis=1).tolist(),
        "hovertemplate": "%{x}: %{y:,.1f}<br>interval %{customdata[0]:,.1f} .. "
        "%{customdata[1]:,.1f}<extra></extra>",
        "marker": {"color": "#4878a8"},
    }
    if np.isfinite(lo).any():
        trace["error_y"] = {
            "type": "data",
            "symmetric": False,
            "array": _list(hi - est),
            "arrayminus": _list(est - lo),
            "color": "#222",
            "thickness": 1.2,
        }
    else:
        trace["hovertemplate"] = "%{x}: %{y:,.1f}<extra></extra>"
    layout = {
        "margin": {"l": 70, "r": 20, "t": 10, "b": 80},
        "xaxis": {"title": {"text": xlabel}, "type": "category", "automargin": True},
        "yaxis": {"title": {"text": ylabel}, "rangemode": "tozero"},
        "bargap": 0.15,
    }
    return {"data": [trace], "layout": layout}


def heat_map(
    x: Sequence[Any] | NDArray[np.float64],
    y: Sequence[Any] | NDArray[np.float64],
    z: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    *,
    xlabel: str,
    ylabel: str,
    categorical: bool = True,
    shapes: Sequence[dict[str, Any]] = (),
    hover_label: str = "estimate",
    degrees: bool = False,
) -> dict[str, Any]:
    """A heat map of ``z`` (rows along ``y``, columns along ``x``) whose hover shows each cell's
    estimate and interval. With ``categorical=False``, ``x``/``y`` are the cells' edges
    (one more than the columns/rows: a lat/lon grid), and ``shapes`` outline rectangles on it.
    With ``degrees=True`` (``x`` longitude, ``y`` latitude edges), the map keeps the area's true
    shape: :func:`map_axes`.

    >>> spec = heat_map(["a", "b"], ["u"], np.array([[1.0, 2.0]]), np.zeros((1, 2)),
    ...     np.full((1, 2), 3.0), xlabel="x", ylabel="y")
    >>> spec["data"][0]["z"], spec["data"][0]["customdata"]
    ([[1.0, 2.0]], [[[0.0, 3.0], [0.0, 3.0]]])
    """
    z = np.asarray(z, dtype=np.float64)
    custom = np.stack([np.asarray(lower, np.float64), np.asarray(upper, np.float64)], axis=-1)
    has_interval = bool(np.isfinite(custom).any())
    hover = (
        f"%{{x}}, %{{y}}<br>{hover_label} %{{z:,.1f}}"
        + ("<br>interval %{customdata[0]:,.1f} .. %{customdata[1]:,.1f}" if has_interval else "")
        + "<extra></extra>"
    )
    trace: dict[str, Any] = {
        "type": "heatmap",
        "x": list(x) if categorical else _list(x),
        "y": list(y) if categorical else _list(y),
        "z": z.tolist(),
        "customdata": custom.tolist(),
        "hovertemplate": hover,
        "colorscale": "Viridis",
        "colorbar": {"title": {"text": hover_label}},
    }
    axis_type = "category" if categorical else "linear"
    layout: dict[str, Any] = {
        "margin": {"l": 80, "r": 20, "t": 10, "b": 70},
        "xaxis": {"title": {"text": xlabel}, "type": axis_type, "automargin": True},
        "yaxis": {"title": {"text": ylabel}, "type": axis_type, "automargin": True},
    }
    if degrees:
        layout["xaxis"].update(map_axes(trace["x"], trace["y"])["xaxis"])
        layout["yaxis"].update(map_axes(trace["x"], trace["y"])["yaxis"])
        trace["hovertemplate"] = hover.replace("%{x}, %{y}", "latitude %{y}°, longitude %{x}°")
    if shapes:
        layout["shapes"] = list(shapes)
    return {"data": [trace], "layout": layout}


def map_aspect(
    lon_edges: Sequence[float] | NDArray[np.float64],
    lat_edges: Sequence[float] | NDArray[np.float64],
) -> float:
    """Width over height of the area between the outer edges on an equirectangular map scaled at
    the mid-latitude: a degree of longitude is ``cos(latitude)`` times as long on the ground as a
    degree of latitude (on a sphere), so ``width / height = dlon cos(mid-latitude) / dlat``
    (Snyder, *Map Projections: A Working Manual*, USGS Professional Paper 1395, 1987, the
    equidistant cylindrical projection, eqs. 12-1 and 12-2 with the standard parallel at mid-latitude).

    >>> round(map_aspect([116.20, 116.52], [39.80, 40.12]), 4)  # as tall as wide in degrees
    0.7665
    """
    dlon = float(lon_edges[-1]) - float(lon_edges[0])
    dlat = float(lat_edges[-1]) - float(lat_edges[0])
    mid = math.radians((float(lat_edges[0]) + float(lat_edges[-1])) / 2.0)
    return dlon * math.cos(mid) / dlat


def map_axes(
    lon_edges: Sequence[float] | NDArray[np.float64],
    lat_edges: Sequence[float] | NDArray[np.float64],
) -> dict[str, Any]:
    """Plotly axes of a map: exactly the area's extent, tick labels in degrees, and a degree of
    latitude drawn ``1 / cos(mid-latitude)`` times as long as a degree of longitude (``scaleanchor``
    with ``scaleratio``; ``constrain="domain"`` shrinks the plotting area, not the extent), so the
    plotted area's width over height is :func:`map_aspect`.

    >>> axes = map_axes([0.0, 2.0], [59.0, 61.0])
    >>> round(axes["yaxis"]["scaleratio"], 4), axes["xaxis"]["ticksuffix"]
    (2.0, '°')
    """
    mid = math.radians((float(lat_edges[0]) + float(lat_edges[-1])) / 2.0)
    common = {"ticksuffix": "°", "constrain": "domain", "showgrid": False, "zeroline": False}
    return {
        "xaxis": {**common, "range": [float(lon_edges[0]), float(lon_edges[-1])]},
        "yaxis": {
            **common,
            "range": [float(lat_edges[0]), float(lat_edges[-1])],
            "scaleanchor": "x",
            "scaleratio": 1.0 / math.cos(mid),
        },
    }


def rectangle(x0: float, x1: float, y0: float, y1: float) -> dict[str, Any]:
    """An outlined, unfilled rectangle on the data axes (a released leaf).

    >>> rectangle(0, 1, 2, 3)["type"]
    'rect'
    """
    return {
        "type": "rect",
        "xref": "x",
        "yref": "y",
        "x0": float(x0),
        "x1": float(x1),
        "y0": float(y0),
        "y1": float(y1),
        "line": {"color": "rgba(255,255,255,0.8)", "width": 0.7},
        "fillcolor": "rgba(0,0,0,0)",
    }


def error_chart(
    names: Sequence[str],
    errors: Sequence[float],
    *,
    xlabel: str,
    bound: float | None = None,
    bound_label: str = "",
) -> dict[str, Any]:
    """Bars of each candidate's expected total squared error, with a lower ``bound`` as a dashed
    line when given (log scale: candidates differ by orders of magnitude).

    >>> spec = error_chart(["identity", "hb"], [10.0, 4.0], xlabel="strategy", bound=2.0)
    >>> spec["layout"]["shapes"][0]["y0"], spec["layout"]["yaxis"]["type"]
    (2.0, 'log')
    """
    trace = {
        "type": "bar",
        "x": list(names),
        "y": [float(e) for e in errors],
        "hovertemplate": "%{x}: %{y:.4g}<extra></extra>",
        "marker": {"color": "#4878a8"},
        "name": "expected error",
    }
    layout: dict[str, Any] = {
        "margin": {"l": 80, "r": 20, "t": 10, "b": 80},
        "xaxis": {"title": {"text": xlabel}, "type": "category", "automargin": True},
        "yaxis": {"title": {"text": "expected total squared error"}, "type": "log"},
    }
    if bound is not None and bound > 0:
        layout["shapes"] = [
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": float(bound),
                "y1": float(bound),
                "line": {"color": "#c0392b", "width": 2, "dash": "dash"},
            }
        ]
        layout["annotations"] = [
            {
                "xref": "paper",
                "x": 1,
                "xanchor": "right",
                "yref": "y",
                "y": float(np.log10(bound)),
                "yanchor": "bottom",
                "text": bound_label,
                "showarrow": False,
                "font": {"color": "#c0392b"},
            }
        ]
    return {"data": [trace], "layout": layout}


__all__ = ["bar_chart", "error_chart", "heat_map", "map_aspect", "map_axes", "rectangle"]
