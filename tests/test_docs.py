"""Every ```python block in README.md and docs/*.md runs, so the documentation cannot drift from the code.

Each block is a standalone program (what a reader would paste): it runs alone, in a fresh Python process, on
the CPU target (``OVERDUB_TARGET=cpu``), with a temporary directory as its working directory. A block fails
its test if it raises (or exits non-zero); its traceback names the markdown file and the line in it, because
the block is compiled under the markdown file's path with its lines at their places in that file.

A block that must not run here (it needs a GPU, say) is marked by an HTML comment on the line right before
its fence, which the rendered page does not show; the test is then skipped with the reason given:

    <!-- no-run: needs a GPU -->
    ```python
    ...

Indented (4-space) blocks are shell commands, not Python, and fenced blocks in other languages are not run.
Test ids are ``file:line`` of the opening fence.
"""

import re
import textwrap
from pathlib import Path

import pytest

from helpers import ROOT, run_python

FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_OPEN = re.compile(r"^(\s*)```python\b.*$")
_CLOSE = re.compile(r"^\s*```\s*$")
_NO_RUN = re.compile(r"^\s*<!--\s*no-run\s*:?\s*(.*?)\s*-->\s*$")

# Runs in the child: the block's source arrives on stdin; padding it with blank lines puts each of its lines
# at its line number in the markdown file, so tracebacks (and overdub's messages) name "file.md", line N.
_RUNNER = """
import sys
path, first = sys.argv[1], int(sys.argv[2])
code = compile("\\n" * (first - 1) + sys.stdin.read(), path, "exec")
exec(code, {"__name__": "__main__", "__file__": path})
"""


def blocks(path: Path):
    """(fence line, first code line, source, no-run reason or None) for each ```python block of ``path``."""
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if not opened:
            i += 1
            continue
        fence = i
        j = i + 1
        while j < len(lines) and not _CLOSE.match(lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"{path.name}:{fence + 1}: ```python block is never closed")
        previous = next((lines[k] for k in range(fence - 1, -1, -1) if lines[k].strip()), "")
        marked = _NO_RUN.match(previous)
        source = textwrap.dedent("\n".join(lines[fence + 1 : j])) + "\n"
        found.append((fence + 1, fence + 2, source, (marked.group(1) or "marked no-run") if marked else None))
        i = j + 1
    return found


def _cases():
    for path in FILES:
        for fence, first, source, no_run in blocks(path):
            name = path.relative_to(ROOT).as_posix()
            marks = [pytest.mark.skip(reason=f"{name}:{fence}: {no_run}")] if no_run else []
            yield pytest.param(path, first, source, id=f"{name}:{fence}", marks=marks)


CASES = list(_cases())


def test_blocks_are_found():
    """The extraction itself works: the README's scenario and dispatch blocks are among the cases."""
    assert sum(case.values[0].name == "README.md" for case in CASES) >= 2


_NEEDS_RUNNER = ("syncthreads", "shared.array", "_sync(", "this_grid")


@pytest.mark.parametrize("path, first, source", CASES)
def test_block_runs(path, first, source, tmp_path):
    from overdub.targets.cpu import runner

    if runner.SYMBOLS is None and any(word in source for word in _NEEDS_RUNNER):
        pytest.skip("the CPU grid runner (overdub.targets.cpu._cpugrid) is not built here: barriers run only with it")
    result = run_python(
        "-c",
        _RUNNER,
        path,
        first,
        path=[ROOT / "examples"],  # the example libraries import
        env={"OVERDUB_TARGET": "cpu", "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=tmp_path,
        input=source,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{path.name}: the block starting at line {first} failed (exit {result.returncode}):\n"
            f"{result.stderr[-4000:]}\n--- stdout ---\n{result.stdout[-2000:]}",
            pytrace=False,
        )
