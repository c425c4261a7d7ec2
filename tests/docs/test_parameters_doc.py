"""docs/parameters.md is the table the mechanisms' parameter declarations give."""

from __future__ import annotations

from pathlib import Path

from dpcube import registry
from dpcube.testing.parameters_doc import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "parameters.md"


def test_the_page_is_generated_from_the_declarations() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/parameters.md is stale: run python -m dpcube.testing.parameters_doc docs/parameters.md"
    )


def test_the_page_lists_every_parameter_of_every_mechanism() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for name in registry.MECHANISMS:
        cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
        for param in cls.accepted_params():
            assert f"| `{name}` | `{param}` |" in text, (name, param)
