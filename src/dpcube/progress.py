"""Progress reporting for long steps (rich), silent unless enabled.

The CLI enables progress when stderr is a terminal; library calls stay quiet by default.

>>> with step("counting"):
...     pass
>>> list(track(range(3), "looping"))
[0, 1, 2]
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_enabled = False


def _console() -> Any:
    """The stderr console (rich is imported on first use: ``dpcube query`` never needs it)."""
    from rich.console import Console

    global _console_instance
    if _console_instance is None:
        _console_instance = Console(stderr=True)
    return _console_instance


_console_instance: Any = None

#: The width a console writes at when stdout is not a terminal: wide enough that no table or
#: line is ever wrapped or cut (a file or a pipe gets every row whole, one line each).
UNWRAPPED_WIDTH = 1 << 16


def stdout_console() -> Any:
    """A rich console on stdout: the terminal's width on a terminal; elsewhere (a pipe, a
    file) never wrapped (:data:`UNWRAPPED_WIDTH`, soft wrap: a line is written as it is)."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=UNWRAPPED_WIDTH, soft_wrap=True)


def enable(on: bool | None = None) -> None:
    """Turn progress display on (default: when stderr is a terminal)."""
    global _enabled
    _enabled = sys.stderr.isatty() if on is None else on


@contextmanager
def step(description: str) -> Iterator[None]:
    """A spinner with elapsed time around a step of unknown length."""
    if not _enabled:
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=_console(),
        transient=True,
    ) as p:
        p.add_task(description, total=None)
        yield


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a progress bar (when enabled)."""
    if not _enabled:
        yield from items
        return
    if total is None and isinstance(items, Sequence):
        total = len(items)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=_console(), transient=True) as p:
        task = p.add_task(description, total=total)
        for item in items:
            yield item
            p.advance(task)
