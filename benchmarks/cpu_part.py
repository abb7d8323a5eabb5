"""Part 5: the CPU target (od.cuda(..., target="cpu")) against hand-written numba.njit loops. Needs no GPU."""
from __future__ import annotations

import time

import numpy as np

from _common import Part, check_close, fresh_module, ratio
from kernels import SAXPY_NUMBA, SAXPY_OD, STENCIL, STENCIL_THREADS, stencil_reference

SAXPY_THREADS = 256


def settings(quick: bool) -> dict:
    return {"saxpy_n": 2**20 if quick else 2**24, "stencil_n": 512 if quick else 2048,
            "repeats": 5 if quick else 10}


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _compare(part: Part, name: str, run_od, run_nb, fresh_out, expected, cfg: dict, check_only: bool,
             n: int, **tolerance):
    """Each side's first (compiling) call, timed and checked against ``expected``; then, when both are right
    and timing is wanted, the best-of times, their ratio and its target. Returns njit's time, or None."""
    ok = True
    for side, run in (("od", run_od), ("njit", run_nb)):
        out = fresh_out()
        t0 = time.perf_counter()
        run(out)
        part.measure(f"{name} first call (compile) [{side}]", time.perf_counter() - t0, "s")
        ok &= part.check(f"{name} [{side}] == numpy", lambda out=out: check_close(name, out, expected, **tolerance))
    if not ok or check_only:
        return None
    out = fresh_out()
    t_od = _best(lambda: run_od(out), cfg["repeats"])
    t_nb = _best(lambda: run_nb(out), cfg["repeats"])
    part.measure(f"{name} [od cpu]", t_od * 1e3, "ms", n=n)
    part.measure(f"{name} [njit]", t_nb * 1e3, "ms", n=n)
    part.measure(f"{name} ratio od/njit", ratio(t_od, t_nb), "x")
    part.target(f"{name} od/njit", ratio(t_od, t_nb), "<=", 1.10)
    return t_nb


def run(part: Part, quick: bool, check_only: bool = False) -> None:
    import numba

    import overdub as od

    cfg = settings(quick)
    if check_only:
        cfg.update(saxpy_n=4099, stencil_n=67, repeats=1)
    part.config.update(cfg, saxpy_threads=SAXPY_THREADS, stencil_threads=STENCIL_THREADS,
                       numba_threads=numba.get_num_threads())
    part.notes.append("Both sides are single-threaded compiled loops (no parallel=True); best-of-N wall time; "
                      "the overdub kernel is launched over blocks x threads covering the data, each thread "
                      "bounds-checked, the numba side is a plain njit loop.")

    # --- saxpy -------------------------------------------------------------------------------------------
    with part.guard("saxpy"):
        n = cfg["saxpy_n"]
        odm = fresh_module("cpu_saxpy_od", SAXPY_OD)
        nbm = fresh_module("cpu_saxpy_nb", SAXPY_NUMBA)
        loop = numba.njit(nbm.saxpy_loop)
        rng = np.random.default_rng(0)
        x = rng.random(n, dtype=np.float32)
        y0 = rng.random(n, dtype=np.float32)
        a = np.float32(0.75)
        blocks = -(-n // SAXPY_THREADS)

        def od_saxpy(y):
            od.cuda(odm.saxpy, a, x, y, threads=SAXPY_THREADS, blocks=blocks, target="cpu", context=odm.bench)

        def nb_saxpy(y):
            loop(a, x, y)

        t_nb = _compare(part, "saxpy", od_saxpy, nb_saxpy, y0.copy, a * x + y0, cfg, check_only, n)
        if t_nb is not None and n % SAXPY_THREADS == 0:
            # what the per-thread bounds check costs: the same kernel without it
            def od_exact(y):
                od.cuda(odm.saxpy_exact, a, x, y, threads=SAXPY_THREADS, blocks=blocks, target="cpu",
                        context=odm.bench)
            y = y0.copy()
            od_exact(y)
            t_exact = _best(lambda: od_exact(y), cfg["repeats"])
            part.measure("saxpy without the bounds check [od cpu]", t_exact * 1e3, "ms", n=n)
            part.measure("saxpy without the bounds check, ratio od/njit", ratio(t_exact, t_nb), "x")

    # --- stencil -----------------------------------------------------------------------------------------
    with part.guard("stencil"):
        n = cfg["stencil_n"]
        m = fresh_module("cpu_stencil", STENCIL)
        loop = numba.njit(m.stencil_loop)
        a = np.random.default_rng(1).random((n, n), dtype=np.float32)
        tx, ty = STENCIL_THREADS
        blocks = (-(-n // tx), -(-n // ty))

        def od_stencil(b):
            od.cuda(m.stencil, a, b, threads=STENCIL_THREADS, blocks=blocks, target="cpu")

        def nb_stencil(b):
            loop(a, b)

        _compare(part, "stencil", od_stencil, nb_stencil, lambda: np.zeros_like(a), stencil_reference(a, np), cfg,
                 check_only, n, rtol=1e-5, atol=1e-5)
