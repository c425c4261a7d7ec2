"""docs/tutorials/fixed-width.md reads a hierarchical fixed-width file correctly.

The page's own code (DuckDB ``read_csv`` + ``substr``, and ``pandas.read_fwf``) is run and its
group-size table and histogram are compared with a plain line-by-line reading of the same file:
on the generated CPS-like file always, and on the real IPUMS CPS extract when ../shared/data is
present (where the national household sizes are also the figures of the data README).
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from doc_blocks import run_page

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "tutorials" / "fixed-width.md"
EXAMPLE = "examples/fixed-width/cps_like.dat"


def reference(path: Path) -> tuple[Counter[tuple[str, int]], Counter[tuple[int, str]]]:
    """(state, size) -> households and (age, sex) -> persons, read line by line: a person
    belongs to the last household record before it (the file's order) with the same serial."""
    import gzip

    opener: Any = gzip.open if path.suffix == ".gz" else open
    sizes: Counter[tuple[str, int]] = Counter()
    people: Counter[tuple[int, str]] = Counter()
    members: dict[tuple[str, str], int] = {}
    state_of: dict[tuple[str, str], str] = {}
    with opener(path, "rt") as f:
        for line in f:
            key = (line[1:5], line[5:10])
            if line[0] == "H":
                state_of[key] = "ST" + line[37:39]
                members.setdefault(key, 0)
            elif line[0] == "P":
                members[key] += 1
                people[(int(line[40:42]), {"1": "M", "2": "F"}[line[42]])] += 1
    for key, n in members.items():
        if n:
            sizes[(state_of[key], min(n, 7))] += 1
    return sizes, people


def check(namespace: dict[str, Any], path: Path) -> None:
    sizes, people = reference(path)
    table, hist = namespace["table"], namespace["hist"]
    states = {state for state, _ in sizes}
    for state in states:
        expected = [sizes[(state, s)] for s in range(1, 8)]
        assert table.row(state).tolist() == expected, state
    national = [sum(sizes[(st, s)] for st in states) for s in range(1, 8)]
    assert table.row("US").tolist() == national
    expected_hist = np.zeros(hist.counts.shape, dtype=np.int64)
    for (age, sex), n in people.items():
        expected_hist[age, ["F", "M"].index(sex)] = n
    np.testing.assert_array_equal(hist.counts, expected_hist)


def test_fixed_width_page_on_the_generated_file(tmp_path: Path, monkeypatch: Any) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    namespace = run_page(PAGE, tmp_path)
    check(namespace, tmp_path / EXAMPLE)
    # the generated file has vacant households (no P line): they are not groups
    text = (tmp_path / EXAMPLE).read_text().splitlines()
    vacant = sum(
        1 for a, b in zip(text, [*text[1:], "H"], strict=True) if a[0] == "H" and b[0] == "H"
    )
    assert vacant > 0
    assert namespace["table"].groups == sum(1 for line in text if line[0] == "H") - vacant


@pytest.mark.data
def test_fixed_width_page_on_the_real_cps_extract(
    data_dir: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    real = data_dir / "ipums_cps" / "cps_00421.dat.gz"
    if not real.is_file():
        pytest.skip(f"{real} is absent")
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    namespace = run_page(PAGE, tmp_path, {EXAMPLE: str(real)})
    check(namespace, real)
    # ../shared/data/README.md: national households of size 1..7+
    assert namespace["table"].row("US").tolist() == [25879, 30570, 12052, 9695, 4373, 1713, 1014]
    assert namespace["table"].hierarchy.level_sizes == (1, 51)
