"""The README and the tutorials run as written (doc examples must not rot).

Each page's ```console and ```python blocks run in order in a fresh directory holding a copy of
examples/, with DPCUBE_HOME in it; a command that fails, a Python block that raises, or an output
line the page shows that the command no longer prints (numbers aside) fails the test. The
convention is in tests/docs/doc_blocks.py and docs/tutorials/README.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import blocks, commands, run_page

REPO = Path(__file__).resolve().parents[2]
TUTORIALS = REPO / "docs" / "tutorials"
PAGES = [REPO / "README.md", REPO / "docs" / "getting-started.md", *sorted(TUTORIALS.glob("*.md"))]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "dpcube-home"))
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_page_runs_as_written(page: Path, workdir: Path) -> None:
    run_page(page, workdir)


def test_every_page_has_something_to_run() -> None:
    """A page whose blocks are all skipped or unmarked would pass without testing anything."""
    for page in PAGES:
        if page == TUTORIALS / "README.md":
            continue  # the index: its fences only illustrate the convention
        runnable = [b for b in blocks(page.read_text()) if b.runs]
        assert runnable, f"{page.name}: no ```console or ```python block runs"
        for block in runnable:
            if block.kind == "console":
                assert commands(block), f"{page.name}:{block.line}: a console block with no '$ '"


def test_the_readme_links_every_tutorial() -> None:
    readme = (REPO / "README.md").read_text()
    index = (TUTORIALS / "README.md").read_text()
    for page in TUTORIALS.glob("*.md"):
        if page.name != "README.md":
            assert f"tutorials/{page.name}" in readme or f"({page.name})" in index, page.name
    assert "docs/tutorials/" in readme
    for link in re.findall(r"\]\(([^)#]+)\)", index):
        assert (TUTORIALS / link).exists(), link


def test_examples_are_what_the_generator_writes(tmp_path: Path) -> None:
    """examples/make_examples.py reproduces the committed files byte for byte."""
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "make_examples.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
