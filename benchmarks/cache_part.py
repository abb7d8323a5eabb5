"""Part 7: starting fast -- the disk cache (cold, warm, after an edit) and host calls of generic functions.

A program of 20 kernels and 40 device methods in three modules (``dev1.py``, ``dev2.py``: 20 device methods
each; ``app.py``: kernel ``k{j}`` calls ``dev1.d{j}`` and ``dev2.e{j}``) is generated into a temporary
directory and run in fresh processes, each launching all 20 kernels once:

* **cold**: empty cache directory; **warm**: the cache the cold run filled;
* **cold, precompiled**: another empty cache directory, the program calling ``od.precompile`` on its 20 launches
  with ``WORKERS`` processes (one per CPU, at most 20; this one included) before launching; then **warm after
  the precompile**: the plain program on that cache, which must compile nothing; **cold, od.precompile()
  choosing its workers**: a third empty cache, ``od.precompile`` deciding whether workers pay (never slower
  than cold, by its target);
* **edited**: after ``dev1.d0``'s body changed in its file -- only ``k0`` depends on it.

Each run reports the seconds from importing the program to the last result (overdub, numba, numpy and, for
the CUDA variants, cupy are imported and the GPU's context is made before: those costs are the same in every
run, whatever the cache holds), how many kernels it compiled and whether every result matches numpy's; and the whole process's
wall time. The same program written for numba with ``cache=True``
(``numba.njit`` device functions and loop kernels on the CPU; ``cuda.jit(device=True, cache=True)`` and
``cuda.jit(cache=True)`` where a GPU is usable) runs the same way: numba keys its cache by each function's own
file, so after the edit ``k0`` still runs the old ``d0`` -- its result is stale -- while overdub's is fresh.

The host-call half times a call of a generic function with an already-seen combination of argument classes
against plum and multipledispatch (where importable) and a plain Python function.

    python benchmarks/cache_part.py --variant od-cpu --dir DIR [--precompile WORKERS]   # one run, one JSON line
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KERNELS = 20
N = 256
WORKERS = min(KERNELS, os.cpu_count() or 1)  # the processes od.precompile compiles in, this one included
PRECOMPILED = f"cold, od.precompile(workers={WORKERS})"
DECIDED = "cold, od.precompile() choosing its workers"
DECIDES = -1  # --precompile's value for od.precompile's own choice (workers=None)


def _device_module(prefix: str, name: str, offset: int, decorator: str, header: str) -> str:
    defs = [header]
    for j in range(KERNELS):
        defs.append(
            f"\n{decorator}\ndef {name}{j}(v{': od.Float' if decorator == '@od.function' else ''}):\n"
            f"    return v * {j + offset + 1}.0 + {prefix}\n"
        )
    return "\n".join(defs)


def program(variant: str) -> dict[str, str]:
    """The three modules' sources for a variant ("od-*", "numba-cpu", "numba-cuda")."""
    if variant.startswith("od"):
        header, decorator = "import overdub as od\n", "@od.function"
    elif variant == "numba-cpu":
        header, decorator = "import numba\n", "@numba.njit(cache=True)"
    else:
        header, decorator = "from numba import cuda\n", "@cuda.jit(device=True, cache=True)"
    sources = {
        "dev1": _device_module("1.0", "d", 0, decorator, header),
        "dev2": _device_module("2.0", "e", KERNELS, decorator, header),
    }
    lines = [header, "from numba import cuda", "import dev1, dev2\n"]
    for j in range(KERNELS):
        call = f"dev1.d{j}(x[i]) + dev2.e{j}(x[i])"
        if variant == "numba-cpu":
            lines.append(
                f"@numba.njit(cache=True)\ndef k{j}(out, x):\n    for i in range(out.size):\n        out[i] = {call}\n"
            )
        else:
            lines.append(
                f"{'@cuda.jit(cache=True)' if variant == 'numba-cuda' else ''}\ndef k{j}(out, x):\n"
                f"    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = {call}\n"
            )
    sources["app"] = "\n".join(lines)
    return sources


def expected(j: int, edited: bool) -> np.ndarray:
    x = np.arange(N, dtype=np.float64)
    d = x * (j + 1) + (2.0 if edited and j == 0 else 1.0)
    return d + x * (j + KERNELS + 1) + 2.0


EDIT = ("return v * 1.0 + 1.0", "return v * 1.0 + 2.0")  # dev1.d0's body: k0 adds 1 more


# --- one run (in its own process) ------------------------------------------------------------------------


def _launch_all(variant: str, workers: int):
    """Every kernel launched once (after ``od.precompile`` with ``workers`` processes, where given): the
    results, the kernels compiled in this process, and those its launches compiled."""
    import app as kernels

    x = np.arange(N, dtype=np.float64)
    outs = []
    if variant == "od-cpu":
        import overdub as od

        launches = [(getattr(kernels, f"k{j}"), (np.zeros(N), x)) for j in range(KERNELS)]
        if workers:
            od.precompile(launches, target="cpu", workers=None if workers == DECIDES else workers)
        precompiled = od.stats()["compiles"]
        for kernel, args in launches:
            od.cuda(kernel, *args, blocks=(N + 127) // 128, threads=128, target="cpu")
            outs.append(args[0])
        return outs, od.stats()["compiles"], od.stats()["compiles"] - precompiled
    if variant == "numba-cpu":
        for j in range(KERNELS):
            out = np.zeros(N)
            getattr(kernels, f"k{j}")(out, x)
            outs.append(out)
        return outs, None, None
    if variant == "od-cuda":
        import cupy

        import overdub as od

        dx = cupy.asarray(x)
        launches = [(getattr(kernels, f"k{j}"), (cupy.zeros(N), dx)) for j in range(KERNELS)]
        if workers:
            od.precompile(launches, target="cuda", workers=None if workers == DECIDES else workers)
        precompiled = od.stats()["compiles"]
        for kernel, args in launches:
            od.cuda(kernel, *args, blocks=(N + 127) // 128, threads=128, target="cuda")
            outs.append(args[0])
        return [o.get() for o in outs], od.stats()["compiles"], od.stats()["compiles"] - precompiled
    from numba import cuda

    dx = cuda.to_device(x)
    for j in range(KERNELS):
        out = cuda.device_array(N)
        getattr(kernels, f"k{j}")[(N + 127) // 128, 128](out, dx)
        outs.append(out)
    return [o.copy_to_host() for o in outs], None, None


def one_run(variant: str, edited: bool, workers: int = 0) -> dict:
    """Launch every kernel once (after ``od.precompile`` with ``workers`` processes, where given): the seconds
    from importing the program (its libraries are imported before) to the last result, the kernels compiled
    in this process and by its launches, the kernels whose result is not numpy's."""
    # the libraries' own import time is not the program's start (its kernels name numba-cuda's intrinsics), nor
    # is the making of the GPU's context: both are the same in every run, whatever a cache holds
    import numba.cuda

    if variant.startswith("od"):
        import overdub  # noqa: F401
    if variant == "od-cuda":
        import cupy

        cupy.zeros(1)
    elif variant == "numba-cuda":
        numba.cuda.current_context()
    t0 = time.perf_counter()
    outs, compiles, launch_compiles = _launch_all(variant, workers)
    seconds = time.perf_counter() - t0
    stale = [j for j, out in enumerate(outs) if not np.allclose(out, expected(j, edited))]
    return {"seconds": seconds, "compiles": compiles, "launch_compiles": launch_compiles, "wrong": stale}


# --- the part ---------------------------------------------------------------------------------------------


def _run_variant(variant: str, directory: Path, edited: bool, workers: int = 0, cache: str = "od-cache") -> dict:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(directory), os.environ.get("PYTHONPATH")])),
        OVERDUB_CACHE_DIR=str(directory / cache),
        NUMBA_CACHE_DIR=str(directory / "numba-cache"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("OVERDUB_CACHE", None)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--variant", variant, "--dir", str(directory)]
        + (["--edited"] if edited else [])
        + (["--precompile", str(workers)] if workers else []),
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{variant} run failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - t0
    return result


def _program_runs(part, variant: str) -> None:
    with tempfile.TemporaryDirectory(prefix=f"overdub-cache-{variant}-") as tmp:
        directory = Path(tmp)
        for name, source in program(variant).items():
            (directory / f"{name}.py").write_text(source)
        runs = {"cold": _run_variant(variant, directory, False), "warm": _run_variant(variant, directory, False)}
        if variant.startswith("od"):
            runs[PRECOMPILED] = _run_variant(variant, directory, False, WORKERS, "od-cache-precompiled")
            runs["warm after the precompile"] = _run_variant(variant, directory, False, cache="od-cache-precompiled")
            runs[DECIDED] = _run_variant(variant, directory, False, DECIDES, "od-cache-decided")
        dev1 = directory / "dev1.py"
        dev1.write_text(dev1.read_text().replace(*EDIT))
        runs["edited"] = _run_variant(variant, directory, True)
    for phase, run in runs.items():
        part.measure(
            f"{variant} {phase}: program import to last result",
            run["seconds"] * 1e3,
            "ms",
            process_ms=round(run["process_seconds"] * 1e3, 1),
            compiles=run["compiles"],
            launch_compiles=run["launch_compiles"],
            wrong=run["wrong"],
        )
    part.measure(f"{variant} cold/warm", runs["cold"]["seconds"] / runs["warm"]["seconds"], "x")
    if variant.startswith("od"):
        part.target(
            f"{variant} warm start at least 10x faster than cold",
            runs["cold"]["seconds"] / runs["warm"]["seconds"],
            ">=",
            10.0,
        )
        precompiled = runs[PRECOMPILED]
        part.measure(f"{variant} cold/cold with od.precompile", runs["cold"]["seconds"] / precompiled["seconds"], "x")
        decided = runs["cold"]["seconds"] / runs[DECIDED]["seconds"]
        part.measure(f"{variant} cold/cold with od.precompile choosing its workers", decided, "x")
        part.target(
            f"{variant} od.precompile choosing its workers never slower (cold/it, 10% noise)", decided, ">=", 0.9
        )
        part.target(
            f"{variant} after od.precompile its launches compile nothing", precompiled["launch_compiles"], "==", 0
        )
        part.target(
            f"{variant} a warm start after od.precompile compiles nothing",
            runs["warm after the precompile"]["compiles"],
            "==",
            0,
        )
        part.target(f"{variant} after the edit only k0 recompiles", runs["edited"]["compiles"], "==", 1)
        part.target(f"{variant} results after the edit are fresh", len(runs["edited"]["wrong"]), "==", 0)
    else:
        part.measure(f"{variant} kernels with a stale result after the edit", len(runs["edited"]["wrong"]), "")


def host_calls(part, quick: bool) -> None:
    """A host call with an already-seen combination of argument classes, in microseconds."""
    import overdub as od

    def multiply(x, y):
        return x * y

    area = od.GenericFunction("area")
    area.define(multiply, sig=(od.Float, od.Float))
    area.define(multiply, sig=(od.Integer, od.Integer))

    def plain(x, y):
        return x * y

    candidates = {"overdub": area, "plain Python function": plain}
    try:
        import plum

        dispatch = plum.Dispatcher()

        @dispatch
        def p_area(x: float, y: float):
            return x * y

        @dispatch
        def p_area(x: int, y: int):  # noqa: F811
            return x * y

        candidates["plum"] = p_area
    except ImportError:
        part.notes.append("plum is not installed: no plum figure")
    try:
        from multipledispatch import dispatch as md_dispatch

        @md_dispatch(float, float)
        def m_area(x, y):
            return x * y

        @md_dispatch(int, int)
        def m_area(x, y):  # noqa: F811
            return x * y

        candidates["multipledispatch"] = m_area
    except ImportError:
        part.notes.append("multipledispatch is not installed: no multipledispatch figure")
    number = 20_000 if quick else 200_000
    for name, fn in candidates.items():
        for args in ((1.0, 2.0), (1, 2)):
            fn(*args)
            best = min(timeit.repeat(lambda: fn(*args), number=number, repeat=7)) / number  # noqa: B023 -- timed at once
            empty = min(timeit.repeat(lambda: None, number=number, repeat=7)) / number
            part.measure(f"host call {name}{args}", (best - empty) * 1e6, "us")
    part.target("overdub host call (float, float)", part.value("host call overdub(1.0, 2.0)"), "<=", 0.5)


def run(part, quick: bool, gpu: bool, check_only: bool = False) -> None:
    part.config = {"kernels": KERNELS, "device_methods": 2 * KERNELS, "n": N, "precompile_workers": WORKERS}
    variants = ["od-cpu", "numba-cpu"] + (["od-cuda", "numba-cuda"] if gpu else [])
    if not gpu:
        part.notes.append(
            "no usable GPU: the CUDA variants (od.cuda on cupy arrays, numba-cuda cache=True) were not run"
        )
    for variant in variants:
        with part.guard(variant):
            _program_runs(part, variant)
    if not check_only:
        with part.guard("host calls"):
            host_calls(part, quick)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--edited", action="store_true")
    ap.add_argument("--precompile", type=int, default=0, metavar="WORKERS", help=f"{DECIDES}: od.precompile decides")
    args = ap.parse_args()
    sys.path.insert(0, args.dir)
    import warnings

    warnings.filterwarnings("ignore", module="numba")
    print(json.dumps(one_run(args.variant, args.edited, args.precompile)))
