"""A publication: several tables of one data set released under one budget, charged once.

A publication file (YAML) lists the tables, each a release as ``dpcube release`` makes it (its
mechanism or ``auto``, its schema and parameters, the census group-size options) with an optional
``weight``::

    tables:
      - name: age_by_sex
        mechanism: datacube
        schema: schema.yaml
        params: {publish: "k=2"}
      - name: household_sizes
        mechanism: census-hierarchy
        group_by: household
        region: county
        hierarchy: regions.csv
        max_size: 9
        top_code: true
        groups_are_public: true
        weight: 0.5

**The split.** The planner (:func:`dpcube.planning.plan_mechanisms`) gives each table whose error
is known before seeing the data its expected mean squared error per query of its workload
``err_i(eps)``. For noise whose variance scales as ``1/eps**2`` (Laplace and Gaussian; the discrete
Laplace variance ``2 e^(-1/b) / (1 - e^(-1/b))**2`` at scale ``b = Δ/eps`` is ``2 b**2 - 1/6 +
O(b**-2)``, so nearly so), ``err_i(eps) = c_i / eps**2`` with ``c_i = err_i(e) e**2`` read at the
even share ``e``. Minimising the weighted error ``Σ w_i c_i / eps_i**2`` subject to
``Σ eps_i = E`` (Lagrange: ``2 w_i c_i / eps_i**3 = λ`` for every i) gives

    eps_i = E (w_i c_i)**(1/3) / Σ_j (w_j c_j)**(1/3)

(Boyd and Vandenberghe, *Convex Optimization*, 2004, Sec. 5.5.3; the same cube-root rule as the
budget split across the levels of a hierarchy in Cormode et al., "Differentially private spatial
decompositions", ICDE 2012, Sec. 4.2). It does not hold for tables whose error depends on the
data (census group sizes, the spatial trees: the planner has only benchmark figures for them)
nor is it exact at the discrete Laplace variance's ``-1/6``. **Fallback**: such a table gets a
share proportional to its weight alone, ``E w_i / Σ_all w_j``, and the closed form splits the rest
among the others.

**One charge.** Every table is counted, prepared and checked
(:meth:`dpcube.mechanisms.base.Mechanism.check_release`) before anything is charged; then the
whole budget ``E`` is charged to the data set's ledger ONCE (``mechanism="publication"``, the
publication's id as release id); then each table's noise is drawn. Sequential composition
(Dwork and Roth, *The Algorithmic Foundations of Differential Privacy*, 2014, Theorem 3.14) makes
the publication ``Σ eps_i``-DP, and the shares are rounded so that ``Σ eps_i <= E``.

**One directory.** The tables are saved, each a normal release directory ``DIR/<name>/``, into a
staging directory beside ``DIR`` that is renamed to ``DIR`` at the end (atomic on one file
system); ``DIR/publication.json`` lists the tables with their shares and the SHA-256 of each
table's manifest, and its own ``integrity`` hash; ``DIR/publication.md`` states the guarantee.
The front ends add the HTML reports (``DIR/publication.html`` and each table's ``report.html``)
inside the staging directory, so they appear with the rest; the hashes leave them out (they are
post-processing of the releases the hashes cover).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from dpcube import registry
from dpcube.errors import BudgetError, DataError, DPCubeError, SchemaError
from dpcube.files import TEMP_PREFIX
from dpcube.privacy.ledger import BudgetLedger, RequestedTotal, validate_privacy
from dpcube.release.base import Release, check_output_directory, load_release
from dpcube.release.marks import file_key, forget_written, remember_written, written_sha256
from dpcube.schema import Schema, Spatial

#: The file naming the tables of a publication directory.
MANIFEST = "publication.json"
#: The publication's report (the guarantee and the shares, in sentences and one table).
REPORT = "publication.md"
#: Format version of :data:`MANIFEST`.
FORMAT = 1

#: Keys a table may have, by the kind of input its mechanism counts.
_COMMON_KEYS = (
    "name",
    "mechanism",
    "params",
    "weight",
    "schema",
    "workload",
    "on_out_of_domain",
    "integer",
)
_CENSUS_KEYS = (
    "group_by",
    "region",
    "hierarchy",
    "max_size",
    "top_code",
    "public_groups",
    "groups_are_public",
    "region_of_unit",
)
#: The type each census option must have (name, type, what the error says).
_CENSUS_TYPES: tuple[tuple[str, type, str], ...] = (
    ("group_by", str, "a column name"),
    ("region", str, "a column name"),
    ("hierarchy", str, "a file name (region,parent table or JSON tree)"),
    ("max_size", int, "a whole number"),
    ("top_code", bool, "true or false"),
    ("public_groups", int, "a whole number (the number of groups)"),
    ("groups_are_public", bool, "true or false"),
    ("region_of_unit", str, "first or most"),
)
_TOP_KEYS = ("tables", "neighbour")
_CENSUS = "census-hierarchy"


def _field_error(source: str, where: str, why: str) -> DataError:
    return DataError(f"{source}: {where}: {why}")


@dataclass
class TableSpec:
    """One table of a publication: a mechanism (or ``auto``) and how its input is counted.

    ``schema``: the schema file (histogram, cube and spatial tables); ``params``: the mechanism's
    constructor parameters; ``workload``: the workload the planner weighs the table's error on
    (default: the ``workload`` parameter, ``marginals:K`` for a cube publishing ``k=K``, else
    ``identity``); ``census``: the group-size counting options (``group_by``, ``region``,
    ``hierarchy``, ``max_size``...); ``weight``: the table's weight in the split (default 1);
    ``integer``: publish non-negative whole consistent numbers (``dpcube release --integer``).
    """

    name: str
    mechanism: str
    params: dict[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    schema: str | None = None
    workload: str | None = None
    on_out_of_domain: str = "error"
    census: dict[str, Any] = field(default_factory=dict)
    integer: bool = False


def _check_name(source: str, where: str, name: Any) -> str:
    if not isinstance(name, str) or not name or name.startswith(".") or name in (MANIFEST, REPORT):
        raise _field_error(source, where, f"name must be a non-empty text, got {name!r}")
    if not all(c.isalnum() or c in "-_" for c in name):
        raise _field_error(
            source, where, f"name {name!r} must use only letters, digits, '-' and '_' (a folder)"
        )
    return name


def _table_spec(source: str, index: int, raw: Any, base: Path) -> TableSpec:
    where = f"tables[{index}]"
    if not isinstance(raw, Mapping):
        raise _field_error(source, where, f"must be a mapping of fields, got {raw!r}")
    name = _check_name(source, f"{where}.name", raw.get("name"))
    where = f"tables[{index}] ({name})"
    mechanism = raw.get("mechanism")
    if mechanism not in registry.MECHANISMS:
        known = ", ".join(sorted(registry.MECHANISMS))
        raise _field_error(source, f"{where}.mechanism", f"unknown {mechanism!r}; known: {known}")
    allowed = _COMMON_KEYS + (_CENSUS_KEYS if mechanism == _CENSUS else ())
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        raise _field_error(
            source, f"{where}.{unknown[0]}", f"unknown field; allowed: {', '.join(allowed)}"
        )
    params = raw.get("params") or {}
    if not isinstance(params, Mapping):
        raise _field_error(source, f"{where}.params", f"must be a mapping, got {params!r}")
    weight = raw.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
        raise _field_error(source, f"{where}.weight", f"must be a positive number, got {weight!r}")
    if not math.isfinite(weight):
        raise _field_error(source, f"{where}.weight", f"must be finite, got {weight!r}")
    schema = raw.get("schema")
    if mechanism == _CENSUS:
        if schema is not None:
            raise _field_error(source, f"{where}.schema", "a group-size table takes no schema")
        missing = [k for k in ("group_by", "region", "hierarchy", "max_size") if k not in raw]
        if missing:
            raise _field_error(source, f"{where}.{missing[0]}", "missing (census-hierarchy)")
        if "public_groups" in raw and "groups_are_public" in raw:
            raise _field_error(
                source,
                f"{where}.public_groups",
                "give public_groups or groups_are_public, not both",
            )
        if "public_groups" not in raw and raw.get("groups_are_public") is not True:
            raise _field_error(
                source,
                f"{where}.groups_are_public",
                "declare the number of groups public (groups_are_public: true, or public_groups: "
                "G); the census mechanisms release it exactly",
            )
    elif not isinstance(schema, str) or not schema:
        raise _field_error(source, f"{where}.schema", "missing: the table's schema file")
    census = {k: raw[k] for k in _CENSUS_KEYS if k in raw}
    for key, kind, what in _CENSUS_TYPES:
        value = census.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is int and value is True)):
            raise _field_error(source, f"{where}.{key}", f"must be {what}, got {value!r}")
    if isinstance(census.get("max_size"), int) and census["max_size"] < 1:
        raise _field_error(source, f"{where}.max_size", "must be at least 1")
    if "hierarchy" in census and isinstance(census["hierarchy"], str):
        census["hierarchy"] = str(base / census["hierarchy"])
    workload = raw.get("workload")
    if workload is not None and not isinstance(workload, str):
        raise _field_error(source, f"{where}.workload", f"must be a spec text, got {workload!r}")
    integer = raw.get("integer", False)
    if not isinstance(integer, bool):
        raise _field_error(source, f"{where}.integer", f"must be true or false, got {integer!r}")
    ood = raw.get("on_out_of_domain", "error")
    if ood not in ("error", "drop", "clip"):
        raise _field_error(source, f"{where}.on_out_of_domain", "must be error, drop or clip")
    return TableSpec(
        name=name,
        mechanism=str(mechanism),
        params=dict(params),
        weight=float(weight),
        schema=None if schema is None else str(base / schema),
        workload=workload,
        on_out_of_domain=str(ood),
        census=census,
        integer=integer,
    )


@dataclass
class Publication:
    """Several table specs of one data set, released under one budget (see the module)."""

    tables: list[TableSpec]
    neighbour: str = "add_remove"
    source: str = "publication"

    @classmethod
    def from_dict(
        cls, raw: Any, *, source: str = "publication", base: Path | None = None
    ) -> Publication:
        """A publication from its parsed YAML/JSON; ``base``: where relative file names start."""
        base = base or Path(".")
        if not isinstance(raw, Mapping):
            raise _field_error(source, "top level", "must be a mapping with a 'tables' list")
        unknown = [k for k in raw if k not in _TOP_KEYS]
        if unknown:
            raise _field_error(
                source, str(unknown[0]), f"unknown field; allowed: {', '.join(_TOP_KEYS)}"
            )
        tables = raw.get("tables")
        if not isinstance(tables, list) or not tables:
            raise _field_error(source, "tables", "must be a non-empty list of tables")
        specs = [_table_spec(source, i, t, base) for i, t in enumerate(tables)]
        names = [s.name for s in specs]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise _field_error(source, f"tables[{i}].name", f"{n!r} is used twice")
        neighbour = raw.get("neighbour", "add_remove")
        if neighbour not in ("add_remove", "replace"):
            raise _field_error(
                source, "neighbour", f"must be add_remove or replace, got {neighbour!r}"
            )
        return cls(specs, str(neighbour), source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Publication:
        """Read a publication file (YAML or JSON); every bad field is one line naming it."""
        import yaml

        from dpcube.schema_yaml import load_yaml, yaml_error_line

        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise DataError(f"{path}: cannot read the publication file ({exc.strerror})") from None
        try:
            raw = load_yaml(text)
        except yaml.YAMLError as exc:
            raise DataError(f"{path}: {yaml_error_line(exc)}") from None
        return cls.from_dict(raw, source=str(path), base=p.parent)


# -- the split ---------------------------------------------------------------------------------


def split_budget(
    epsilon: float, weights: Sequence[float], costs: Sequence[float | None]
) -> list[float]:
    """The shares ``eps_i`` minimising ``Σ w_i c_i / eps_i**2`` subject to ``Σ eps_i <= epsilon``.

    ``costs[i]``: ``c_i`` (the error at epsilon 1; error ``c_i / eps**2``), or None for a table
    whose error depends on the data, which gets ``epsilon w_i / Σ_all w_j`` (the fallback); the
    rest is split as ``(w_i c_i)**(1/3)``. The shares are rounded down so that their sum never
    exceeds ``epsilon``.
    """
    if len(weights) != len(costs) or not weights:
        raise ValueError("one weight and one cost per table")
    total_w = math.fsum(weights)
    shares = [0.0] * len(weights)
    fixed = [i for i, c in enumerate(costs) if c is None or not c > 0]
    for i in fixed:
        shares[i] = epsilon * weights[i] / total_w
    rest = epsilon - math.fsum(shares[i] for i in fixed)
    free = [i for i in range(len(weights)) if i not in fixed]
    roots = {i: (weights[i] * float(costs[i] or 0.0)) ** (1.0 / 3.0) for i in free}
    denominator = math.fsum(roots.values())
    for i in free:
        shares[i] = rest * roots[i] / denominator
    while math.fsum(shares) > epsilon:  # floating point: never compose to more than epsilon
        shares = [math.nextafter(s, 0.0) for s in shares]
    return shares


# -- releasing ---------------------------------------------------------------------------------


@dataclass
class PlannedTable:
    """A table with its share of the budget, its mechanism and its counted, checked input."""

    spec: TableSpec
    epsilon: float
    cost: float | None
    basis: str
    mechanism: Any = None
    checked: Any = None


def _default_workload(spec: TableSpec) -> str:
    if spec.workload:
        return spec.workload
    w = spec.params.get("workload")
    if isinstance(w, str) and w:
        return w
    publish = spec.params.get("publish")
    if spec.mechanism == "datacube" and isinstance(publish, str) and publish.startswith("k="):
        return f"marginals:{publish[2:]}"
    return ""  # the whole table: every cell (marginals over every attribute of the schema)


def _cost(
    spec: TableSpec, schema: Schema | None, epsilon: float, neighbour: str
) -> tuple[float | None, str]:
    """``c_i`` of the split (mean squared error per query at epsilon 1, read at ``epsilon``) and
    its basis: the planner's exact figure, else None (the fallback)."""
    from dpcube.planning.plan import plan_mechanisms

    if schema is None or spec.mechanism == _CENSUS:
        return None, "data-dependent (census group sizes): share by weight"
    if any(isinstance(a, Spatial) for a in schema.attributes):
        return None, "data-dependent (a map's tree or grid): share by weight"
    workload = _default_workload(spec) or f"marginals:{len(schema.attributes)}"
    built = _build(spec, epsilon, neighbour)  # its parameters as configured, defaults included
    names = None if spec.mechanism == "auto" else [spec.mechanism]
    try:
        found = plan_mechanisms(schema, workload, epsilon, neighbour=neighbour, mechanisms=names)
    except Exception as exc:  # the planner has no figure: the fallback, said why
        return None, f"no planner figure ({str(exc).splitlines()[0]}): share by weight"
    if spec.mechanism == "auto":
        matches = [found.recommended]
    else:
        matches = [
            c
            for c in found.candidates
            if c.mechanism == spec.mechanism
            and c.basis == "exact"
            and all(getattr(built, k, None) == v for k, v in c.params.items() if k != "workload")
        ]
    exact = [c for c in matches if c.basis == "exact" and math.isfinite(c.expected_error)]
    if not exact:
        return None, f"no exact planner figure for {spec.mechanism} on {workload}: share by weight"
    best = min(exact, key=lambda c: c.expected_error)
    per_query = best.expected_error / max(found.queries, 1)
    return per_query * epsilon**2, f"planner, exact ({best.label} on {workload})"


def _count(spec: TableSpec, data: Any, schema: Schema | None, identity: str, seed: Any) -> Any:
    """The table's input, counted from ``data`` as ``dpcube release`` counts it."""
    kind = spec.mechanism
    if kind == _CENSUS:
        from dpcube.mechanisms.census.table import group_sizes

        c = spec.census
        public: int | bool = c["public_groups"] if "public_groups" in c else True
        table = group_sizes(
            data,
            unit=c["group_by"],
            region=c["region"],
            hierarchy=c["hierarchy"],
            max_size=c["max_size"],
            top_code=bool(c.get("top_code", False)),
            on_out_of_domain=spec.on_out_of_domain,
            region_of_unit=c.get("region_of_unit"),
            dataset=identity,
        )
        how = f"{spec.name}: " + (
            "groups_are_public" if public is True else f"public_groups {public}"
        )
        return table.declare_public_groups(public, how=how)
    assert schema is not None
    if kind == "datacube":
        from dpcube.mechanisms.datacube.mechanism import CubeSource

        return CubeSource(
            data, schema, on_out_of_domain=spec.on_out_of_domain, name=identity, bounding_seed=seed
        )
    from dpcube.histogram import histogram

    return histogram(
        data,
        schema,
        on_out_of_domain=cast(Any, spec.on_out_of_domain),
        dataset=identity,
        bounding_seed=seed,
    )


def _build(spec: TableSpec, epsilon: float, neighbour: str) -> Any:
    cls = registry.resolve(registry.MECHANISMS, spec.mechanism, "mechanism")
    try:
        mechanism = cls(epsilon=epsilon, neighbour=neighbour, **spec.params)
    except (TypeError, ValueError, DPCubeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"table {spec.name!r}: params: {first}") from None
    if mechanism.charged_delta is not None:
        raise BudgetError(
            f"table {spec.name!r}: {spec.mechanism} draws Gaussian noise (delta); a publication "
            "charges epsilon only: use a Laplace configuration"
        )
    if getattr(mechanism, "noise_mode", None) == "as_published":
        raise BudgetError(f"table {spec.name!r}: noise_mode 'as_published' is not epsilon-DP")
    return mechanism


def _hash_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _integrity(body: Mapping[str, Any]) -> str:
    text = json.dumps({k: v for k, v in body.items() if k != "integrity"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class PublishedTables:
    """What :meth:`Publication.release` made: the directory, its manifest and the releases."""

    directory: Path
    manifest: dict[str, Any]
    releases: dict[str, Release]
    charged: bool


def plan_shares(publication: Publication, epsilon: float) -> list[PlannedTable]:
    """Each table with its share of ``epsilon`` (reads no data, charges nothing)."""
    validate_privacy(epsilon, None)
    even = epsilon / len(publication.tables)
    rows: list[PlannedTable] = []
    for spec in publication.tables:
        schema = None
        if spec.schema is not None:
            try:
                schema = Schema.from_file(spec.schema)
            except SchemaError as exc:
                raise SchemaError(f"table {spec.name!r}: {exc}") from None
        cost, basis = _cost(spec, schema, even, publication.neighbour)
        rows.append(PlannedTable(spec, 0.0, cost, basis))
    shares = split_budget(epsilon, [r.spec.weight for r in rows], [r.cost for r in rows])
    for row, share in zip(rows, shares, strict=True):
        row.epsilon = share
    return rows


def release_publication(
    publication: Publication,
    data: Any,
    epsilon: float,
    out: str | os.PathLike[str],
    *,
    ledger: BudgetLedger | None,
    dataset: str,
    requested_total: RequestedTotal | None = None,
    random_state: int | None = None,
    report_writer: Callable[[Path, dict[str, Any]], None] | None = None,
) -> PublishedTables:
    """Count, check every table, charge ``epsilon`` once, draw, save atomically into ``out``.

    ``ledger``: the data set's ledger (None with a seeded ``random_state``: nothing is charged and
    every table is marked not for publication). ``out`` must not exist or be an empty directory.
    Nothing is charged when any table's check fails; nothing is written to ``out`` unless every
    table was drawn and saved.
    ``report_writer``: called with the staging directory and the manifest once every table and
    the manifest are saved, before the rename, to write the HTML reports (the front ends pass
    one; the report library sits above this layer): the reports appear with the publication.
    They are left out of ``publication.json``'s hashes on purpose: they are post-processing of
    the releases, which the hashes do cover, and ``dpcube report`` may rewrite them.
    """
    if ledger is None and random_state is None:
        raise BudgetError("a publication not seeded is charged to its data set's ledger: pass one")
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise DataError(
            f"--out {str(out)!r}: a publication is written into a new or empty directory"
        )
    check_output_directory(target)
    rows = plan_shares(publication, epsilon)
    publication_id = os.urandom(16).hex()
    # 1-2: count and check every table; nothing is charged until all passed
    for row in rows:
        schema = Schema.from_file(row.spec.schema) if row.spec.schema else None
        row.mechanism = _build(row.spec, row.epsilon, publication.neighbour)
        why = row.mechanism.integer_unavailable(schema) if row.spec.integer else None
        if why is not None:
            raise DataError(f"table {row.spec.name!r}: integer: {why} (nothing was charged)")
        try:
            counted = _count(row.spec, data, schema, dataset, random_state)
            row.checked = row.mechanism.check_release(counted, random_state)
        except DPCubeError as exc:  # the same error, naming the table
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            exc.args = (f"table {row.spec.name!r}: {first} (nothing was charged)",)
            raise
    file_key()  # the key that marks the files the saves write: made (or refused) before the charge
    seeded = random_state is not None
    # 3: the one charge
    charged = False
    if ledger is not None:
        ledger.charge(
            epsilon,
            None,
            mechanism="publication",
            release_id=publication_id,
            note=",".join(r.spec.name for r in rows),
            requested_total=requested_total,
        )
        charged = True
    # 4: draw every table, save into a staging directory, then rename it into place
    releases: dict[str, Release] = {}
    for row in rows:
        meta = row.checked.metadata
        meta.accounted = charged
        meta.report["publication"] = {
            "id": publication_id,
            "table": row.spec.name,
            "epsilon_share": row.epsilon,
            "epsilon_total": epsilon,
        }
        release = row.checked.draw(charged=charged)
        # whole, non-negative, consistent numbers: post-processing, no budget spent
        releases[row.spec.name] = release.to_integer() if row.spec.integer else release
    target.parent.mkdir(parents=True, exist_ok=True)
    # a fresh directory of dpcube's own (never one already there): the only one removed on failure
    staging = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}publication-", dir=target.parent))
    try:
        tables = []
        for row in rows:
            saved = releases[row.spec.name].save(staging / row.spec.name)
            tables.append(
                {
                    "name": row.spec.name,
                    "mechanism": releases[row.spec.name].metadata.mechanism,
                    "requested": row.spec.mechanism,
                    "epsilon": row.epsilon,
                    "weight": row.spec.weight,
                    "expected_error_at_1": row.cost,
                    "basis": row.basis,
                    "release_id": releases[row.spec.name].metadata.release_id,
                    "manifest_sha256": _hash_file(saved / "manifest.json"),
                }
            )
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "publication_id": publication_id,
            "epsilon": epsilon,
            "neighbour": publication.neighbour,
            "composition": "sequential: the tables' shares sum to at most epsilon",
            "accounted": charged,
            "for_publication": charged and not seeded,
            "tables": tables,
        }
        manifest["integrity"] = _integrity(manifest)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        (staging / REPORT).write_text(publication_report(manifest), encoding="utf-8")
        if report_writer is not None:
            report_writer(staging, manifest)
        # dpcube's marks name a file's place: the files it wrote move to ``target`` (a report
        # there stays one ``dpcube report`` may rewrite)
        marked = _marked_files(staging)
        for relative, digest in marked:
            remember_written(target / relative, digest)
        if target.exists():
            target.rmdir()  # empty, checked above
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for relative, digest in marked:
        forget_written(staging / relative, digest)
    return PublishedTables(target, manifest, releases, charged)


def _marked_files(directory: Path) -> list[tuple[Path, str]]:
    """The files under ``directory`` that dpcube wrote there (its marks), with their SHA-256."""
    found = []
    for path in sorted(directory.rglob("*")):
        digest = written_sha256(path) if path.is_file() else None
        if digest is not None:
            found.append((path.relative_to(directory), digest))
    return found


def publication_report(manifest: Mapping[str, Any]) -> str:
    """The publication's report in Markdown: the guarantee in sentences and the shares."""
    lines = [
        "# Publication",
        "",
        f"{len(manifest['tables'])} tables released from one data set under one budget of "
        f"epsilon = {manifest['epsilon']:g} ({manifest['neighbour'].replace('_', '/')} "
        "neighbours), charged once. By sequential composition the whole publication is "
        f"epsilon = {manifest['epsilon']:g} differentially private.",
        "",
        "The budget is split to minimise the weighted mean squared error per query: "
        "eps_i = E (w_i c_i)^(1/3) / sum_j (w_j c_j)^(1/3), with c_i the planner's error at "
        "epsilon 1; a table whose error depends on the data gets E w_i / sum w.",
        "",
        "| table | mechanism | epsilon | weight | basis |",
        "|---|---|---|---|---|",
    ]
    for t in manifest["tables"]:
        lines.append(
            f"| {t['name']} | {t['mechanism']} | {t['epsilon']:.4g} | {t['weight']:g} | "
            f"{t['basis']} |"
        )
    if not manifest["for_publication"]:
        lines += ["", "**NOT FOR PUBLICATION**: the noise was seeded or nothing was charged."]
    return "\n".join(lines) + "\n"


def publication_members(directory: str | os.PathLike[str]) -> list[Path]:
    """The table directories of a publication, in its order, after the manifest's integrity hash
    and every table manifest's SHA-256 are checked (each release is verified when loaded)."""
    d = Path(directory)
    path = d / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable publication manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{path}: not a publication manifest of format {FORMAT}")
    if manifest.get("integrity") != _integrity(manifest):
        raise DataError(f"{path}: the manifest's integrity hash does not match its content")
    members = []
    for t in manifest["tables"]:
        name = _check_name(str(path), "tables", t.get("name"))
        try:
            digest = _hash_file(d / name / "manifest.json")
        except OSError as exc:
            raise DataError(f"{d / name}: table missing ({exc.strerror})") from None
        if digest != t.get("manifest_sha256"):
            raise DataError(f"{d / name}: its manifest differs from the one the publication lists")
        members.append(d / name)
    return members


def load_publication(directory: str | os.PathLike[str]) -> dict[str, Release]:
    """The releases of a publication directory, each verified (:func:`publication_members`)."""
    return {m.name: load_release(m) for m in publication_members(directory)}


def is_publication(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds a publication (its :data:`MANIFEST`)."""
    return (Path(directory) / MANIFEST).is_file()


__all__ = [
    "MANIFEST",
    "REPORT",
    "PlannedTable",
    "Publication",
    "PublishedTables",
    "TableSpec",
    "is_publication",
    "load_publication",
    "plan_shares",
    "publication_members",
    "publication_report",
    "release_publication",
    "split_budget",
]
