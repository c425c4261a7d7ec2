"""A release's answers and tables as the outside world reads them: JSON values, the JSON of one
answer with its interval, a labelled table as JSON, and a table as CSV or Parquet bytes.

Shared by every front end (``dpcube query``/``export``, the HTTP service, the report), so that an
answer or a table reads the same wherever it is asked for.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

#: The table encodings :func:`encode` writes.
FORMATS = ("csv", "parquet")

#: How numbers are written for a person (``dpcube query``'s answers and tables): ``"whole"``
#: (counts: whole numbers, an interval rounded outward so that it still covers what it
#: covered), ``"significant"`` (six significant digits: a release of sums of a measure), or
#: ``"full"`` (every digit: the shortest text that reads back as the same float). JSON, CSV and
#: Parquet always carry the full figures.
PRECISIONS = ("whole", "significant", "full")


def precision_for(release: Any, full: bool = False) -> str:
    """The :data:`PRECISIONS` entry a release's answers are printed in: ``"full"`` when asked
    for, ``"whole"`` for counts, ``"significant"`` for sums of a measure."""
    if full:
        return "full"
    measure = getattr(release, "metadata", None)
    params = getattr(measure, "params", {}) or {}
    return "whole" if params.get("measure", "count") == "count" else "significant"


def format_number(value: float, precision: str = "significant", side: str = "") -> str:
    """One figure as text in ``precision`` (:data:`PRECISIONS`); for ``"whole"``, ``side``
    ``"lower"`` rounds down and ``"upper"`` up (an interval's ends), else to the nearest.

    >>> format_number(1095.54, "whole"), format_number(-0.476702, "whole")
    ('1096', '0')
    >>> format_number(12.2, "whole", "lower"), format_number(12.2, "whole", "upper")
    ('12', '13')
    >>> format_number(36.00000000005821, "significant"), format_number(0.1 + 0.2, "full")
    ('36', '0.30000000000000004')
    """
    x = float(value)
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if precision == "full":
        return repr(x)
    if precision == "whole":
        whole = math.floor(x) if side == "lower" else math.ceil(x) if side == "upper" else round(x)
        return str(int(whole))
    return f"{x:.6g}"


def plural(count: int, noun: str, many: str = "") -> str:
    """``count`` and the noun in its number (``many``: an irregular plural).

    >>> plural(1, "row"), plural(2, "row"), plural(12345, "row"), plural(0, "query", "queries")
    ('1 row', '2 rows', '12,345 rows', '0 queries')
    """
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


def format_spread(value: float, precision: str = "significant") -> str:
    """A standard deviation as text: three significant digits next to whole counts (at least
    the units digit), else as :func:`format_number`.

    >>> format_spread(2.236, "whole"), format_spread(1234.6, "whole"), format_spread(0.5, "full")
    ('2.24', '1235', '0.5')
    """
    x = float(value)
    if precision != "whole" or not math.isfinite(x):
        return format_number(x, precision)
    return str(round(x)) if abs(x) >= 1000 else f"{x:.3g}"


def json_ready(value: Any) -> Any:
    """``value`` with NaN and infinities as None (JSON ``null``), through mappings, lists,
    tuples and NumPy arrays and scalars (their Python values); anything else as it is.

    >>> json_ready({"a": [1.5, float("nan")], "b": np.array([2.0, np.inf]), "c": "x"})
    {'a': [1.5, None], 'b': [2.0, None], 'c': 'x'}
    >>> json_ready(float("-inf")) is None, json_ready(3)
    (True, 3)
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        listed = value.tolist()
        if value.dtype.kind == "f" and bool(np.isfinite(value).all()):
            return listed  # the common case: every float finite, nothing to replace
        return json_ready(listed)
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, np.generic):
        return json_ready(value.item())
    return value


def json_floats(values: Any) -> list[float | None]:
    """``values`` as floats for JSON (NaN and infinities as None).

    >>> json_floats([1, np.nan, 2.5])
    [1.0, None, 2.5]
    """
    listed: list[float | None] = json_ready(np.asarray(values, dtype=np.float64))
    return listed


def answers_json(u: Any) -> list[dict[str, Any]]:
    """Every answer of ``u`` (a :class:`dpcube.release.uncertainty.Uncertainty`) as JSON: the
    answer, its interval (``lower``/``upper``), its error (``stddev``, ``noise_sd``,
    ``error_kind``) and whether the interval is trusted, of which kind, and why (the float
    columns converted once for the whole batch)."""
    answers, lower, upper = json_floats(u.answers), json_floats(u.lower), json_floats(u.upper)
    stddev, noise = json_floats(u.stddev), json_floats(u.noise_sd)
    kind = str(u.kind)
    return [
        {
            "answer": a,
            "lower": lo,
            "upper": hi,
            "stddev": sd,
            "noise_sd": ns,
            "error_kind": kind,
            "trusted": u.trusted(i),
            "interval_kind": str(u.interval_kind[i]),
            "interval_reason": u.why(i),
        }
        for i, (a, lo, hi, sd, ns) in enumerate(
            zip(answers, lower, upper, stddev, noise, strict=True)
        )
    ]


def answer_json(u: Any, i: int, *, level: float) -> dict[str, Any]:
    """Answer ``i`` of ``u`` standing alone (``dpcube query --json``): as :func:`answers_json`
    writes it, with the confidence ``level`` after the interval and the release's
    ``error_reason`` after the error, which a batch states once for all its answers."""
    record = answers_json(u)[i]
    out: dict[str, Any] = {}
    for key, value in record.items():
        out[key] = value
        if key == "upper":
            out["level"] = level
        elif key == "error_kind":
            out["error_reason"] = u.reason
    return out


def table_json(rows: Any) -> dict[str, Any]:
    """Labelled rows (:class:`dpcube.release.tables.LabelledRows`) as ``{"level",
    "error_kind", "error_reason", "cuboid", "rows": [...]}``."""
    info = rows.info
    names = list(rows.columns)
    listed = [{n: json_ready(rows.columns[n][i]) for n in names} for i in range(rows.num_rows)]
    return {
        "level": info.get("level"),
        "error_kind": info.get("error_kind"),
        "error_reason": info.get("error_reason"),
        "cuboid": info.get("cuboid"),
        "rows": listed,
    }


def arrow_rows_json(table: Any) -> list[dict[str, Any]]:
    """The rows of an Arrow table as JSON objects; a column of floats has NaN and infinities
    as None."""
    columns = {}
    for column in table.column_names:
        values = table.column(column).to_pylist()
        floats = all(isinstance(v, float) for v in values)
        columns[column] = json_floats(values) if floats and values else values
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def encode(table: Any, fmt: str) -> bytes:
    """The Arrow table as CSV or Parquet bytes (``fmt``: one of :data:`FORMATS`)."""
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        return bytes(sink.getvalue().to_pybytes())
    import pyarrow.csv as pacsv

    buffer = io.BytesIO()
    pacsv.write_csv(table, buffer)
    return buffer.getvalue()


__all__ = [
    "FORMATS",
    "answer_json",
    "answers_json",
    "arrow_rows_json",
    "encode",
    "json_floats",
    "json_ready",
    "table_json",
]
