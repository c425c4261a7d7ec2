"""Fixtures of the browser tests: three small seeded releases, one real
``dpcube serve --port 0`` process answering them, and one headless Debian Chromium driven by
Selenium, shared by every browser test of a worker (session scope: starting Chromium and the
server costs a few CPU seconds, paid once).

The browser must be installed: Debian's ``chromium`` and ``chromium-driver`` (``make browser``,
which ``make test`` runs). When they are missing the tests FAIL saying so, unless
``DPCUBE_SKIP_BROWSER_TESTS=1`` opts out explicitly (then they are skipped, with that reason).

Screenshots are test artefacts written under pytest's temporary directory (printed by the
``screenshots`` fixture); ``DPCUBE_SCREENSHOTS_DIR=docs/images`` also writes them there, which
is how the documentation's pictures are regenerated (docs/explorer.md).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpcube.cli.main import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
#: Debian's browser and its driver (``make browser`` installs both); ``DPCUBE_CHROMIUM`` and
#: ``DPCUBE_CHROMEDRIVER`` name another pair (e.g. a Chromium installed elsewhere).
CHROMIUM = Path(os.environ.get("DPCUBE_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("DPCUBE_CHROMEDRIVER", "/usr/bin/chromedriver"))
SKIP_ENV = "DPCUBE_SKIP_BROWSER_TESTS"
SCREENSHOTS_ENV = "DPCUBE_SCREENSHOTS_DIR"
#: Seconds an explicit wait may take: generous, since CI runs two workers on two cores and the
#: first answer of a bootstrap release computes its replicates. A wait ends as soon as its
#: condition holds; nothing sleeps a fixed time.
WAIT_S = 90
#: Bootstrap replicates of the served spatial and census releases: the least the library accepts
#: (MIN_RUNS), so the server starts fast; the tests compare the page with the API, not the
#: interval's accuracy.
RUNS = 20


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers xdist_group; without it (pytest -p no:xdist) the marker stays valid
    config.addinivalue_line("markers", "xdist_group(name): run these tests on one xdist worker")


def _require_browser() -> None:
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        pytest.skip(f"browser tests switched off by {SKIP_ENV}={os.environ[SKIP_ENV]}")
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        pytest.fail(
            f"the browser tests need Debian's chromium and chromium-driver ({', '.join(missing)} "
            f"missing): run `make browser` (as root or with sudo), or set {SKIP_ENV}=1 to skip them",
            pytrace=False,
        )


def _release(argv: list[str]) -> None:
    code = main(argv)
    assert code == 0, f"dpcube {' '.join(argv)} exited with {code}"


@pytest.fixture(scope="session")
def browser_releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three small seeded releases (so NOT FOR PUBLICATION) of the repository's examples: a data
    cube of the adult table, a location map (HTF) of the points, a census hierarchy of the
    households; each with its HTML report (``dpcube report``). Seed 1 gives the map a tree of
    many leaves (HTF's splits are noisy: some seeds keep only a few, a flat heat map)."""
    _require_browser()
    root = tmp_path_factory.mktemp("browser-releases")
    dirs = {kind: root / kind for kind in ("cube", "map", "census")}
    common = ["--epsilon", "1", "--seed", "1", "--total-epsilon", "10", "--no-report"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPCUBE_HOME", str(root / "home"))
        adult, location, census = EXAMPLES / "adult", EXAMPLES / "location", EXAMPLES / "census"
        _release(["release", str(adult / "people.csv"), "--schema", str(adult / "schema.yaml"),
                  "--mechanism", "datacube", "--publish", "k=2", "--out", str(dirs["cube"]),
                  *common])  # fmt: skip
        _release(["release", str(location / "points.csv"), "--schema",
                  str(location / "schema.yaml"), "--mechanism", "htf", "--on-out-of-domain",
                  "drop", "--out", str(dirs["map"]), *common])  # fmt: skip
        _release(["release", str(census / "persons.csv"), "--mechanism", "census-hierarchy",
                  "--group-by", "household", "--region", "county", "--hierarchy",
                  str(census / "regions.csv"), "--max-size", "8", "--top-code", "--groups-are-public",
                  "--out", str(dirs["census"]), *common])  # fmt: skip
        for directory in dirs.values():
            _release(["report", str(directory), "--runs", str(RUNS), "--bootstrap-seed", "1"])
    return dirs


@pytest.fixture(scope="session")
def served_url(browser_releases: dict[str, Path]) -> Iterator[str]:
    """``dpcube serve`` on a free loopback port (``--port 0``), as a user starts it; its URL."""
    cmd = [sys.executable, "-m", "dpcube", "serve", *map(str, browser_releases.values()),
           "--port", "0", "--runs", str(RUNS), "--bootstrap-seed", "1"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once the port is bound
        match = re.search(r"at (http://127\.0\.0\.1:\d+/)", first)
        if not match:
            proc.kill()
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"dpcube serve did not print its URL: {first!r} {err[-2000:]}")
        url = match.group(1)
        deadline = time.monotonic() + WAIT_S
        while True:  # the socket listens already; wait until uvicorn answers
            try:
                if httpx.get(url + "api/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, "dpcube serve exited before answering"
            assert time.monotonic() < deadline, "dpcube serve did not answer in time"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert "Traceback" not in err, err[-3000:]


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless Chromium (Debian's, through its ChromeDriver) with a fresh profile and the
    browser console log captured."""
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in (
        "--headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run "
        "--disable-background-networking --disable-component-update --disable-sync "
        "--disable-dev-shm-usage --window-size=1100,1300 --hide-scrollbars"
    ).split():
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    browser.set_page_load_timeout(WAIT_S)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Any, str], Path]:
    """``save(driver, name)``: a PNG of the page as a test artefact (pytest's temporary
    directory), and also in ``$DPCUBE_SCREENSHOTS_DIR`` when set (the docs' pictures)."""
    artefacts = tmp_path_factory.mktemp("screenshots")
    extra = os.environ.get(SCREENSHOTS_ENV)

    def save(browser: Any, name: str) -> Path:
        path = artefacts / f"{name}.png"
        assert browser.save_screenshot(str(path)), f"could not save the screenshot {path}"
        assert path.stat().st_size > 1000  # a real picture, not an empty file
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(extra) / path.name)
        return path

    return save


def _severe(browser: Any) -> list[dict[str, Any]]:
    return [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]


@pytest.fixture(scope="session")
def severe_console() -> Callable[[Any], list[dict[str, Any]]]:
    """``severe_console(driver)``: the SEVERE entries of the browser console since the last call
    (reading the log drains it)."""
    return _severe


@pytest.fixture(scope="session")
def api_answer(served_url: str) -> Callable[..., Any]:
    """``api_answer(release, query, level=0.95)``: the API's own answer to one query, by a direct
    ``POST /api/releases/{name}/answer`` (not through the page)."""

    def post(release: str, query: dict[str, Any], level: float = 0.95) -> Any:
        response = httpx.post(
            f"{served_url}api/releases/{release}/answer",
            json={"queries": [query], "level": level},
            timeout=WAIT_S,
        )
        assert response.status_code == 200, response.text
        return response.json()

    return post


@pytest.fixture(scope="session")
def wait() -> Callable[[Any, Callable[[Any], Any], str], Any]:
    """``wait(driver, condition, what)``: an explicit wait (WebDriverWait, up to ``WAIT_S``) for
    ``condition(driver)`` to be truthy; returns its value. Never a fixed sleep."""
    from selenium.webdriver.support.ui import WebDriverWait

    def until(browser: Any, condition: Callable[[Any], Any], what: str) -> Any:
        return WebDriverWait(browser, WAIT_S, poll_frequency=0.1).until(
            condition, message=f"waited {WAIT_S} s for {what}"
        )

    return until
