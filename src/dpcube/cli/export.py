"""``dpcube export`` (labelled tables to CSV or Parquet) and the table printing of ``dpcube query
--group-by``.

``dpcube export REL --format csv|parquet [--out FILE] [--level L] [--cuboid a,b] [--where ...]``
writes the release's labelled table (:func:`dpcube.release.tables.labelled_table`): to ``--out``
(atomically, :func:`dpcube.files.write_atomic`), or for CSV without ``--out`` to stdout.
A data-cube release without ``--cuboid`` writes one file per published cuboid into the directory
``--out``. An existing file is replaced only with ``--overwrite`` and only when dpcube export wrote it
there and nobody changed it since (:func:`written_by_dpcube`: a keyed mark, never its header).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

from dpcube.errors import UsageError
from dpcube.query_text import parse_where, split_names

#: The encodings of ``--format`` (:data:`dpcube.release.formats.FORMATS`, not imported here so
#: that building the parser loads no release code).
FORMATS = ("csv", "parquet")


def check_level(level: float) -> float:
    """A confidence level strictly between 0 and 1 (``--level``)."""
    if not 0.0 < level < 1.0 or math.isnan(level):
        raise UsageError(
            f"--level must be a confidence level between 0 and 1 (e.g. 0.95), got {level}"
        )
    return level


def format_table(rows: Any, precision: str = "significant") -> str:
    """Labelled rows as aligned text: the labels, the estimate and its interval, in
    ``precision`` (:data:`dpcube.release.formats.PRECISIONS`: ``"whole"`` writes counts as
    whole numbers with each interval rounded outward), then how many rows and what the
    interval is."""
    from dpcube.release.formats import format_number, plural

    info = rows.info
    columns = rows.columns
    hidden = {"level", "noise_sd", "error_kind", "stddev", "interval_kind", "interval_reason"}
    flags = list(columns.get("trusted", []))
    if all(flags):  # every interval trusted: no column; else a visible NO per row
        hidden.add("trusted")
    names = [
        n
        for n in columns
        if n not in hidden and not (n.endswith(("_lo", "_hi")) and n[:-3] in columns)
    ]

    # the figures a count has: each written in ``precision``; any other number (a label's
    # value) with its six significant digits, or all of them for full precision
    sides = {"estimate": "", "lower": "lower", "upper": "upper"}
    other = "full" if precision == "full" else "significant"

    def cell(value: Any, name: str) -> str:
        if isinstance(value, bool):
            return "yes" if value else "NO"
        if isinstance(value, float):
            if name in sides:
                return format_number(value, precision, sides[name])
            return format_number(value, other)
        return str(value)

    body = [[cell(columns[n][i], n) for n in names] for i in range(rows.num_rows)]
    widths = [max([len(n), *(len(r[k]) for r in body)]) for k, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    lines.append(plural(rows.num_rows, "row"))
    level = float(info.get("level") or 0.0)
    kind = info.get("error_kind")
    if kind == "exact":
        lines.append(f"lower/upper: {100 * level:g}% interval (exact noise sd)")
    elif kind == "bound":
        lines.append(f"lower/upper: {100 * level:g}% bound interval, valid on any data")
    elif kind == "bootstrap":
        lines.append(
            f"lower/upper: {100 * level:g}% bootstrap interval ({info.get('error_reason')})"
        )
    else:
        lines.append(f"no error estimate: {info.get('error_reason')}")
    if not all(flags):
        reasons = sorted(
            {
                str(r)
                for r, ok in zip(columns.get("interval_reason", []), flags, strict=True)
                if not ok
            }
        )
        lines.append(f"trusted NO: interval NOT TRUSTED ({'; '.join(reasons)})")
    return "\n".join(lines)


def written_by_dpcube(path: Path) -> bool:
    """Whether ``path`` is a table ``dpcube export`` wrote there, unchanged since: recognised by
    the keyed mark of its path and content recorded when it was written
    (:func:`dpcube.release.marks.written_sha256`), never by its header or metadata, which any
    file may carry."""
    from dpcube.release.marks import written_sha256

    return written_sha256(path) is not None


def check_target(path: Path, fmt: str, overwrite: bool) -> None:
    """Refuse a target dpcube may not write (before anything is computed)."""
    if path.is_dir():
        raise UsageError(f"--out {str(path)!r} is a directory; name a file")
    if path.exists():
        if not overwrite:
            raise UsageError(
                f"--out {str(path)!r} exists; pass --overwrite to replace an earlier dpcube export"
            )
        if not written_by_dpcube(path):
            raise UsageError(
                f"--out {str(path)!r} was not written by dpcube export under this DPCUBE_HOME, "
                "or was changed since; refusing to overwrite it: choose another file or move it"
            )
    if not path.parent.is_dir():
        raise UsageError(f"--out {str(path)!r}: directory {str(path.parent)!r} does not exist")


def cuboid_file_name(cuboid: list[str], fmt: str) -> str:
    """``cuboid-sex-income.csv`` (``cuboid-total`` for the cuboid of no attribute).

    >>> cuboid_file_name(["sex", "income"], "csv"), cuboid_file_name([], "parquet")
    ('cuboid-sex-income.csv', 'cuboid-total.parquet')
    """
    safe = ["".join(c if c.isalnum() or c in "_." else "_" for c in n) for n in cuboid]
    return f"cuboid-{'-'.join(safe) or 'total'}.{fmt}"


def cmd_export(args: argparse.Namespace) -> int:
    from dpcube.files import write_atomic
    from dpcube.release.base import load_release, publication_warning
    from dpcube.release.formats import encode, plural
    from dpcube.release.marks import forget_written, remember_written, written_sha256
    from dpcube.release.tables import labelled_table, table_info

    level = check_level(args.level)
    if args.format == "parquet" and not args.out:
        raise UsageError("--format parquet needs --out FILE (Parquet is not written to a terminal)")
    release = load_release(args.release)
    where = parse_where(args.where)
    if args.overlapping:
        if release.schema is None:
            raise UsageError("--overlapping applies to releases with a schema; this one has none")
        where = release.schema.with_overlapping(where)
    cuboids: list[list[str] | None]
    if args.cuboid is not None:
        cuboids = [split_names(args.cuboid, "--cuboid")]
    else:
        cuboids = release.export_tables()
    several = len(cuboids) > 1
    targets: list[Path | None]
    if not args.out:
        if several:
            raise UsageError(
                "this data-cube release has several cuboids: pass --out DIR (one file per "
                "cuboid) or --cuboid a,b"
            )
        targets = [None]
    elif several:
        directory = Path(args.out)
        if directory.exists() and not directory.is_dir():
            raise UsageError(f"--out {args.out!r} must be a directory for several cuboids")
        directory.mkdir(parents=True, exist_ok=True)
        targets = [directory / cuboid_file_name(c or [], args.format) for c in cuboids]
    else:
        targets = [Path(args.out)]
    for target in targets:
        if target is not None:
            check_target(target, args.format, args.overwrite)
    written: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    for cuboid, target in zip(cuboids, targets, strict=True):
        table = labelled_table(release, level=level, cuboid=cuboid, where=where)
        info = table_info(table)
        data = encode(table, args.format)
        if target is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            earlier = written_sha256(target)
            digest = hashlib.sha256(data).hexdigest()
            remember_written(target, digest)
            write_atomic(target, data)
            if earlier is not None and earlier != digest:
                forget_written(target, earlier)
        written.append(
            {"path": str(target) if target else "-", "rows": table.num_rows, "cuboid": cuboid}
        )
    warning = publication_warning(release.metadata)
    if warning:
        print(warning, file=sys.stderr)
    summary = {
        "files": written,
        "format": args.format,
        "level": level,
        "error_kind": info.get("error_kind"),
        "error_reason": info.get("error_reason"),
    }
    out = sys.stderr if targets == [None] else sys.stdout
    if args.json:
        print(json.dumps(summary), file=out)
    else:
        for w in written:
            print(f"wrote {plural(w['rows'], 'row')} to {w['path']}", file=out)
        kind = info.get("error_kind")
        what = (
            f"{100 * level:g}% intervals ({kind})"
            if kind in ("exact", "bound", "bootstrap")
            else f"no error estimate ({info.get('error_reason')})"
        )
        print(f"lower/upper: {what}", file=out)
    return 0


def register(sub: Any) -> None:
    """Add ``dpcube export`` to the sub-command parsers."""
    p = sub.add_parser("export", help="write a release's labelled table (CSV or Parquet)")
    p.add_argument("release", help="release directory")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument(
        "--out",
        default=None,
        help="file to write (CSV: stdout when omitted; a directory for "
        "a data-cube release with several cuboids)",
    )
    p.add_argument("--level", type=float, default=0.95, help="confidence level of lower/upper")
    p.add_argument("--cuboid", default=None, metavar="A,B", help="one cuboid of a data cube")
    p.add_argument("--where", default="", help="restrict the rows (as for dpcube query)")
    p.add_argument(
        "--overlapping",
        action="store_true",
        help="answer value ranges off the bin edges with the bins they overlap",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace an earlier dpcube export at --out"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_export)
