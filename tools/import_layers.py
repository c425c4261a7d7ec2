"""List the import cycles and the imports that run up the layers in ``dpcube``.

Uses grimp (the graph import-linter checks), which counts imports inside functions as well as
top-level ones. Run from the repository root: ``python tools/import_layers.py``; exits 1 when it
finds a cycle or an upward import.
"""

from __future__ import annotations

import sys

import grimp

# Bottom to top; a module may import only from its own layer or the layers below it.
LAYERS: list[list[str]] = [
    [
        "dpcube.errors",
        "dpcube.progress",
        "dpcube.version",
        "dpcube.files",
        "dpcube.registry",
        "dpcube.linalg",
        "dpcube.schema",
        "dpcube.schema_yaml",
        "dpcube.engine",
        "dpcube.query_text",
    ],
    ["dpcube.workloads"],
    ["dpcube.privacy", "dpcube.release", "dpcube.histogram"],
    ["dpcube.mechanisms"],
    ["dpcube.planning"],
    ["dpcube.audit", "dpcube.testing"],
    ["dpcube.report"],
    ["dpcube.demo"],
    ["dpcube.cli", "dpcube.serve", "dpcube.__main__"],
]


def layer_of(module: str) -> int | None:
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                return index
    return None


def main() -> int:
    graph = grimp.build_graph("dpcube", include_external_packages=False)
    modules = sorted(graph.modules)
    problems = 0
    upward: list[str] = []
    for importer in modules:
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            low, high = layer_of(importer), layer_of(imported)
            if low is not None and high is not None and high > low:
                upward.append(f"{importer} -> {imported}")
    # Strongly connected components (Tarjan) of the module graph.
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(node: str) -> None:
        index[node] = lowlink[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.find_modules_directly_imported_by(node):
            if target not in index:
                visit(target)
                lowlink[node] = min(lowlink[node], lowlink[target])
            elif target in on_stack:
                lowlink[node] = min(lowlink[node], index[target])
        if lowlink[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    print(f"cycles (strongly connected groups of modules): {len(cycles)}")
    for component in cycles:
        print("  " + " <-> ".join(component))
        problems += 1
    print(f"upward imports: {len(upward)}")
    for line in upward:
        print("  " + line)
        problems += 1
    unplaced = sorted({m for m in modules if layer_of(m) is None and m != "dpcube"})
    if unplaced:
        print("modules in no layer: " + ", ".join(unplaced))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
