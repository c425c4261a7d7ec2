"""The guarantee of a release in words: sentences and small two-column tables built from its
manifest metadata (:class:`dpcube.release.base.ReleaseMetadata`), shared by ``report.md`` and
the HTML report.

Nothing here prints JSON: a nested value becomes ``name: value`` text, a list is joined with
commas, a long list is cut (the manifest keeps every value). Pure text from the metadata, which
holds no figure computed from the data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

#: Longest list written out in full; a longer one shows its first values and how many there are.
MOST_LISTED = 12

#: Each neighbour notion in words (the manifest's ``neighbour``).
NEIGHBOURS = {
    "add_remove": "add/remove one record (unbounded DP): the data sets differ by one record",
    "replace": "replace one record (bounded DP): one record's value changes; the number of "
    "records is public",
}

#: The same, as the sentence of the guarantee.
NEIGHBOUR_SENTENCES = {
    "add_remove": "Two data sets are neighbours when one holds one record more than the other "
    "(add/remove one record: unbounded DP).",
    "replace": "Two data sets are neighbours when one record's value differs (replace one "
    "record: bounded DP); the number of records is public.",
}


class GuaranteeMetadata(Protocol):
    """What this module reads of a release's metadata."""

    mechanism: str
    params: dict[str, Any]
    epsilon: float
    delta: float | None
    neighbour: str
    privacy_unit: str | dict[str, Any]
    sensitivity: dict[str, float]
    noise: dict[str, Any]
    declared_public: list[dict[str, Any]]
    report: dict[str, Any]

    @property
    def for_publication(self) -> bool: ...


def plain_value(value: Any, most: int = MOST_LISTED) -> str:
    """A metadata value as text for a reader: no braces, no quotes, no float artefacts.

    >>> plain_value({"a": 1.5, "b": None}), plain_value([0.25, 0.25]), plain_value(True)
    ('a: 1.5, b: none', '0.25, 0.25', 'yes')
    >>> plain_value([["sex", "age"], ["income"]])
    '(sex, age); (income)'
    >>> plain_value(["fit: a, b", "round"])
    'fit: a, b; round'
    >>> plain_value(list(range(20)), most=3)
    '0, 1, 2, ... (20 values in all; manifest.json lists them)'
    >>> plain_value(31.83385287773731), plain_value(float("inf"))
    ('31.8339', 'infinite')
    """
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "not a number"
        if math.isinf(value):
            return "infinite" if value > 0 else "minus infinite"
        return f"{value:.6g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{_name(k)}: {plain_value(v, most)}" for k, v in value.items()) or "none"
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items = list(value)
        nested = any(isinstance(v, Sequence) and not isinstance(v, str | bytes) for v in items)
        shown = [
            f"({plain_value(v, most)})"
            if nested and not isinstance(v, str)
            else plain_value(v, most)
            for v in items[:most]
        ]
        phrases = any(isinstance(v, str) and ", " in v for v in items)  # sentences, not names
        text = ("; " if nested or phrases else ", ").join(shown) or "none"
        if len(items) > most:
            text += f", ... ({len(items)} values in all; manifest.json lists them)"
        return text
    return str(value)


def _name(key: Any) -> str:
    """A field name for reading: underscores as spaces.

    >>> _name("cell_variances")
    'cell variances'
    """
    return str(key).replace("_", " ")


def detail_rows(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(name, value)`` rows of a small table: one per field; a nested mapping gives one row
    per inner field, named ``outer: inner``.

    >>> detail_rows({"scale": 4.0, "budget": {"shares": [0.5, 0.5]}})
    [('scale', '4'), ('budget: shares', '0.5, 0.5')]
    """
    rows: list[tuple[str, str]] = []
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            rows.extend((f"{_name(key)}: {_name(k)}", plain_value(v)) for k, v in value.items())
        else:
            rows.append((_name(key), plain_value(value)))
    return rows


def privacy_sentence(m: GuaranteeMetadata) -> str:
    """Which differential privacy, with its parameters.

    >>> class M: epsilon, delta = 1.0, None
    >>> privacy_sentence(M())
    'epsilon-differential privacy with epsilon = 1 (pure: delta = 0)'
    """
    if m.delta:
        return f"(epsilon, delta)-differential privacy with epsilon = {m.epsilon:g}, delta = {m.delta:g}"
    return f"epsilon-differential privacy with epsilon = {m.epsilon:g} (pure: delta = 0)"


def unit_sentence(unit: str | Mapping[str, Any]) -> str:
    """The privacy unit (the manifest's ``privacy_unit``) in a sentence.

    >>> unit_sentence("row")
    'The privacy unit is one row: neighbouring data sets differ in one row.'
    >>> unit_sentence({"column": "tailnum", "max_rows_per_unit": 50})
    "The privacy unit is one value of column 'tailnum' with all its rows: each unit's rows were bounded in the engine before counting (at most 50 rows), and rows beyond the bound were not counted."
    >>> unit_sentence({"column": "t", "max_rows_per_unit": 64, "chosen_privately": {
    ...     "epsilon": 0.1, "rows_dropped_share_noisy": 0.167}}).split(". ")[-1]
    "The bound was chosen privately, from a noisy histogram of the units' sizes, with epsilon = 0.1 of the epsilon above; a noisy estimate of the share of rows dropped is 16.7%."
    """
    if not isinstance(unit, Mapping):
        return "The privacy unit is one row: neighbouring data sets differ in one row."
    bounds = [f"at most {unit['max_rows_per_unit']} rows"]
    if unit.get("max_cells_per_unit") is not None:
        bounds.append(f"at most {unit['max_cells_per_unit']} cells")
    if unit.get("max_rows_per_cell") is not None:
        bounds.append(f"at most {unit['max_rows_per_cell']} rows in one cell")
    sentence = (
        f"The privacy unit is one value of column {unit.get('column')!r} with all its rows: each "
        f"unit's rows were bounded in the engine before counting ({', '.join(bounds)}), and rows "
        "beyond the bound were not counted."
    )
    chosen = unit.get("chosen_privately")
    if isinstance(chosen, Mapping):
        dropped = chosen.get("rows_dropped_share_noisy")
        sentence += (
            f" The bound was chosen privately, from a noisy histogram of the units' sizes, with "
            f"epsilon = {chosen.get('epsilon'):g} of the epsilon above"
            + (
                f"; a noisy estimate of the share of rows dropped is {dropped:.1%}."
                if isinstance(dropped, int | float)
                else "; the share of rows dropped was not estimated (too few units)."
            )
        )
    return sentence


def guarantee_sentences(m: GuaranteeMetadata, warning: str | None) -> list[str]:
    """The guarantee as a few sentences: what privacy, between which neighbours, with what
    sensitivity and noise, whether it may be published (``warning``: why not), and what was
    declared public."""
    sentences = [f"Released by the {m.mechanism} mechanism under {privacy_sentence(m)}."]
    sentences.append(
        NEIGHBOUR_SENTENCES.get(m.neighbour, f"Neighbouring data sets: {_name(m.neighbour)}.")
    )
    sentences.append(unit_sentence(m.privacy_unit))
    unit = m.report.get("privacy_unit")
    if isinstance(unit, str) and unit:
        sentences.append(f"One record is one {unit}: the guarantee protects each {unit}.")
    sens = m.sensitivity
    if len(sens) == 1:
        ((what, value),) = sens.items()
        sentences.append(
            f"The measured figures ({_name(what)}) change by at most {plain_value(value)} "
            "between neighbours (their sensitivity)."
        )
    elif sens:
        finite = [float(v) for v in sens.values() if isinstance(v, int | float)]
        most = f" (the largest: {plain_value(max(finite))})" if finite else ""
        sentences.append(
            f"Each of the {len(sens)} measured figures has its sensitivity in the table "
            f"below{most}."
        )
    distribution = m.noise.get("distribution")
    if distribution:
        sentences.append(
            f"Noise: {plain_value(distribution).replace('_', ' ')}, calibrated to that "
            "sensitivity and epsilon."
        )
    if warning is None and m.for_publication:
        sentences.append(
            "It may be published: the noise came from the operating system's entropy and the "
            "release was charged once to the data set's budget ledger."
        )
    else:
        why = (warning or "").removeprefix("warning: this release is ")
        sentences.append(f"It is {why or 'NOT FOR PUBLICATION'}.")
    for d in m.declared_public:
        sentences.append(
            f"Not protected by the noise, declared public: {d.get('figure')} = "
            f"{plain_value(d.get('value'))} (declared by the {d.get('declared_by')}: "
            f"{d.get('how')})."
        )
    return sentences


def guarantee_tables(m: GuaranteeMetadata) -> list[tuple[str, list[tuple[str, str]]]]:
    """The small tables under the sentences: ``(title, rows)`` for the mechanism's parameters,
    the sensitivities, the noise and the release's notes (those with rows only)."""
    notes = {k: v for k, v in m.report.items() if k not in ("plan", "privacy_unit")}
    tables = [
        ("Parameters of the mechanism", detail_rows(m.params)),
        ("Sensitivity of each measured figure", detail_rows(m.sensitivity)),
        ("Noise", detail_rows(m.noise)),
        ("Notes", detail_rows(notes)),
    ]
    return [(title, rows) for title, rows in tables if rows]


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(header: tuple[str, str], rows: Sequence[tuple[str, str]]) -> list[str]:
    """A two-column Markdown table (``|`` in a cell escaped).

    >>> markdown_table(("a", "b"), [("x", "1|2")])
    ['| a | b |', '| --- | --- |', '| x | 1\\\\|2 |']
    """
    return [
        f"| {_cell(header[0])} | {_cell(header[1])} |",
        "| --- | --- |",
        *(f"| {_cell(k)} | {_cell(v)} |" for k, v in rows),
    ]


def guarantee_markdown(m: GuaranteeMetadata, warning: str | None) -> list[str]:
    """The guarantee section of ``report.md``: the sentences, then each small table."""
    lines = ["## The guarantee", "", " ".join(guarantee_sentences(m, warning)), ""]
    for title, rows in guarantee_tables(m):
        lines += [f"### {title}", "", *markdown_table(("field", "value"), rows), ""]
    return lines


__all__ = [
    "MOST_LISTED",
    "NEIGHBOURS",
    "NEIGHBOUR_SENTENCES",
    "detail_rows",
    "guarantee_markdown",
    "guarantee_sentences",
    "guarantee_tables",
    "markdown_table",
    "plain_value",
    "privacy_sentence",
]
