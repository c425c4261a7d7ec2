"""``docs/parameters.md``: every registered mechanism's parameters and their declared domains.

The table is generated from the declarations (``param_specs``, :class:`dpcube.mechanisms.params.
ParamSpec`) that the constructors, ``--param`` and the audit also use, so it cannot drift from
them; ``tests/docs/test_parameters_doc.py`` fails when the page is not what :func:`render` gives.
Regenerate with ``python -m dpcube.testing.parameters_doc docs/parameters.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dpcube import registry
from dpcube.mechanisms.params import parameter_table

HEADER = """# Mechanism parameters

Every `--param KEY=VALUE` of `dpcube release` and `dpcube audit`, and every keyword of a
mechanism's constructor besides `epsilon`, `delta` and `neighbour`, has one declared domain. The
constructor, `--param` and `dpcube audit --sweep` all check or draw from that declaration; a value
outside it is refused with one line naming the mechanism, the parameter, the value and the domain,
before anything is counted or charged:

```text
error: ug: --param c=-1 is outside its domain: expected a number > 0 (the constant of m = ceil(sqrt(N eps / c)))
```

"Null" means the parameter may be left unset (`--param height=null`, or `None` in Python) for the
behaviour its meaning describes. Some checks involve more than one parameter or the schema and run
in the mechanism's `validate`, still before the charge (for example `eps_height` must be below
epsilon, HTF's `eps_level` must leave a data budget, `publish` must name attributes of the
schema). This page is generated from the declarations by
`python -m dpcube.testing.parameters_doc docs/parameters.md`; a test fails when it is stale.

"""


def render() -> str:
    """The whole page."""
    rows = []
    for name in registry.MECHANISMS:
        cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
        rows.append((name, cls.parameters()))
    return HEADER + parameter_table(rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dpcube.testing.parameters_doc docs/parameters.md", file=sys.stderr)
        return 2
    Path(args[0]).write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
