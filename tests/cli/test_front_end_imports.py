"""The front ends share the library, not each other: the service and the report (the library's
HTML report, which ``dpcube release`` and ``dpcube report`` both write) import nothing of the
command line, and nothing below them imports any of them; the command line reaches the service
and the report only inside functions or from the module of the sub-command that uses them
(``dpcube.cli.report``), loaded only when that sub-command runs."""

from __future__ import annotations

import ast
from pathlib import Path

import dpcube

PACKAGE = Path(dpcube.__file__).resolve().parent
FRONT_ENDS = ("dpcube.cli", "dpcube.serve", "dpcube.report")


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Every module ``path`` imports, and whether at module level."""
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, id(node) in top))
    return found


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py")) if folder else sorted(PACKAGE.rglob("*.py"))


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_service_and_report_import_nothing_of_the_command_line() -> None:
    bad = [
        f"{p.relative_to(PACKAGE)} imports {m}"
        for folder in ("serve", "report")
        for p in _modules(folder)
        for m, _ in _imports(p)
        if _under(m, "dpcube.cli")
    ]
    assert not bad, bad


#: Modules of one sub-command each, imported only when it runs (``dpcube.registry.COMMANDS``).
SUB_COMMAND_MODULES = {"report.py"}


def test_command_line_reaches_service_and_report_only_lazily() -> None:
    bad = [
        f"{p.relative_to(PACKAGE)} imports {m} at module level"
        for p in _modules("cli")
        if p.name not in SUB_COMMAND_MODULES
        for m, top in _imports(p)
        if top and (_under(m, "dpcube.serve") or _under(m, "dpcube.report"))
    ]
    assert not bad, bad


def test_nothing_below_the_front_ends_imports_them() -> None:
    front = {"cli", "serve", "report", "experiments", "demo"}
    bad = [
        f"{p.relative_to(PACKAGE)} imports {m}"
        for p in _modules("")
        if p.relative_to(PACKAGE).parts[0] not in front
        and p.name not in ("__main__.py", "registry.py")
        for m, _ in _imports(p)
        if any(_under(m, f) for f in FRONT_ENDS)
    ]
    assert not bad, bad
