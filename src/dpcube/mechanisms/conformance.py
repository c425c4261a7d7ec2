"""The conformance suite every registered mechanism must pass (as scikit-learn's estimator checks).

A mechanism opts in with a classmethod ``conformance_cases()`` returning :class:`Case` objects:
a tiny schema, a way to build the mechanism for a neighbour notion, and the queries whose exact
answers a noiseless release must reproduce. ``tests/conformance/test_conformance.py`` runs every
check below on every case of every mechanism in :data:`dpcube.registry.MECHANISMS`.

The checks:

- :func:`check_sensitivity`: each declared sensitivity equals (or, for claims marked not tight,
  bounds) the largest change of the measurement over all neighbouring inputs, found by brute force:
  every single-record addition/removal (``add_remove``) or every move of one record between two
  cells (``replace``), from several base histograms;
- :func:`check_unit_sensitivity`: with a privacy unit of K rows (and of C cells of R rows), each
  declared sensitivity bounds the change of the measurement when one whole unit is added or
  removed (or replaced), over units of every extreme shape (all rows packed from each cell on)
  and random ones, from the same bases; a mechanism that refuses a unit must say why;
- :func:`check_budget_charged_once`: one release is one ledger charge of exactly (epsilon, delta);
  a release that does not fit is refused before noise and charges nothing;
- :func:`check_noiseless_exact`: with :data:`dpcube.privacy.NO_NOISE`, answers equal the truth;
- :func:`check_shapes`: released cells have the schema's shape;
- :func:`check_seed_determinism`: the same seed gives the same release, another seed another;
- :func:`check_save_load`: a saved release loads with the same answers and variances.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import BudgetError, ParameterError
from dpcube.histogram import Histogram
from dpcube.privacy.ledger import BudgetLedger
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import NO_NOISE
from dpcube.privacy.unit import PrivacyUnit
from dpcube.release.base import Release, load_release
from dpcube.release.cells import box_sums, prefix_sums
from dpcube.schema import Schema


@dataclass
class Case:
    """One configuration of a mechanism on a tiny domain."""

    id: str
    schema: Schema
    #: Build the mechanism under test for a neighbour notion.
    make: Callable[[str], Any]
    #: Queries whose noiseless answers must equal the true answers.
    queries: Sequence[Mapping[str, Any]] = ()
    #: Input for ``release`` built from a histogram (default: the histogram itself).
    prepare: Callable[[Histogram], Any] = field(default=lambda h: h)
    #: True answers of the queries (default: box sums of the histogram).
    truth: Callable[[Histogram, Sequence[Mapping[str, Any]]], NDArray[np.float64]] | None = None
    #: Neighbour notions to check (default: those the mechanism declares).
    neighbours: Sequence[str] | None = None
    #: Tolerance of noiseless answers (post-processing such as least squares is inexact in float).
    atol: float = 1e-6


def mixed_schema() -> Schema:
    """The shared tiny domain of the cell mechanisms' cases: an ordinal axis of 3 and a nominal
    axis with a two-level hierarchy (x -> x1, x2; y), 9 cells in all."""
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "ordinal", "range": [0, 2], "width": 1},
                {"name": "b", "kind": "nominal", "hierarchy": {"x": ["x1", "x2"], "y": None}},
            ]
        }
    )


#: Queries over :func:`mixed_schema`: the total, a range, a hierarchy node, a leaf, and a box.
MIXED_QUERIES: tuple[dict[str, Any], ...] = (
    {},
    {"a": [0, 1]},
    {"b": "x"},
    {"a": [2, 2], "b": "y"},
    {"a": [1, 2], "b": "x2"},
)


def tiny_histograms(schema: Schema, seed: int = 0) -> list[Histogram]:
    """Base histograms for brute force: all zeros, all ones, and a random one."""
    rng = np.random.default_rng(seed)
    shape = schema.shape
    return [
        Histogram(schema, np.zeros(shape, dtype=np.int64)),
        Histogram(schema, np.ones(shape, dtype=np.int64)),
        Histogram(schema, rng.integers(0, 5, size=shape)),
    ]


def neighbouring_pairs(counts: NDArray[np.int64], neighbour: str) -> list[NDArray[np.int64]]:
    """Every histogram adjacent to ``counts`` under the neighbour notion."""
    flat = counts.ravel()
    out: list[NDArray[np.int64]] = []
    if Neighbour(neighbour) is Neighbour.ADD_REMOVE:
        for i in range(flat.size):
            plus = flat.copy()
            plus[i] += 1
            out.append(plus.reshape(counts.shape))
            if flat[i] > 0:
                minus = flat.copy()
                minus[i] -= 1
                out.append(minus.reshape(counts.shape))
    else:
        for i, j in itertools.permutations(range(flat.size), 2):
            if flat[i] > 0:
                moved = flat.copy()
                moved[i] -= 1
                moved[j] += 1
                out.append(moved.reshape(counts.shape))
    return out


def brute_force_sensitivity(
    function: Callable[[NDArray[np.int64]], NDArray[np.float64]],
    bases: Sequence[NDArray[np.int64]],
    neighbour: str,
    norm: str,
) -> float:
    """Largest ``||f(x) - f(x')||`` over the given bases and all their neighbours."""
    order = {"l1": 1, "l2": 2, "linf": np.inf}[norm]
    worst = 0.0
    for x in bases:
        fx = np.asarray(function(x), dtype=np.float64)
        for y in neighbouring_pairs(x, neighbour):
            diff = np.asarray(function(y), dtype=np.float64) - fx
            worst = max(worst, float(np.linalg.norm(diff.ravel(), ord=order)))
    return worst


def case_neighbours(case: Case) -> list[str]:
    """The neighbour notions ``case`` is checked under (default: those its mechanism declares)."""
    if case.neighbours is not None:
        return list(case.neighbours)
    mech = case.make("add_remove") if _supports(case, "add_remove") else case.make("replace")
    return [n.value for n in type(mech).neighbours]


def _supports(case: Case, neighbour: str) -> bool:
    try:
        case.make(neighbour)
    except BudgetError:
        return False
    return True


def _truth(case: Case, hist: Histogram) -> NDArray[np.float64]:
    if case.truth is not None:
        return np.asarray(case.truth(hist, case.queries), dtype=np.float64)
    boxes = np.array([case.schema.box(q) for q in case.queries], dtype=np.int64).reshape(
        len(case.queries), -1, 2
    )
    return box_sums(prefix_sums(hist.counts), boxes).astype(np.float64)


def check_sensitivity(case: Case) -> None:
    for neighbour in case_neighbours(case):
        mech = case.make(neighbour)
        bases = [h.counts for h in tiny_histograms(case.schema)]
        for claim in mech.sensitivity_claims(case.schema):
            found = brute_force_sensitivity(claim.function, bases, neighbour, claim.norm)
            assert found <= claim.declared * (1 + 1e-9) + 1e-12, (
                f"{case.id} [{neighbour}] {claim.name}: brute-force {claim.norm} sensitivity {found} "
                f"exceeds the declared {claim.declared}"
            )
            if claim.tight:
                assert found >= claim.declared * (1 - 1e-9) - 1e-12, (
                    f"{case.id} [{neighbour}] {claim.name}: declared {claim.declared} but brute force "
                    f"finds only {found}; the noise is larger than needed (or mark the claim not tight)"
                )


#: The privacy units the suite checks every mechanism with: K rows anywhere, and K rows over at
#: most C cells of at most R rows (min(K, C R) = 4 < K, L2 = 2 < 4).
CONFORMANCE_UNITS = (
    PrivacyUnit("unit", 3),
    PrivacyUnit("unit", 5, max_cells_per_unit=4, max_rows_per_cell=1),
)


def unit_contributions(
    size: int, unit: PrivacyUnit, rng: np.random.Generator, random: int = 6
) -> list[NDArray[np.int64]]:
    """Histogram vectors (flat, ``size`` cells) one unit of ``unit``'s bounds can add: for each
    cell, the unit's rows packed from that cell on (at most R a cell, C cells, min(K, C R) in
    all: the shapes that attain the L1, L2 and column-norm bounds), then ``random`` random
    bounded ones."""
    per_cell, cells, rows = unit.per_cell, unit.cells, unit.rows
    out: list[NDArray[np.int64]] = []
    for start in range(size):
        v = np.zeros(size, dtype=np.int64)
        left, i = rows, 0
        while left > 0 and i < min(cells, size):
            take = min(per_cell, left)
            v[(start + i) % size] += take
            left -= take
            i += 1
        out.append(v)
    for _ in range(random):
        v = np.zeros(size, dtype=np.int64)
        chosen = rng.choice(size, size=min(cells, size), replace=False)
        for _ in range(int(rng.integers(1, rows + 1))):
            room = [c for c in chosen if v[c] < per_cell]
            if not room:
                break
            v[int(rng.choice(room))] += 1
        out.append(v)
    return out


def unit_neighbours(
    counts: NDArray[np.int64],
    unit: PrivacyUnit,
    neighbour: str,
    rng: np.random.Generator,
    pairs: int = 8,
) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Pairs of histograms that differ in one unit of ``unit``'s bounds around ``counts``: under
    ``add_remove`` (``counts``, ``counts + v``) for every contribution v (the second has one unit
    more: removing it with all its rows gives the first); under ``replace`` (``counts + a``,
    ``counts + b``): one unit's rows a replaced by another's b, for ``pairs`` of each."""
    flat = counts.ravel()
    found = unit_contributions(flat.size, unit, rng)
    shape = counts.shape
    if Neighbour(neighbour) is Neighbour.ADD_REMOVE:
        return [(counts, (flat + v).reshape(shape)) for v in found]
    picked = [found[int(i)] for i in rng.choice(len(found), min(pairs, len(found)), replace=False)]
    return [
        ((flat + a).reshape(shape), (flat + b).reshape(shape))
        for a in picked
        for b in picked
        if not np.array_equal(a, b)
    ]


def check_unit_sensitivity(case: Case) -> None:
    for neighbour in case_neighbours(case):
        mech = case.make(neighbour)
        rng = np.random.default_rng(7)
        for unit in CONFORMANCE_UNITS:
            if type(mech).unit_refusal:
                try:
                    mech.with_unit(unit)
                except ParameterError as exc:
                    assert str(exc).strip(), f"{case.id}: a unit refused without a reason"
                    continue
                raise AssertionError(f"{case.id}: declares unit_refusal but took a unit")
            unit_mech = mech.with_unit(unit)
            bases = [h.counts for h in tiny_histograms(case.schema)]
            pairs = [p for x in bases for p in unit_neighbours(x, unit, neighbour, rng)]
            for claim in unit_mech.sensitivity_claims(case.schema):
                order = {"l1": 1, "l2": 2, "linf": np.inf}[claim.norm]
                found = 0.0
                for x, y in pairs:
                    diff = np.asarray(claim.function(y), dtype=np.float64) - np.asarray(
                        claim.function(x), dtype=np.float64
                    )
                    found = max(found, float(np.linalg.norm(diff.ravel(), ord=order)))
                assert found <= claim.declared * (1 + 1e-9) + 1e-12, (
                    f"{case.id} [{neighbour}, {unit.manifest()}] {claim.name}: a unit moves the "
                    f"{claim.norm} measurement by {found}, beyond the declared {claim.declared}"
                )
                # Attained under add_remove by a packed unit; under replace the two units'
                # disjoint supports may not fit a tiny domain, so only the bound is checked.
                if claim.tight and neighbour == Neighbour.ADD_REMOVE.value:
                    assert found >= claim.declared * (1 - 1e-9) - 1e-12, (
                        f"{case.id} [{neighbour}, {unit.manifest()}] {claim.name}: declared "
                        f"{claim.declared} but no unit moves it by more than {found}"
                    )


def check_budget_charged_once(case: Case) -> None:
    mech = case.make(case_neighbours(case)[0])
    hist = tiny_histograms(case.schema)[2]
    with tempfile.TemporaryDirectory() as tmp:
        ledger = BudgetLedger(Path(tmp) / "data.ledger")
        ledger.set_total(mech.epsilon * 1.5, (mech.delta or 0.0) * 1.5)
        mech.release(case.prepare(hist), random_state=1, ledger=ledger)
        charges = ledger.charges()
        assert len(charges) == 1, f"{case.id}: one release made {len(charges)} ledger charges"
        assert charges[0].epsilon == mech.epsilon
        assert charges[0].delta == (mech.delta or 0.0)
        try:
            mech.release(case.prepare(hist), random_state=2, ledger=ledger)
        except BudgetError:
            pass
        else:
            raise AssertionError(f"{case.id}: a release beyond the total budget was not refused")
        assert len(ledger.charges()) == 1, f"{case.id}: a refused release was charged"


def check_noiseless_exact(case: Case) -> None:
    for neighbour in case_neighbours(case):
        mech = case.make(neighbour)
        for hist in tiny_histograms(case.schema)[1:]:
            release = mech.release(case.prepare(hist), random_state=NO_NOISE)
            assert not release.metadata.for_publication
            if case.queries:
                got = release.answer_many(case.queries)
                want = _truth(case, hist)
                np.testing.assert_allclose(
                    got, want, atol=case.atol, err_msg=f"{case.id} [{neighbour}]"
                )


def check_shapes(case: Case) -> None:
    mech = case.make(case_neighbours(case)[0])
    release = mech.release(case.prepare(tiny_histograms(case.schema)[2]), random_state=3)
    counts = getattr(release, "counts", None)
    if counts is not None:
        assert tuple(np.shape(counts)) == case.schema.shape, (
            f"{case.id}: counts shape {np.shape(counts)}"
        )
    if case.queries:
        assert release.answer_many(case.queries).shape == (len(case.queries),)
        variances = release.variance_many(case.queries)
        assert variances.shape == (len(case.queries),)
        known = variances[~np.isnan(variances)]
        assert np.all(known >= 0) and np.all(np.isfinite(known)), (
            f"{case.id}: bad variances {variances}"
        )


def check_seed_determinism(case: Case) -> None:
    mech = case.make(case_neighbours(case)[0])
    hist = tiny_histograms(case.schema)[2]
    a = mech.release(case.prepare(hist), random_state=42)
    b = mech.release(case.prepare(hist), random_state=42)
    c = mech.release(case.prepare(hist), random_state=43)
    assert a.metadata.seeded and not a.metadata.for_publication
    queries = case.queries or [{}]
    np.testing.assert_array_equal(a.answer_many(queries), b.answer_many(queries))
    if case.queries:
        assert not np.array_equal(a.answer_many(queries), c.answer_many(queries)), (
            f"{case.id}: seeds 42 and 43 gave identical answers"
        )


def check_save_load(case: Case) -> None:
    mech = case.make(case_neighbours(case)[0])
    release: Release = mech.release(case.prepare(tiny_histograms(case.schema)[2]), random_state=5)
    with tempfile.TemporaryDirectory() as tmp:
        release.save(Path(tmp) / "r")
        loaded = load_release(Path(tmp) / "r")
    assert loaded.metadata.release_id == release.metadata.release_id
    if case.queries:
        np.testing.assert_allclose(
            loaded.answer_many(case.queries), release.answer_many(case.queries)
        )
        np.testing.assert_allclose(
            loaded.variance_many(case.queries), release.variance_many(case.queries), equal_nan=True
        )


CHECKS: dict[str, Callable[[Case], None]] = {
    "sensitivity": check_sensitivity,
    "unit_sensitivity": check_unit_sensitivity,
    "budget_charged_once": check_budget_charged_once,
    "noiseless_exact": check_noiseless_exact,
    "shapes": check_shapes,
    "seed_determinism": check_seed_determinism,
    "save_load": check_save_load,
}
