"""No release code path draws numpy's (or Python's) floating-point Laplace/Gaussian noise.

Mironov (2012) showed that textbook float Laplace noise leaks the true value through its low
bits; dpcube draws every noise value from :mod:`dpcube.privacy.samplers` instead. Two checks:

- static: the syntax tree of every module under ``src/dpcube`` has no call of a float noise
  method (``.laplace(``, ``.normal(``, ...), except in modules allow-listed below because they
  generate *data*, never noise for a release;
- dynamic: Identity releases (Laplace, Gaussian, and the snapped Gaussian for large sigma) run
  with numpy's module-level samplers replaced by functions that raise, and with a profiler hook
  that records any call of a float sampler method on a numpy ``Generator``/``RandomState``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import dpcube
from dpcube.histogram import Histogram
from dpcube.mechanisms.identity import Identity
from dpcube.privacy.random import SeededRandomSource
from dpcube.privacy.samplers import snapped_laplace
from dpcube.schema import Schema

SRC = Path(dpcube.__file__).resolve().parent

#: Float samplers of numpy's Generator/RandomState (and of Python's ``random`` module).
FORBIDDEN = {
    "laplace",
    "normal",
    "standard_normal",
    "exponential",
    "standard_exponential",
    "gumbel",
    "gauss",
    "normalvariate",
    "expovariate",
}

#: Modules (relative to src/dpcube) that may call them because they generate synthetic *data*
#: that is then protected like any real data set; none of them draws release noise.
ALLOWED: dict[str, str] = {
    "demo/generator.py": "synthetic person table for the demo",
}


def forbidden_calls(path: Path, root: Path = SRC) -> list[str]:
    """``file:line name`` for each call ``<anything>.<forbidden name>(...)`` in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    hits = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in FORBIDDEN
        ):
            hits.append(f"{path.relative_to(root)}:{node.lineno} .{node.func.attr}(")
    return hits


def test_scanner_finds_float_noise_calls(tmp_path: Path) -> None:
    """The scanner itself can fail: it finds calls however the receiver is spelled, not names."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import numpy as np\n"
        "rng = np.random.default_rng()\n"
        "x = rng.laplace(0, 1, 3)\n"
        "y = np.random.normal(size=2)\n"
        "z = (rng).standard_normal()\n"
        "laplace = 'a name, not a call'\n"
        "w = rng.integers(0, 3)\n"
    )
    assert forbidden_calls(probe, tmp_path) == [
        "probe.py:3 .laplace(",
        "probe.py:4 .normal(",
        "probe.py:5 .standard_normal(",
    ]


def test_no_float_noise_call_in_src() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 10
    hits = []
    for path in files:
        rel = path.relative_to(SRC).as_posix()
        if rel in ALLOWED:
            continue
        hits.extend(forbidden_calls(path))
    assert not hits, (
        "float noise calls found (use dpcube.privacy.samplers, or allow-list a data generator "
        f"by module in {__file__}): {hits}"
    )


class _NoFloatNoiseGenerator(np.random.Generator):
    """A numpy Generator whose float noise methods record the call and raise."""

    calls: ClassVar[list[str]] = []


def _refusing(name: str) -> Any:
    def method(*args: Any, **kwargs: Any) -> Any:
        _NoFloatNoiseGenerator.calls.append(name)
        raise AssertionError(f"numpy float noise called: {name}")

    return method


for _name in FORBIDDEN:
    if hasattr(np.random.Generator, _name):
        setattr(_NoFloatNoiseGenerator, _name, _refusing(_name))


@contextmanager
def float_noise_forbidden(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Make numpy's float samplers raise and record their calls while the block runs.

    ``numpy.random.Generator`` is an immutable C type, so its methods cannot be patched; instead
    ``numpy.random.default_rng`` and ``numpy.random.Generator`` hand out a subclass whose float
    samplers raise, and the legacy module-level functions (``numpy.random.laplace``...) raise.
    """
    _NoFloatNoiseGenerator.calls = []
    real_default_rng = np.random.default_rng

    def default_rng(seed: Any = None) -> np.random.Generator:
        if isinstance(seed, np.random.Generator):
            return seed
        return _NoFloatNoiseGenerator(real_default_rng(seed).bit_generator)

    monkeypatch.setattr(np.random, "default_rng", default_rng)
    monkeypatch.setattr(np.random, "Generator", _NoFloatNoiseGenerator)
    for name in FORBIDDEN:
        if hasattr(np.random, name):
            monkeypatch.setattr(np.random, name, _refusing(name))
    yield _NoFloatNoiseGenerator.calls


def test_runtime_guard_detects_float_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    with float_noise_forbidden(monkeypatch) as calls:
        with pytest.raises(AssertionError):
            np.random.default_rng(0).laplace(0.0, 1.0, 3)
        with pytest.raises(AssertionError):
            np.random.normal(size=2)  # noqa: NPY002 (the legacy API is what is being guarded)
        np.random.default_rng(0).integers(0, 5, 3)  # other methods still work
    assert calls == ["laplace", "normal"]


SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "a", "kind": "ordinal", "range": [0, 9], "width": 1},
            {"name": "b", "kind": "nominal", "categories": ["x", "y", "z"]},
        ]
    }
)


@pytest.mark.parametrize(
    "mechanism",
    [
        Identity(1.0),
        Identity(0.3, neighbour="replace"),
        Identity(0.5, delta=1e-6, noise="gaussian"),
        Identity(1e-3, delta=1e-6, noise="gaussian", neighbour="replace"),  # sigma > 4096: snapped
    ],
    ids=["laplace", "laplace-replace", "gaussian", "gaussian-snapped"],
)
@pytest.mark.parametrize("random_state", [None, 3])
def test_identity_releases_draw_no_float_noise(
    mechanism: Identity, random_state: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    hist = Histogram(SCHEMA, np.arange(30).reshape(10, 3))
    with float_noise_forbidden(monkeypatch) as calls:
        release = mechanism.release(
            hist, random_state=random_state, account=random_state is not None
        )
        release.answer_many([{"a": [0, 4]}, {"b": "y"}])
        snapped_laplace(np.ones(5), 2.0, epsilon=1.0, support=1, source=SeededRandomSource(1))
    assert calls == []
    assert not np.array_equal(np.asarray(release.counts), hist.counts)  # noise was added
