"""``dpcube demo``: generate, release with Identity, answer example queries, show the errors."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import yaml
from rich.table import Table

from dpcube import progress
from dpcube.demo.generator import schema_dict, write_people
from dpcube.errors import UsageError
from dpcube.histogram import histogram
from dpcube.mechanisms.identity import Identity
from dpcube.privacy.ledger import BudgetLedger, validate_privacy
from dpcube.release.cells import box_sums, prefix_sums
from dpcube.report import write_report
from dpcube.schema import Schema

EXAMPLE_QUERIES: list[tuple[str, dict[str, object]]] = [
    ("everyone", {}),
    ("women aged 18-64", {"sex": "F", "age": [18, 64]}),
    ("professionals in Cascadia", {"occupation": "Professional", "county": "Cascadia"}),
    ("doctors aged 30-39", {"occupation": "Doctor", "age": [30, 39]}),
    (
        "income $150k+ in Aurora-Central",
        {"income": [150_000, 9_999_999], "county": "Aurora-Central"},
    ),
    (
        "retired men in Deltana-Port",
        {"occupation": "Retired", "sex": "M", "county": "Deltana-Port"},
    ),
    ("teenagers (13-19) in Fenwick", {"age": [13, 19], "county": "Fenwick"}),
]


#: What the demo writes into its output directory (and so what a rerun may replace).
DEMO_MARKER = ".dpcube-demo"
DEMO_FILES = frozenset({DEMO_MARKER, "people.parquet", "schema.yaml", "dpcube-home", "release"})


def check_demo_directory(out: Path) -> None:
    """Refuse an output directory that holds anything the demo did not write.

    A new or empty directory, or one an earlier demo wrote (it holds :data:`DEMO_MARKER`), is
    accepted; in the latter only the demo's own files are replaced.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); (d / "mine.csv").write_text("x")
    1
    >>> try:
    ...     check_demo_directory(d)
    ... except UsageError as exc:
    ...     print("refused:", "mine.csv" in str(exc))
    refused: True
    """
    if out.exists() and not out.is_dir():
        raise UsageError(f"demo --out {str(out)!r} is a file; give a new or empty directory")
    if not out.is_dir():
        return
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    if DEMO_MARKER not in entries:
        raise UsageError(
            f"demo --out {str(out)!r} is not empty and was not written by the demo (it holds "
            f"{entries[0]!r}); give a new or empty directory"
        )
    foreign = [name for name in entries if name not in DEMO_FILES]
    if foreign:
        raise UsageError(
            f"demo --out {str(out)!r} holds {foreign[0]!r}, which the demo did not write; "
            "move it or give another directory"
        )


def run_demo(rows: int, out: Path, epsilon: float, seed: int) -> int:
    validate_privacy(epsilon)
    check_demo_directory(out)
    console = progress.stdout_console()
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    (out / DEMO_MARKER).write_text("written by `dpcube demo`; a rerun replaces the demo's files\n")
    data = out / "people.parquet"
    with progress.step(f"generating {rows:,} synthetic persons"):
        write_people(data, rows, seed)
    schema_file = out / "schema.yaml"
    schema_file.write_text(yaml.safe_dump(schema_dict(), sort_keys=False))
    schema = Schema.from_dict(schema_dict())

    # The demo's synthetic table has a budget home of its own (never the user's $DPCUBE_HOME),
    # started afresh on each run with a total of 1: the records are regenerated, not real people.
    home = out / "dpcube-home"
    shutil.rmtree(home, ignore_errors=True)
    ledger = BudgetLedger.for_dataset(data, home=home)
    ledger.set_total(max(1.0, epsilon))

    with progress.step("counting with DuckDB"):
        hist = histogram(data, schema)
    mechanism = Identity(epsilon=epsilon)
    with progress.step("releasing with Identity (discrete Laplace)"):
        release = mechanism.release(hist, ledger=ledger)
    # The demo owns out/release: a rerun replaces its earlier release (and nothing else).
    release_dir = release.save(out / "release", overwrite=True)
    report_started = time.process_time()
    with progress.step("writing the HTML report"):
        report = write_report(release_dir)
    report_cpu = time.process_time() - report_started

    queries = [q for _, q in EXAMPLE_QUERIES]
    boxes = release.boxes(queries)
    truth = box_sums(prefix_sums(hist.counts), boxes)
    answers = release.answer_many(queries)
    stddev = np.sqrt(release.variance_many(queries))

    console.print(
        f"[bold]dpcube demo[/bold]: {rows:,} synthetic persons, domain {' x '.join(map(str, schema.shape))} "
        f"= {schema.size:,} cells, Identity mechanism, epsilon = {epsilon} (add/remove one person)"
    )
    table = Table("query", "true", "released", "± 2 sd", "error", "relative error")
    for (label, _), t, a, s in zip(EXAMPLE_QUERIES, truth, answers, stddev, strict=True):
        rel = abs(a - t) / max(float(t), 1.0)
        table.add_row(
            label, f"{int(t):,}", f"{a:,.0f}", f"{2 * s:,.0f}", f"{a - t:+,.0f}", f"{rel:.2%}"
        )
    console.print(table)
    left = ledger.remaining()
    console.print(
        f"budget: spent {epsilon} of {ledger.total().epsilon}; {left.epsilon:g} left for this data set"
    )
    console.print(
        f"data:    {data}\nschema:  {schema_file}\nrelease: {release_dir} (summary: {release_dir / 'report.md'})"
    )
    console.print(f"report:  {report} ({report_cpu:.1f} CPU s; open it in any browser, offline)")
    console.print(f"serve it: dpcube serve {release_dir}", soft_wrap=True)
    example = json.dumps({"occupation": "Engineer", "age": [25, 34]})
    console.print(f"try:     dpcube query {release_dir} --where '{example}' --json", soft_wrap=True)
    console.print(f"done in {time.perf_counter() - started:.1f} s")
    return 0
