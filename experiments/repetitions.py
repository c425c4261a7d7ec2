"""Repetition counts of the experiments: quick (CI) against full (``--full``).

Every experiment keeps its quick default for CI; ``--full`` sets the count that reproduces a
paper's means. None of the papers states its count, so the full counts are this project's,
chosen so that the reported mean is stable to a few per cent:

* census (Fioretto, Van Hentenryck and Zhu, AI 2021, Sec. 11: the mean and standard deviation
  over an unstated number of instances): >= 10 seeds, mean +- std;
* data cubes (Ding et al., SIGMOD 2011, Sec. 6): >= 10 noise draws, >= 20 for the max-error
  plots; per sub-experiment, in ``datacube.QUICK_SEEDS`` / ``datacube.FULL_SEEDS``;
* spatial / HTF (Shaham et al., SIGSPATIAL 2021, Sec. 5) and the quadtree-height study:
  >= 5 seeds;
* Privelet (Xiao, Wang and Gehrke, ICDE 2010, Sec. VII): >= 5 releases per epsilon;
* matrix mechanism: its errors are exact expectations (no noise is drawn), so repetitions apply
  only to the random range workloads; ``--full`` there also means the long LSA runs.

``coverage`` and ``leaderboard`` are the project's own experiments with no paper to reproduce;
they keep their ``--releases`` / ``--trials`` flags and have no ``--full``.

An explicit count on the command line (``--seeds 3``) wins over ``--full``, and the plan printed
at start says which count is used and why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: experiment -> (quick count, full count, what the full count reproduces).
SPEC_REPETITIONS: dict[str, tuple[int, int, str]] = {
    "census": (3, 10, "Fioretto et al.'s means and deviations: >= 10 seeds"),
    "spatial": (2, 5, "Shaham et al.'s mean relative errors: >= 5 seeds"),
    "quadtree-height": (3, 5, "Shaham et al.'s mean relative errors: >= 5 seeds"),
    "privelet": (5, 5, "Xiao et al.'s average errors: >= 5 releases per epsilon"),
}


def repetitions(experiment: str, full: bool, explicit: int | None = None) -> tuple[int, str]:
    """The count to run and why: an explicit count, else the full one with ``full``, else quick.

    >>> repetitions("census", full=False)
    (3, "quick (CI) count; --full runs 10 (Fioretto et al.'s means and deviations: >= 10 seeds)")
    >>> repetitions("census", full=True)
    (10, "full count (Fioretto et al.'s means and deviations: >= 10 seeds)")
    >>> repetitions("census", full=True, explicit=4)[0]
    4
    """
    quick, spec, ref = SPEC_REPETITIONS[experiment]
    if explicit is not None:
        return explicit, f"given on the command line (full: {spec}, {ref})"
    if full:
        return spec, f"full count ({ref})"
    return quick, f"quick (CI) count; --full runs {spec} ({ref})"


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean, s / sqrt(n) with the n - 1 sample deviation; nan below 2 values.

    >>> round(standard_error([1.0, 2.0, 3.0, 4.0]), 4)
    0.6455
    >>> standard_error([5.0])
    nan
    """
    n = len(values)
    if n < 2:
        return float("nan")
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def mean_se_table(frame: Any, keys: list[str], columns: list[str]) -> Any:
    """Group ``frame`` by ``keys``: each column's mean (same name), ``<column>_se`` (standard error
    of that mean over the runs of the group) and ``runs`` (how many rows were averaged).

    >>> import pandas as pd
    >>> t = mean_se_table(pd.DataFrame({"m": ["a"] * 3, "err": [1.0, 2.0, 3.0]}), ["m"], ["err"])
    >>> t.round(4).to_dict("records")
    [{'m': 'a', 'err': 2.0, 'err_se': 0.5774, 'runs': 3}]
    """
    groups = frame.groupby(keys, sort=False)
    out = groups[columns].mean()
    se = groups[columns].agg(lambda s: standard_error(list(s.astype(float))))
    for c in columns:
        out[f"{c}_se"] = se[c]
    out["runs"] = groups.size()
    return out.reset_index()


def format_mean_se(mean: float, se: float, digits: int = 2) -> str:
    """'mean ± se' for the docs tables; the mean alone when there is no standard error.

    >>> format_mean_se(1.2345, 0.0567)
    '1.23 ± 0.06'
    >>> format_mean_se(3.0, float("nan"))
    '3.00'
    """
    if math.isnan(se):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {se:.{digits}f}"
