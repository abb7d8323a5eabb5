"""Import time (issue 21, item 4): ``import overdub`` against ``import numba``, each in fresh processes,
interleaved, medians of wall time; and what ``import overdub`` leaves out of ``sys.modules``.

    python benchmarks/import_time.py [--runs 11] [--overdub PATH]... [--uncached]

By default Python's bytecode caches are used as an installed package has them (``pip install`` writes them;
the first run writes the checkout's). ``--uncached`` compiles every module from source in every process --
numba's as well as overdub's -- as a checkout run with ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__``
compiles overdub's: an empty ``PYTHONPYCACHEPREFIX`` and no writing.

``--overdub PATH`` (repeatable) measures the overdub found at PATH (a checkout) as well, to compare versions.
"""

from __future__ import annotations

import argparse
import os
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
    with tempfile.TemporaryDirectory() as empty:
        env = dict(os.environ)
        if args.uncached:
            env.update(PYTHONPYCACHEPREFIX=empty, PYTHONDONTWRITEBYTECODE="1")
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            for _, module, path in jobs:  # the bytecode caches written, as installing writes them
                _one(module, path, env, empty)
        times: dict[str, list[float]] = {label: [] for label, _, _ in jobs}
        imported: dict[str, str] = {}
        for _ in range(args.runs):  # interleaved: the machine's load falls on every variant alike
            for label, module, path in jobs:
                elapsed, imported[label] = _one(module, path, env, empty)
                times[label].append(elapsed)
    numba = statistics.median(times["numba"])
    print(f"{'import':40} {'median s':>9} {'/ numba':>8}  GPU stack imported")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:40} {median:9.3f} {median / numba:8.2f}  {imported[label]}")


if __name__ == "__main__":
    main()
