"""The HTML page of a publication: several releases from one data set under one budget.

The page states the guarantee of the whole publication in sentences and one table (each table's
share of the budget, its weight and the basis of its share) and links each table's own report.
It is built from the publication's manifest alone (the shares and the mechanisms), which holds no
exact figure: every number on it is public or post-processing of the releases.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpcube.files import write_atomic
from dpcube.release.base import REPORT
from dpcube.release.marks import forget_written, remember_written, written_sha256
from dpcube.report.html import esc, key_value_table, page, table

#: The publication's HTML page, beside ``publication.json`` in the publication's directory.
PUBLICATION_HTML = "publication.html"
#: Each table's own HTML report, in the table's directory.
TABLE_REPORT = "report.html"


def build_publication_report(manifest: Mapping[str, Any], *, linked: set[str] | None = None) -> str:
    """The publication's HTML page from its manifest (``publication.json``).

    ``linked``: the tables whose ``report.html`` exists, linked from the shares table (None:
    every table). Every table's ``report.md`` is linked.
    """
    tables = list(manifest["tables"])
    epsilon = float(manifest["epsilon"])
    neighbour = str(manifest["neighbour"]).replace("_", "/")
    guarantee = (
        f"<p>{len(tables)} tables released from one data set under one budget of epsilon = "
        f"{esc(f'{epsilon:g}')} ({esc(neighbour)} neighbours), charged once to the data set's "
        "ledger. Each table is its own differentially private release with its share of the "
        "budget; the shares sum to at most epsilon, so by sequential composition (Dwork and Roth, "
        "The Algorithmic Foundations of Differential Privacy, 2014, Theorem 3.14) the whole "
        f"publication is epsilon = {esc(f'{epsilon:g}')} differentially private.</p>"
        "<p>The budget is split to minimise the weighted mean squared error per query: "
        "eps_i = E (w_i c_i)^(1/3) / sum_j (w_j c_j)^(1/3), with c_i the planner's error at "
        "epsilon 1 and w_i the table's weight; a table whose error depends on the data gets "
        "E w_i / sum w.</p>"
    )
    summary = key_value_table(
        "publication-guarantee",
        [
            ("publication", f"<code>{esc(manifest['publication_id'])}</code>"),
            ("total epsilon", esc(f"{epsilon:g}")),
            ("neighbours", esc(neighbour)),
            ("composition", esc(manifest["composition"])),
            ("charged to the ledger", "yes" if manifest["accounted"] else "no"),
            ("for publication", "yes" if manifest["for_publication"] else "NO"),
        ],
    )
    rows = []
    for t in tables:
        name = str(t["name"])
        links = [f'<a href="{esc(name)}/{REPORT}">{REPORT}</a>']
        if linked is None or name in linked:
            links.insert(0, f'<a href="{esc(name)}/{TABLE_REPORT}">{TABLE_REPORT}</a>')
        rows.append(
            [
                esc(name),
                esc(t["mechanism"]),
                esc(f"{float(t['epsilon']):.4g}"),
                esc(f"{float(t['epsilon']) / epsilon:.1%}"),
                esc(f"{float(t['weight']):g}"),
                esc(t["basis"]),
                " ".join(links),
            ]
        )
    shares = table(
        "publication-shares",
        ["table", "mechanism", "epsilon", "share", "weight", "basis", "report"],
        rows,
        caption="Each table's share of the budget",
    )
    warning = (
        ""
        if manifest["for_publication"]
        else '<p class="note"><strong>NOT FOR PUBLICATION</strong>: the noise was seeded or '
        "nothing was charged.</p>"
    )
    body = (
        f"<h1>dpcube publication: {len(tables)} tables, epsilon = {esc(f'{epsilon:g}')}</h1>"
        f'<section id="guarantee"><h2>Guarantee</h2>{guarantee}{summary}{warning}</section>'
        f'<section id="tables"><h2>Tables</h2>{shares}</section>'
    )
    meta = {
        "dpcube-mechanism": "publication",
        "dpcube-release-kind": "publication",
        "dpcube-for-publication": "yes" if manifest["for_publication"] else "no",
    }
    return page(
        f"dpcube publication {manifest['publication_id']}",
        str(manifest["publication_id"]),
        meta,
        body,
        with_plotly=False,  # no figures on this page: each table's report draws its own
    )


def write_publication_report(
    directory: str | os.PathLike[str],
    manifest: Mapping[str, Any],
    *,
    linked: set[str] | None = None,
) -> Path:
    """Write :func:`build_publication_report` atomically to ``directory/publication.html``."""
    target = Path(directory) / PUBLICATION_HTML
    data = build_publication_report(manifest, linked=linked).encode("utf-8")
    earlier = written_sha256(target)
    digest = hashlib.sha256(data).hexdigest()
    remember_written(target, digest)
    write_atomic(target, data)
    if earlier is not None and earlier != digest:
        forget_written(target, earlier)
    return target


__all__ = [
    "PUBLICATION_HTML",
    "TABLE_REPORT",
    "build_publication_report",
    "write_publication_report",
]
