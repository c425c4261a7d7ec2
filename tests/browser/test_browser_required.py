"""Without the browser the browser tests FAIL, saying how to install it (``make browser``); they
are skipped only when ``DPCUBE_SKIP_BROWSER_TESTS`` opts out explicitly. Checked by running
pytest on one browser test in a subprocess with the browser's path pointing nowhere (the check
runs before any release is built or any process started, so this costs only pytest's start-up).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_missing_browser_fails_and_says_make_browser(tmp_path: Path) -> None:
    target = str(HERE / "test_report.py") + "::test_report_figures_render[cube]"
    env = {**os.environ, "DPCUBE_CHROMIUM": str(tmp_path / "no-chromium")}
    env.pop("DPCUBE_SKIP_BROWSER_TESTS", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-rfE", target],
        capture_output=True, text=True, env=env, cwd=HERE.parents[1], timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:]  # failed, not skipped
    assert "make browser" in result.stdout and "no-chromium" in result.stdout
    assert "DPCUBE_SKIP_BROWSER_TESTS=1" in result.stdout  # the documented opt-out is named
