"""Import time (issue 21, item 4): ``import overdub`` against ``import numba``, each in fresh processes,
interleaved, medians of wall time; and what ``import overdub`` leaves out of ``sys.modules``.

    python benchmarks/import_time.py [--runs 11] [--overdub PATH]... [--uncached]

By default Python's bytecode caches are used as an installed package has them (``pip install`` writes them;
the first run writes the checkout's). ``--uncached`` is a fresh clone's editable install run with
``PYTHONDONTWRITEBYTECODE=1``: overdub's own modules compile from source in every process, while numba (and
everything else installed) reads the bytecode its install wrote. Each overdub package is copied, without its
``__pycache__``, to a temporary directory that no process writes bytecode into.

``--overdub PATH`` (repeatable) measures the overdub found at PATH (a checkout) as well, to compare versions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

RUN = """
import sys, time
start = time.perf_counter()
import {module}
elapsed = time.perf_counter() - start
print(elapsed, [name for name in ("numba.cuda", "cuda.bindings", "cuda.core", "cupy") if name in sys.modules])
"""


def _one(module: str, path: str, env: dict[str, str], cwd: str) -> tuple[float, str]:
    """One fresh process's import time, and the GPU stack's modules it imported (``cwd``: a directory holding
    no overdub, which ``python -c`` would import before the one on PYTHONPATH)."""
    env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-c", RUN.format(module=module)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    if done.returncode:
        raise RuntimeError(done.stderr)
    elapsed, imported = done.stdout.split(" ", 1)
    return float(elapsed), imported.strip()


def _fresh_clone(path: str, into: str) -> str:
    """A copy of the overdub package of the checkout ``path`` without bytecode, as a fresh clone has it (its
    compiled extensions included); the directory to put on PYTHONPATH."""
    copy = tempfile.mkdtemp(dir=into)
    shutil.copytree(
        os.path.join(path, "overdub"), os.path.join(copy, "overdub"), ignore=shutil.ignore_patterns("__pycache__")
    )
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--overdub", action="append", default=[], help="another overdub checkout to measure")
    parser.add_argument("--uncached", action="store_true", help="compile every module from source")
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    jobs = [("numba", "numba", here)] + [
        ("overdub" if path == here else f"overdub [{path}]", "overdub", path)
        for path in [here] + [os.path.abspath(p) for p in args.overdub]
    ]
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as clones:
        env = dict(os.environ)
        env.pop("PYTHONPYCACHEPREFIX", None)  # numba's bytecode is read where its install wrote it
        if args.uncached:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            jobs = [
                (label, module, _fresh_clone(path, clones) if module == "overdub" else path)
                for label, module, path in jobs
            ]
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        for _, module, path in jobs:  # a first run each: a checkout's bytecode written, as installing writes it
            _one(module, path, env, empty)
        times: dict[str, list[float]] = {label: [] for label, _, _ in jobs}
        imported: dict[str, str] = {}
        for _ in range(args.runs):  # interleaved: the machine's load falls on every variant alike
            for label, module, path in jobs:
                elapsed, imported[label] = _one(module, path, env, empty)
                times[label].append(elapsed)
        if args.uncached:  # every process compiled overdub from source: none wrote its bytecode
            written = [root for _, module, path in jobs if module == "overdub" for root, _, _ in os.walk(path)]
            assert not [root for root in written if root.endswith("__pycache__")], "overdub's bytecode was written"
    numba = statistics.median(times["numba"])
    print(f"{'import':40} {'median s':>9} {'/ numba':>8}  GPU stack imported")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:40} {median:9.3f} {median / numba:8.2f}  {imported[label]}")


if __name__ == "__main__":
    main()
