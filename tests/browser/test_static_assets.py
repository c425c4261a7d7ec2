"""The explorer's files (no browser needed): they come from the package and ask nothing of the
network but the service they are served from ("no build step that needs the
network at install time; assets come from the package")."""

from __future__ import annotations

import re
from pathlib import Path

import dpcube.serve.app as app

STATIC = Path(app.STATIC_DIR)
FILES = ("explorer.html", "explorer.js", "explorer.css")


def test_the_page_and_its_assets_are_in_the_package() -> None:
    for name in FILES:
        assert (STATIC / name).is_file(), name
    html = (STATIC / "explorer.html").read_text()
    linked = re.findall(r'(?:src|href)="([^"]+)"', html)
    local = [u for u in linked if u.startswith("/static/")]
    assert sorted(local) == ["/static/explorer.css", "/static/explorer.js"]
    for url in local:
        assert (STATIC / url.removeprefix("/static/")).is_file(), url
    # the only other links: the report link's placeholder (set by the script to the service's
    # report route), the service's own API page and an inline (empty) icon
    assert sorted(set(linked) - set(local)) == ["#", "/docs", "data:,"]


def test_no_file_names_another_host() -> None:
    for name in FILES:
        text = (STATIC / name).read_text()
        # absolute URLs (http:, https:, protocol-relative //host) and CSS imports of fonts
        assert not re.search(r"https?:|(?<![:\w])//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(", text), (
            name
        )
        assert not re.search(r"^\s*import\b|\bimport\(", text, re.M), name  # no module loads
