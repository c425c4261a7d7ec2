"""Extract and run the examples of the README and the tutorials (tests/docs/test_doc_examples.py).

The convention (documented in docs/tutorials/README.md):

- a fenced block marked ```` ```console ```` holds shell commands, each on a line starting with
  ``$ `` (a line ending in ``\\`` continues on the next); the other lines are the output the
  command prints. Every command must exit 0, and every output line shown must begin a line the
  command printed, numbers aside (each number matches any number: the noise differs run to run).
  A line ``...`` stands for lines not shown, and ``...`` within a line for any text there;
- a fenced block marked ```` ```python ```` is run; the Python blocks of one page share one
  namespace, in page order, interleaved with its console blocks;
- ```` ```console skip ```` or ```` ```python skip ```` marks a block that is shown but not run
  (say why next to it); blocks in any other language (``sh``, ``yaml``, ``text``) are never run.

Everything runs in a fresh temporary directory holding a copy of ``examples/``, with
``DPCUBE_HOME`` there too, so paths in the docs are written from the repository root.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

RUN_KINDS = ("console", "python")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*(.*)$")
_NUMBER = re.compile(r"(?<!\w)[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?")
_OPERATORS = set("();<>|&")


def shell_syntax(line: str) -> bool:
    """Whether a command line needs a shell (an unquoted operator, a variable or a glob).

    >>> shell_syntax("dpcube query rel/ --where 'income=>50K'"), shell_syntax("dpcube a > out")
    (False, True)
    """
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", line)
    return any(t and set(t) <= _OPERATORS for t in tokens) or bool(set("$`*?~") & set(unquoted))


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, whether it is skipped, its text and first line number."""

    kind: str
    skip: bool
    text: str
    line: int

    @property
    def runs(self) -> bool:
        return self.kind in RUN_KINDS and not self.skip


@dataclass(frozen=True)
class Command:
    """A ``$ `` command of a console block and the output lines shown after it."""

    line: str
    shown: tuple[str, ...]


def blocks(markdown: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order.

    >>> [(b.kind, b.skip, b.text) for b in blocks("x\\n```python\\n1\\n```\\n```console skip\\n$ a\\n```\\n")]
    [('python', False, '1\\n'), ('console', True, '$ a\\n')]
    """
    out: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, kind, rest = match.groups()
        start = i + 1
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        body = "\n".join(line[len(indent) :] for line in lines[start:i])
        out.append(Block(kind, "skip" in rest.split(), body + "\n" if body else "", start + 1))
        i += 1
    return out


def commands(block: Block) -> list[Command]:
    """The commands of a console block with the output lines shown after each.

    >>> [(c.line, c.shown) for c in commands(Block("console", False, "$ a \\\\\\n  b\\nout 1\\n$ c\\n", 1))]
    [('a b', ('out 1',)), ('c', ())]
    """
    out: list[Command] = []
    current: list[str] = []
    shown: list[str] = []
    continued = False
    for raw in block.text.splitlines():
        if continued:
            current.append(raw.strip().removesuffix("\\").strip())
            continued = raw.rstrip().endswith("\\")
            continue
        if raw.startswith("$ "):
            if current:
                out.append(Command(" ".join(current), tuple(shown)))
            current, shown = [raw[2:].strip().removesuffix("\\").strip()], []
            continued = raw.rstrip().endswith("\\")
        elif current and raw.strip():
            shown.append(raw.rstrip())
    if current:
        out.append(Command(" ".join(current), tuple(shown)))
    return out


def normalise(line: str) -> str:
    """A line with every number replaced by ``#`` and runs of spaces collapsed.

    >>> normalise("968 ± 105.1 (1 standard deviation)")
    '# ± # (# standard deviation)'
    """
    return " ".join(_NUMBER.sub("#", line).split())


def missing_lines(shown: tuple[str, ...], printed: str) -> list[str]:
    """The shown output lines that begin no printed line (numbers aside): a command may print more
    than the page shows (a later column, a note), never something else. A line ``...`` is
    skipped; ``...`` inside a line matches anything there (an identifier, a path).

    >>> missing_lines(("answer 12", "..."), "answer 3.5 (more)\\nnote\\n")
    []
    >>> missing_lines(("gone",), "answer 3\\n")
    ['gone']
    >>> missing_lines(("id: data-... (new)", "path: ..."), "id: data-9f3 (new)\\npath:\\n")
    []
    """
    got = [normalise(line) for line in printed.splitlines()]
    lost = []
    for line in shown:
        if line.strip() == "...":
            continue
        pattern = re.escape(normalise(line)).replace(r"\ \.\.\.", ".*").replace(r"\.\.\.", ".*")
        if not any(re.match(pattern, g) for g in got):
            lost.append(line)
    return lost


def run_command(line: str, cwd: Path) -> tuple[int, str]:
    """Run one documented command in ``cwd``: ``dpcube ...`` in this process (fast; the same
    ``main`` the console script calls), anything else, or anything with shell syntax, in bash."""
    words = shlex.split(line)
    if words and words[0] == "dpcube" and not shell_syntax(line):
        from dpcube.cli.main import main

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            code = main(words[1:])
        return code, buffer.getvalue()
    if words and words[0] == "python":
        line = shlex.join([sys.executable, *words[1:]])
    done = subprocess.run(
        ["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout + done.stderr


def run_page(
    path: Path, cwd: Path, substitutions: dict[str, str] | None = None
) -> dict[str, object]:
    """Run every runnable block of ``path`` in ``cwd``; raise AssertionError on the first failure.

    ``substitutions`` replaces text in the blocks before they run (a test points a page at
    another file); returns the namespace of the page's Python blocks.
    """
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    for block in blocks(path.read_text()):
        if not block.runs:
            continue
        for old, new in (substitutions or {}).items():
            block = Block(block.kind, block.skip, block.text.replace(old, new), block.line)
        where = f"{path.name}:{block.line}"
        if block.kind == "python":
            buffer = io.StringIO()
            try:
                with contextlib.redirect_stdout(buffer):
                    exec(compile(block.text, where, "exec"), namespace)
            except Exception as exc:
                raise AssertionError(
                    f"{where}: the Python block raised {type(exc).__name__}: {exc}\n"
                    f"{buffer.getvalue()}"
                ) from exc
            continue
        for command in commands(block):
            code, printed = run_command(command.line, cwd)
            assert code == 0, f"{where}: `{command.line}` exited {code}:\n{printed}"
            lost = missing_lines(command.shown, printed)
            assert not lost, (
                f"{where}: `{command.line}` no longer prints {lost} (numbers aside); it printed:\n"
                f"{printed}"
            )
    return namespace
