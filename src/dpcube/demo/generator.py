"""A realistic synthetic person table (the project's own generator, seeded).

Columns: ``age`` (0-100), ``sex`` (F/M), ``occupation`` (13 occupations in 4 groups, depending on
age), ``income`` (log-normal by occupation group, in dollars), ``state`` and ``county`` (6 states,
30 counties with heavy-tailed populations). Everything is vectorised numpy; one million rows take
about a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

OCCUPATIONS: dict[str, list[str]] = {
    "Professional": ["Engineer", "Doctor", "Teacher", "Lawyer"],
    "Service": ["Cook", "Driver", "Cleaner"],
    "Manual": ["Builder", "Farmer", "Mechanic"],
    "Not working": ["Student", "Retired", "Unemployed"],
}
_GROUP_INCOME = {"Professional": 85_000, "Service": 32_000, "Manual": 41_000, "Not working": 9_000}

STATES: dict[str, list[str]] = {
    "Aurora": [
        "Aurora-Central",
        "Aurora-North",
        "Aurora-South",
        "Aurora-East",
        "Aurora-West",
        "Aurora-Lake",
    ],
    "Borealis": ["Borealis-City", "Borealis-Hills", "Borealis-Coast", "Borealis-Plains"],
    "Cascadia": [
        "Cascadia-Metro",
        "Cascadia-Valley",
        "Cascadia-Ridge",
        "Cascadia-Forest",
        "Cascadia-Bay",
    ],
    "Deltana": ["Deltana-Port", "Deltana-Marsh", "Deltana-Delta"],
    "Eldora": [
        "Eldora-Capital",
        "Eldora-Mesa",
        "Eldora-Canyon",
        "Eldora-Springs",
        "Eldora-Desert",
        "Eldora-Pines",
    ],
    "Fenwick": [
        "Fenwick-Town",
        "Fenwick-Moor",
        "Fenwick-Glen",
        "Fenwick-Fields",
        "Fenwick-Harbor",
        "Fenwick-Vale",
    ],
}

INCOME_EDGES = [0, 10_000, 20_000, 35_000, 50_000, 75_000, 100_000, 150_000, 250_000, 10_000_000]


def schema_dict() -> dict[str, Any]:
    """The demo's schema (what ``schema.yaml`` holds)."""
    return {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 100], "width": 1},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
            {
                "name": "occupation",
                "kind": "nominal",
                "hierarchy": {g: list(o) for g, o in OCCUPATIONS.items()},
            },
            {"name": "income", "kind": "ordinal", "edges": INCOME_EDGES},
            {
                "name": "county",
                "kind": "nominal",
                "hierarchy": {s: list(c) for s, c in STATES.items()},
            },
        ]
    }


def generate_people(rows: int, seed: int) -> pa.Table:
    """``rows`` synthetic persons as an Arrow table."""
    rng = np.random.default_rng(seed)
    age = np.clip(
        np.rint(
            np.where(
                rng.random(rows) < 0.22, rng.uniform(0, 18, rows), rng.gamma(6.0, 7.5, rows) + 12
            )
        ),
        0,
        100,
    )
    sex = np.where(rng.random(rows) < 0.505, "F", "M")
    groups = list(OCCUPATIONS)
    work_p = np.array([0.38, 0.30, 0.27, 0.05])
    group = rng.choice(len(groups), size=rows, p=work_p)
    group[(age < 18) | (age >= 67) & (rng.random(rows) < 0.85)] = 3
    leaf = np.empty(rows, dtype=object)
    for g, name in enumerate(groups):
        members = np.flatnonzero(group == g)
        options = np.array(OCCUPATIONS[name], dtype=object)
        leaf[members] = options[rng.integers(0, len(options), members.size)]
    not_working = group == 3
    leaf[not_working & (age < 23)] = "Student"
    leaf[not_working & (age >= 65)] = "Retired"
    leaf[not_working & (age >= 23) & (age < 65)] = "Unemployed"
    median = np.array([_GROUP_INCOME[g] for g in groups])[group]
    income = np.round(median * rng.lognormal(0.0, 0.6, rows), -2)
    counties = [c for cs in STATES.values() for c in cs]
    weights = rng.pareto(1.2, len(counties)) + 0.2
    county_index = rng.choice(len(counties), size=rows, p=weights / weights.sum())
    state_of = {c: s for s, cs in STATES.items() for c in cs}
    county = np.array(counties, dtype=object)[county_index]
    state = np.array([state_of[c] for c in counties], dtype=object)[county_index]
    return pa.table(
        {
            "age": pa.array(age.astype(np.int16)),
            "sex": pa.array(sex),
            "occupation": pa.array(leaf.astype(str)),
            "income": pa.array(income),
            "state": pa.array(state.astype(str)),
            "county": pa.array(county.astype(str)),
        }
    )


def write_people(path: Path, rows: int, seed: int) -> Path:
    """Generate and write the table to a Parquet file (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(generate_people(rows, seed), tmp)
    tmp.replace(path)
    return path
