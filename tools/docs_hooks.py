"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

The command-line reference (``reference/cli.md``) is written at build time from the ``dpcube``
argparse parser itself, so that it cannot drift from the commands: one section per sub-command
with its ``--help`` text.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

# The pages describe the tree being built, whatever dpcube the environment has installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from griffe_docstrings import markdown_docstring

CLI_PAGE = "reference/cli.md"
API_PAGE = "reference/api.md"
HELP_WIDTH = 100


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = functools.partial(parser.formatter_class, width=HELP_WIDTH)  # type: ignore[assignment]
    return parser.format_help().rstrip()


def cli_reference() -> str:
    """The Markdown of the command-line reference: ``dpcube --help`` and each ``dpcube CMD --help``."""
    from dpcube.cli.main import build_parser

    parser = build_parser()
    lines = [
        "# Command line",
        "",
        "The `dpcube` command and its sub-commands, as `--help` prints them (this page is "
        "generated from the parser when the site is built). Every mechanism's own options are "
        "listed under `release`; the user guide explains them, family by family.",
        "",
        "## `dpcube`",
        "",
        "```text",
        _help(parser),
        "```",
        "",
    ]
    for name, sub in _subcommands(parser).items():
        lines += [f"## `dpcube {name}`", "", "```text", _help(sub), "```", ""]
    return "\n".join(lines)


#: The public names by topic, in the order the API page lists them; a name of ``dpcube.__all__``
#: missing here is listed under "Other" (tests/docs/test_site.py asserts there is none).
API_GROUPS: dict[str, tuple[str, ...]] = {
    "Schema and counting": ("Schema", "Hierarchy", "histogram", "Histogram", "SQL"),
    "Mechanisms": (
        "Mechanism",
        "Identity",
        "Privelet",
        "PriveletPlus",
        "MatrixMechanism",
        "DAWA",
        "DataCube",
        "CubeSource",
        "CensusHierarchy",
        "GroupSizeTable",
        "group_sizes",
        "RegionHierarchy",
        "HTF",
        "UniformGrid",
        "AdaptiveGrid",
        "QuadTree",
        "KDTree",
        "PrivTree",
        "Uniform",
        "Singular",
        "bound_contributions",
    ),
    "Planning": (
        "plan",
        "plan_mechanisms",
        "AutoMechanism",
        "auto_mechanism",
        "Publication",
        "release_publication",
        "load_publication",
    ),
    "Releases and uncertainty": (
        "Release",
        "load_release",
        "answer_uncertainty",
        "format_answer",
        "Uncertainty",
    ),
    "Privacy budget and randomness": ("BudgetLedger", "ledger_for", "NO_NOISE"),
    "Errors": ("DPCubeError",),
}


def _defined_in(name: str) -> str:
    """The dotted path of public name ``name`` in the module ``dpcube`` takes it from."""
    import dpcube

    module = dpcube._EXPORTS.get(name) or getattr(dpcube, name).__module__
    return f"{module}.{name}"


def _summary(name: str) -> str:
    import inspect

    import dpcube

    obj = getattr(dpcube, name)
    doc = inspect.getdoc(obj) if callable(obj) else None
    first = markdown_docstring((doc or "").strip().split("\n\n")[0]).replace("\n", " ")
    return first.replace("|", "\\|")


def api_reference() -> str:
    """The Markdown of the public API page: every name of ``dpcube.__all__`` by topic, each with
    the first paragraph of its docstring and a link to its full entry in the module pages."""
    import dpcube

    grouped = [n for names in API_GROUPS.values() for n in names]
    groups = dict(API_GROUPS)
    other = tuple(n for n in dpcube.__all__ if n not in grouped)
    if other:
        groups["Other"] = other
    lines = [
        "# Public API: `import dpcube`",
        "",
        "::: dpcube",
        "    options:",
        "      members: false",
        "      show_root_heading: false",
        "",
        "Every name below is `dpcube.NAME` (`dpcube.Schema`, `dpcube.histogram`, ...); the link leads to its full entry (signature, "
        "parameters, methods) in the page of the module that defines it. This page is generated "
        "from `dpcube.__all__` when the site is built.",
        "",
    ]
    for group, names in groups.items():
        lines += [f"## {group}", "", "| name | what it is |", "|---|---|"]
        for name in names:
            lines.append(f"| [`{name}`][{_defined_in(name)}] | {_summary(name)} |")
        lines.append("")
    return "\n".join(lines)


def on_files(files: Files, config: MkDocsConfig, **kwargs: Any) -> Files:
    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    files.append(File.generated(config, API_PAGE, content=api_reference()))
    return files
