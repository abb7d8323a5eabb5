"""Part 6: memory kept per re-run of a notebook cell. Needs no GPU.

A notebook user re-runs the same cell many times: it defines a device function and a kernel that calls it and
compiles (or launches) the kernel. Each re-run makes new function objects; everything compiled for the old ones
is garbage. This part measures what stays behind per re-run -- overdub against numba doing the same thing --
because a compiler cache that keeps every superseded version grows without bound in a long session.

Each variant runs in a fresh subprocess (no shared caches), as

    python benchmarks/memory_part.py --variant od-cpu --reruns 1000 [--warmup 20] [--tracemalloc]

which re-runs the cell ``warmup`` times, collects garbage, re-runs it ``reruns`` times, collects garbage again
and prints one JSON line: the change in RSS (/proc/self/statm; sees LLVM's native memory too), the wall time
per re-run and, with --tracemalloc, the change in the size traced by tracemalloc (Python objects only; it slows
every allocation, so it is measured in a separate, shorter pass) with the allocation sites that grew most.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import types as pytypes
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CC = (9, 0)
KiB = 1024.0

OD_CELL = """
@od.function
def f(x):
    return x + 1

def kernel(out):
    out[0] = f(out[0])
"""
NJIT_CELL = """
@numba.njit
def f(x):
    return x + 1

@numba.njit
def kernel(out):
    out[0] = f(out[0])
"""
CUDA_CELL = """
@cuda.jit(device=True)
def f(x):
    return x + 1

def kernel(out):
    out[0] = f(out[0])
"""
# variant: (label, cell source, what re-running it does after exec'ing it, pair it is compared with)
VARIANTS = {
    "od-cpu": ("(a) overdub od.cuda(..., target='cpu')", OD_CELL, "launch", "njit"),
    "od-ptx": ("(b) overdub od.code_ptx", OD_CELL, "ptx", "cuda-ptx"),
    "njit": ("(c) numba.njit", NJIT_CELL, "call", None),
    "cuda-ptx": ("(d) numba-cuda cuda.compile_ptx", CUDA_CELL, "compile_ptx", None),
}


def settings(quick: bool, check_only: bool = False) -> dict:
    if check_only:
        return {"warmup": 2, "reruns": 3, "tracemalloc_reruns": 3}
    return {"warmup": 20, "reruns": 200 if quick else 1000, "tracemalloc_reruns": 50 if quick else 200}


# --- the child: one variant in its own process -------------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _no_gpu_device_stub() -> None:
    """numba-cuda compiles a ``cuda.jit(device=True)`` callee for the current device's compute capability,
    which needs the driver. Without a GPU, report cc 9.0 (the PTX target) instead; the rest is numba-cuda's."""
    from numba import cuda

    if not cuda.is_available():
        from numba.cuda import dispatcher

        dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=CC)


def make_cell(variant: str):
    """Return ``rerun()``, which executes the variant's cell source in one module namespace (as a notebook
    does) and compiles/launches its kernel, and ``check(runs)``, which checks the outcome after ``runs``."""
    import numba
    import numpy as np
    from numba import cuda

    import overdub as od

    _, source, action, _ = VARIANTS[variant]
    if action == "compile_ptx":
        _no_gpu_device_stub()
    ns = pytypes.ModuleType("notebook_cell")
    sys.modules[ns.__name__] = ns
    ns.__dict__.update(od=od, numba=numba, cuda=cuda)
    code = compile(source, "<cell>", "exec")
    arr = np.zeros(1, np.int64)
    argtype = numba.types.int64[::1]
    last = {}

    def rerun():
        exec(code, ns.__dict__)
        if action == "launch":
            od.cuda(ns.kernel, arr, target="cpu")
        elif action == "call":
            ns.kernel(arr)
        elif action == "ptx":
            last["ptx"] = od.code_ptx(ns.kernel, argtype, cc=CC)
        else:
            last["ptx"] = cuda.compile_ptx(ns.kernel, (argtype,), cc=CC)[0]

    def check(runs: int):
        if action in ("launch", "call"):
            assert arr[0] == runs, f"out[0] is {arr[0]} after {runs} runs"
        else:
            assert "add.s64" in last["ptx"] and ".entry" in last["ptx"], "PTX has no add.s64 or no .entry"

    return rerun, check


def _short(filename: str) -> str:
    """A source file's name relative to site-packages or to the checkout."""
    for root in ("site-packages/", str(ROOT) + "/"):
        if root in filename:
            return filename.split(root, 1)[1]
    return filename


def child(variant: str, warmup: int, reruns: int, trace: bool) -> dict:
    import warnings

    warnings.filterwarnings("ignore", module="numba")
    rerun, check = make_cell(variant)
    if trace:
        import tracemalloc

        tracemalloc.start()
    for _ in range(warmup):
        rerun()
    gc.collect()
    rss0 = _rss()
    if trace:
        traced0, snap0 = tracemalloc.get_traced_memory()[0], tracemalloc.take_snapshot()
    times = []
    for _ in range(reruns):
        t0 = time.perf_counter()
        rerun()
        times.append(time.perf_counter() - t0)
    gc.collect()
    tenth = max(1, reruns // 10)
    out = {
        "variant": variant,
        "warmup": warmup,
        "reruns": reruns,
        "seconds_per_rerun": sum(times) / reruns,
        "seconds_first_tenth": sum(times[:tenth]) / tenth,
        "seconds_last_tenth": sum(times[-tenth:]) / tenth,
        "rss_per_rerun": (_rss() - rss0) / reruns,
        "rss_end": _rss(),
    }
    if trace:
        out["traced_per_rerun"] = (tracemalloc.get_traced_memory()[0] - traced0) / reruns
        top = tracemalloc.take_snapshot().compare_to(snap0, "lineno")[:3]
        out["top_sites"] = [
            f"{_short(s.traceback[0].filename)}:{s.traceback[0].lineno} {s.size_diff / reruns / KiB:+.1f} KiB"
            for s in top
        ]
    check(warmup + reruns)
    return out


# --- the parent: the part ----------------------------------------------------------------------------------


def measure(variant: str, warmup: int, reruns: int, trace: bool = False, timeout: float = 3600) -> dict:
    """Run one variant in a fresh interpreter; its JSON result (raises on failure)."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--variant",
        variant,
        "--warmup",
        str(warmup),
        "--reruns",
        str(reruns),
    ] + (["--tracemalloc"] if trace else [])
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(part, quick: bool, check_only: bool = False) -> None:
    from _common import ratio

    cfg = settings(quick, check_only)
    part.config.update(cfg, cc=CC, variants={k: v[0] for k, v in VARIANTS.items()})
    part.notes.append(
        "Each variant in a fresh process: warm-up re-runs, gc.collect(), N re-runs, gc.collect(). "
        "RSS and wall time from one pass of N re-runs; tracemalloc (Python objects only) from a "
        "separate, shorter pass, since tracing slows every allocation. KiB = 1024 bytes."
    )
    part.notes.append(
        "(d) without a GPU: numba-cuda's device-function dispatcher asks the driver for the "
        "current device's compute capability; the child replaces that one lookup with cc 9.0, "
        "the rest is numba-cuda's own path."
    )
    got = {}
    for key, (label, *_rest) in VARIANTS.items():
        with part.guard(label):
            if check_only:
                part.check(
                    f"{label} re-run {cfg['reruns']}x", lambda key=key: measure(key, cfg["warmup"], cfg["reruns"])
                )
                continue
            r = measure(key, cfg["warmup"], cfg["reruns"])
            t = measure(key, cfg["warmup"], cfg["tracemalloc_reruns"], trace=True)
            part.checks.append({"name": f"{label} result after every re-run", "ok": True})
            got[key] = {"rss": r["rss_per_rerun"] / KiB, "traced": t["traced_per_rerun"] / KiB}
            part.measure(
                f"{label} RSS growth",
                got[key]["rss"],
                "KiB/re-run",
                reruns=cfg["reruns"],
                rss_end_mib=round(r["rss_end"] / 2**20, 1),
            )
            part.measure(
                f"{label} Python objects kept (tracemalloc)",
                got[key]["traced"],
                "KiB/re-run",
                reruns=cfg["tracemalloc_reruns"],
                top=" ; ".join(t["top_sites"]),
            )
            part.measure(
                f"{label} wall time",
                r["seconds_per_rerun"] * 1e3,
                "ms/re-run",
                first_tenth_ms=r["seconds_first_tenth"] * 1e3,
                last_tenth_ms=r["seconds_last_tenth"] * 1e3,
            )
    for od_key, (label, _, _, nb_key) in VARIANTS.items():
        if nb_key is None or od_key not in got or nb_key not in got:
            continue
        pair = f"{label.split()[0]}/{VARIANTS[nb_key][0].split()[0]}"
        for what, name in (("rss", "RSS growth"), ("traced", "Python objects kept")):
            added = got[od_key][what] - got[nb_key][what]
            part.measure(f"{pair} {name}, overdub - numba", added, "KiB/re-run")
            part.measure(f"{pair} {name} per re-run, overdub/numba", ratio(got[od_key][what], got[nb_key][what]), "x")
            # the goal: overdub adds no more than numba itself keeps
            part.target(
                f"{pair} {name}: what overdub adds / what numba keeps", ratio(added, got[nb_key][what]), "<=", 1.0
            )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    ap.add_argument("--reruns", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--tracemalloc", action="store_true", help="also measure the Python objects kept (slower)")
    args = ap.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # the checkout's overdub, when it is not installed
    print(json.dumps(child(args.variant, args.warmup, args.reruns, args.tracemalloc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
