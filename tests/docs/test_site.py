"""The documentation site (mkdocs.yml) keeps up with docs/: every user page is in the nav, every
nav entry is a page, the index's links lead to pages of the site, and the generated reference
pages cover the whole public API and every command. `make docs` builds the site with warnings as
errors; these checks name the page that is missing.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pathspec
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
CONFIG = yaml.safe_load((REPO / "mkdocs.yml").read_text())
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


HOOKS = _tool("docs_hooks")
GENERATED = {HOOKS.CLI_PAGE, HOOKS.API_PAGE}


EXCLUDED = pathspec.PathSpec.from_lines("gitignore", CONFIG["exclude_docs"].splitlines())


def _nav_pages(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return []


def user_pages() -> set[str]:
    """The Markdown pages under docs/ that the site builds (the research pages excluded)."""
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    return {p for p in pages if not EXCLUDED.match_file(p)}


def test_the_research_records_live_beside_the_docs_and_every_page_is_built() -> None:
    assert not (DOCS / "experiments").exists() and not (DOCS / "benchmarks.md").exists()
    assert (REPO / "experiments" / "docs" / "README.md").is_file()
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert user_pages() == pages
    assert {"index.md", "reliability.md", "performance.md", "tutorials/heat-map.md"} <= pages


def test_the_nav_lists_every_user_page() -> None:
    nav = _nav_pages(CONFIG["nav"])
    missing = sorted(user_pages() - set(nav))
    assert not missing, f"pages in docs/ that mkdocs.yml's nav does not list: {missing}"


def test_every_nav_entry_is_a_page_once() -> None:
    nav = _nav_pages(CONFIG["nav"])
    unknown = sorted(set(nav) - user_pages() - GENERATED)
    assert not unknown, f"nav entries with no page in docs/ (or an excluded one): {unknown}"
    twice = sorted({p for p in nav if nav.count(p) > 1})
    assert not twice, f"pages listed twice in the nav: {twice}"


def test_the_index_links_lead_to_pages_of_the_site() -> None:
    links = _LINK.findall((DOCS / "index.md").read_text())
    assert len(links) >= 20
    pages = user_pages() | GENERATED
    broken = []
    for link in links:
        target = link.split("#")[0]
        if re.match(r"[a-z]+:", link) or not target:
            continue
        resolved = (DOCS / target).resolve().relative_to(DOCS.resolve()).as_posix()
        if resolved not in pages:
            broken.append(link)
    assert not broken, f"docs/index.md links to what the site does not have: {broken}"


def test_the_api_page_groups_every_public_name() -> None:
    import dpcube

    grouped = [n for names in HOOKS.API_GROUPS.values() for n in names]
    assert sorted(grouped) == sorted(dpcube.__all__), "API_GROUPS in tools/docs_hooks.py"
    page = HOOKS.api_reference()
    for name in dpcube.__all__:
        assert f"[`{name}`][" in page
    assert "## Other" not in page


def test_the_cli_page_has_every_command() -> None:
    from dpcube import registry

    page = HOOKS.cli_reference()
    for command in ["release", "query", "budget", "demo", *registry.COMMANDS]:
        assert f"## `dpcube {command}`" in page
        assert f"usage: dpcube {command}" in page


def test_the_docstring_extension_examples() -> None:
    module = _tool("griffe_docstrings")
    result = doctest.testmod(module)
    assert result.attempted >= 2 and result.failed == 0
