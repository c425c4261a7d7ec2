"""Built strategies reused across epsilons and calls: a strategy is a function of the
workload and the grid only.

Under pure ε-DP the matrix mechanism's strategy does not depend on ε (HDMM §3: the Laplace noise
is scaled to ``‖A‖₁/ε`` after A is chosen, and the error ``2/ε² · ‖A‖₁² tr(G (AᵀA)⁻¹)`` has the
same minimiser at every ε); with δ the Gaussian noise is scaled likewise. The optimised strategies
(``opt``, ``lsa``, ``eigen``, ``gauss-opt``) take seconds to minutes, and the planner, the inverse
question (what ε is needed) and a leaderboard over several ε ask for the same strategy again. So
:func:`cached` keeps each built strategy under the key (strategy name, grid, workload content,
options):

- in memory, for the process (the last :data:`MEMORY_ENTRIES` strategies);
- on disk under ``$DPCUBE_HOME/strategies/`` when ``DPCUBE_STRATEGY_CACHE=disk``: one JSON file
  per key (the strategy's rebuild spec, :func:`~.strategies.build_strategy`), written atomically;
  a file that does not parse is ignored and rebuilt. ``DPCUBE_STRATEGY_CACHE=off`` disables both.

The workload's content is its spec string (seeded specs rebuild the same queries), or a SHA-256 of
its boxes, or of its dense Gram up to 4,096 cells; a workload with none of these is not cached.
Nothing here reads data or spends budget: a strategy is built from public inputs only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpcube.errors import DPCubeError
from dpcube.mechanisms.matrix.strategies import Strategy, build_strategy
from dpcube.workloads import Workload

#: Strategies kept in memory (least recently used dropped first).
MEMORY_ENTRIES = 16
#: Environment variable: ``memory`` (default), ``disk`` (also ``$DPCUBE_HOME/strategies``), ``off``.
CACHE_ENV = "DPCUBE_STRATEGY_CACHE"
#: Bumped when a strategy's construction changes, so older disk entries are not reused (2: the
#: default ``opt`` refines 2-axis products on the whole grid).
VERSION = 2

_memory: OrderedDict[str, Strategy] = OrderedDict()


def workload_fingerprint(w: Workload) -> str | None:
    """A string that identifies the workload's queries (module docstring), or None.

    >>> from dpcube.workloads import from_boxes, parse_workload
    >>> workload_fingerprint(parse_workload("allrange:4x4"))
    'spec:allrange:4x4'
    >>> workload_fingerprint(from_boxes([[[0, 1]]], (4,)))[:6]
    'boxes:'
    """
    if w.spec is not None:
        return f"spec:{w.spec}"
    if w.boxes is not None:
        digest = hashlib.sha256(np.ascontiguousarray(w.boxes, dtype=np.int64).tobytes())
        digest.update(repr(w.dims).encode())
        return f"boxes:{digest.hexdigest()}"
    if w.n <= 4096:
        gram = np.ascontiguousarray(w.gram.dense(), dtype=np.float64)
        return f"gram:{hashlib.sha256(gram.tobytes()).hexdigest()}"
    return None


def cache_key(name: str, dims: tuple[int, ...], w: Workload, options: dict[str, Any]) -> str | None:
    """The key of a strategy (SHA-256 hex), or None when the workload has no fingerprint."""
    fingerprint = workload_fingerprint(w)
    if fingerprint is None:
        return None
    text = json.dumps([VERSION, name, list(dims), fingerprint, sorted(options.items())])
    return hashlib.sha256(text.encode()).hexdigest()


def cache_mode() -> str:
    """``memory``, ``disk`` or ``off`` (from ``DPCUBE_STRATEGY_CACHE``; unknown values refused)."""
    from dpcube.errors import UsageError

    mode = os.environ.get(CACHE_ENV, "memory").strip().lower() or "memory"
    if mode not in ("memory", "disk", "off"):
        raise UsageError(f"{CACHE_ENV}={mode!r}: use memory, disk or off")
    return mode


def cache_dir() -> Path:
    """``$DPCUBE_HOME/strategies`` (``~/.dpcube/strategies``)."""
    from dpcube.privacy.ledger import _home

    return _home() / "strategies"


def _load(path: Path, name: str) -> Strategy | None:
    try:
        saved = json.loads(path.read_text())
        out = build_strategy(saved["spec"], name=name)
        out.info = dict(saved.get("info", {}))
        return out
    except (OSError, ValueError, KeyError, TypeError, DPCubeError):
        return None


def _save(path: Path, strategy: Strategy) -> None:
    from dpcube.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"spec": strategy.spec, "info": strategy.info, "name": strategy.name})
    write_atomic(path, text.encode())


def cached(
    name: str,
    dims: tuple[int, ...],
    w: Workload,
    options: dict[str, Any],
    build: Callable[[], Strategy],
) -> Strategy:
    """The strategy built before for the same key, else ``build()`` (kept for next time)."""
    mode = cache_mode()
    key = None if mode == "off" else cache_key(name, dims, w, options)
    if key is None:
        return build()
    if key in _memory:
        _memory.move_to_end(key)
        return _memory[key]
    path = cache_dir() / f"{key}.json"
    strategy = _load(path, name) if mode == "disk" and path.is_file() else None
    if strategy is None:
        strategy = build()
        if mode == "disk":
            _save(path, strategy)
    _memory[key] = strategy
    while len(_memory) > MEMORY_ENTRIES:
        _memory.popitem(last=False)
    return strategy


def clear_memory() -> None:
    """Forget the strategies kept in memory (tests; the disk entries stay)."""
    _memory.clear()


__all__ = [
    "CACHE_ENV",
    "MEMORY_ENTRIES",
    "cache_dir",
    "cache_key",
    "cache_mode",
    "cached",
    "clear_memory",
    "workload_fingerprint",
]
