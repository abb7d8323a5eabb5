"""Part 5: the CPU target (od.cuda(..., target="cpu")) against hand-written numba.njit loops and numba's CUDA
simulator. Needs no GPU.

Single-core comparisons (saxpy, stencil, a sum by atomics) run the CPU target on one worker thread; the
speed-up from parallel blocks runs a compute-bound kernel on one worker and on every core; the shared-memory
reduction and tiled matmul run against numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) in a subprocess
with a small size and a time limit; the first compile of a small kernel is compared with ``njit``'s of the
same loop, both warmed up by an earlier compile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from _common import Part, check_close, fresh_module, ratio
from kernels import REDUCE_NUMBA, REDUCE_THREADS, SAXPY_NUMBA, SAXPY_OD, STENCIL, STENCIL_THREADS, stencil_reference

SAXPY_THREADS = 256
TPB = 16

ATOMIC_SUM = """
def atomic_sum(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])

def serial_sum(x):
    s = 0
    for i in range(x.size):
        s += x[i]
    return s
"""

MATMUL = """
def matmul(A, B, C):
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=numba.float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=numba.float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tmp = numba.float32(0.)
    for i in range(cuda.gridDim.x):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp
"""

COMPUTE = """
def compute(x, y):
    i = cuda.grid(1)
    if i < x.size:
        s = 0.0
        for k in range(64):
            s += math.sin(x[i] * k)
        y[i] = s

def compute_loop(x, y):                 # numba's own parallel loop: njit(parallel=True), and njit for one core
    for i in numba.prange(x.size):
        s = 0.0
        for k in range(64):
            s += math.sin(x[i] * k)
        y[i] = s
"""

MIRROR = """
def mirror(a, out):                     # each thread stores its element in shared memory, syncs, reads its mirror's
    s = cuda.shared.array(256, numba.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = a[i]
    cuda.syncthreads()
    out[i] = s[cuda.blockDim.x - 1 - t]

def mirror_loop(a, out):                # the same, read directly: njit(parallel=True)
    for i in numba.prange(a.size):
        out[i] = a[i - i % 256 + 255 - i % 256]
"""

SMALL = """
def small(a, x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]

def small_loop(a, x, y):
    for i in range(x.size):
        y[i] = a * x[i] + y[i]
"""

# run by the simulator's subprocess: the reduction and the matmul, timed after a first (warming) call
_SIMULATOR_SCRIPT = """
import json, sys, time
import numpy as np
import numba, math
from numba import cuda
TPB = {tpb}
exec({reduce!r})
exec({matmul!r})
reduce_kernel, matmul_kernel = cuda.jit(reduce), cuda.jit(matmul)
n, m = {reduce_n}, {matmul_n}
a = np.random.default_rng(0).random(n, dtype=np.float32)
out = np.zeros(n // {threads}, np.float32)
A = np.ones((m, m), np.float32); B = np.ones((m, m), np.float32); C = np.zeros((m, m), np.float32)
times = {{}}
for name, run in (("reduce", lambda: reduce_kernel[n // {threads}, {threads}](a, out)),
                  ("matmul", lambda: matmul_kernel[(m // TPB, m // TPB), (TPB, TPB)](A, B, C))):
    t0 = time.perf_counter(); run(); times[name] = time.perf_counter() - t0
print(json.dumps(times))
"""


def settings(quick: bool) -> dict:
    return {
        "saxpy_n": 2**20 if quick else 2**24,
        "stencil_n": 512 if quick else 2048,
        "atomic_n": 2**20 if quick else 2**24,
        "compute_n": 2**18 if quick else 2**21,
        "sim_reduce_n": 4 * REDUCE_THREADS,
        "sim_matmul_n": 2 * TPB,
        "sim_timeout_s": 300,
        "repeats": 5 if quick else 20,
    }


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _best_interleaved(first, second, repeats: int) -> tuple[float, float]:
    """Best-of times of two functions run alternately, so that a drift of the machine's speed (another job,
    the memory's state) weighs on both alike."""
    best = [float("inf"), float("inf")]
    for _ in range(repeats):
        for k, fn in enumerate((first, second)):
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best[0], best[1]


def _compare(
    part: Part,
    name: str,
    run_od,
    run_nb,
    fresh_out,
    expected,
    cfg: dict,
    check_only: bool,
    n: int,
    target: float = 1.10,
    **tolerance,
):
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
    t_od, t_nb = _best_interleaved(lambda: run_od(out), lambda: run_nb(out), cfg["repeats"])
    part.measure(f"{name} [od cpu]", t_od * 1e3, "ms", n=n)
    part.measure(f"{name} [njit]", t_nb * 1e3, "ms", n=n)
    part.measure(f"{name} ratio od/njit", ratio(t_od, t_nb), "x")
    part.target(f"{name} od/njit", ratio(t_od, t_nb), "<=", target)
    return t_nb


def run(part: Part, quick: bool, check_only: bool = False) -> None:
    import numba

    import overdub as od
    from overdub.targets import cpu as cpu_target

    cfg = settings(quick)
    if check_only:
        cfg.update(saxpy_n=4099, stencil_n=67, atomic_n=4099, compute_n=4099, repeats=1)
    all_workers = cpu_target.TARGET.workers
    cpu_target.TARGET.workers = 1  # single-core comparisons first
    try:
        _single_core(part, cfg, check_only, od, numba)
        with part.guard("simulator"):
            _simulator(part, cfg, check_only, od)
        if not check_only:
            with part.guard("compile"):
                _compile(part, od, numba)
    finally:
        cpu_target.TARGET.workers = all_workers
    _parallel(part, cfg, check_only, od, cpu_target)


def _single_core(part: Part, cfg: dict, check_only: bool, od, numba) -> None:
    part.config.update(
        cfg,
        saxpy_threads=SAXPY_THREADS,
        stencil_threads=STENCIL_THREADS,
        numba_threads=numba.get_num_threads(),
        cpu_count=os.cpu_count(),
    )
    part.notes.append(
        "saxpy, stencil and the sum by atomics: both sides single-threaded compiled loops "
        "(OVERDUB_CPU_THREADS=1 for overdub; no parallel=True); best-of-N wall time, the two sides "
        "run alternately; the overdub kernel is launched over blocks x threads covering the data, "
        "each thread bounds-checked, the numba side is a plain njit loop."
    )

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
                od.cuda(odm.saxpy_exact, a, x, y, threads=SAXPY_THREADS, blocks=blocks, target="cpu", context=odm.bench)

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

        _compare(
            part,
            "stencil",
            od_stencil,
            nb_stencil,
            lambda: np.zeros_like(a),
            stencil_reference(a, np),
            cfg,
            check_only,
            n,
            rtol=1e-5,
            atol=1e-5,
        )

    # --- a sum by atomics --------------------------------------------------------------------------------
    with part.guard("atomic sum"):
        n = cfg["atomic_n"]
        m = fresh_module("cpu_atomic_sum", ATOMIC_SUM)
        serial = numba.njit(m.serial_sum)
        x = np.random.default_rng(2).integers(0, 1000, n)
        blocks = -(-n // SAXPY_THREADS)

        def od_sum(out):
            out[0] = 0
            od.cuda(m.atomic_sum, x, out, threads=SAXPY_THREADS, blocks=blocks, target="cpu")

        def nb_sum(out):
            out[0] = serial(x)

        _compare(
            part,
            "sum by atomics",
            od_sum,
            nb_sum,
            lambda: np.zeros(1, np.int64),
            np.array([x.sum()]),
            cfg,
            check_only,
            n,
            target=1.5,
        )


def _simulator(part: Part, cfg: dict, check_only: bool, od) -> None:
    """The shared-memory reduction and the tiled matmul on the CPU target, and on numba's CUDA simulator (in a
    subprocess, small sizes, a time limit): the simulator's time over overdub's."""
    n, mm = cfg["sim_reduce_n"], cfg["sim_matmul_n"]
    reduce_module = fresh_module("cpu_reduce", REDUCE_NUMBA)
    matmul_module = fresh_module("cpu_matmul", MATMUL, TPB=TPB)
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    out = np.zeros(n // REDUCE_THREADS, np.float32)
    A, B = np.ones((mm, mm), np.float32), np.ones((mm, mm), np.float32)
    C = np.zeros((mm, mm), np.float32)
    runs = {
        "reduce": lambda: od.cuda(
            reduce_module.reduce, a, out, blocks=n // REDUCE_THREADS, threads=REDUCE_THREADS, target="cpu"
        ),
        "matmul": lambda: od.cuda(
            matmul_module.matmul, A, B, C, blocks=(mm // TPB, mm // TPB), threads=(TPB, TPB), target="cpu"
        ),
    }
    for run in runs.values():
        run()
    part.check(
        "shared-memory reduction [od cpu] == numpy",
        lambda: check_close("reduce", out, a.reshape(-1, REDUCE_THREADS).sum(axis=1), rtol=1e-5, atol=1e-5),
    )
    part.check("tiled matmul [od cpu] == numpy", lambda: check_close("matmul", C, A @ B))
    if check_only:
        return
    od_times = {name: _best(run, cfg["repeats"]) for name, run in runs.items()}
    sim = _simulator_times(cfg)
    for name, label in (("reduce", "shared-memory reduction"), ("matmul", "tiled matmul")):
        part.measure(f"{label} [od cpu]", od_times[name] * 1e3, "ms", n=n if name == "reduce" else mm)
        if name in sim:
            part.measure(f"{label} [cuda simulator]", sim[name] * 1e3, "ms")
            part.measure(f"{label} ratio simulator/od", ratio(sim[name], od_times[name]), "x")
            part.target(f"{label} simulator/od", ratio(sim[name], od_times[name]), ">=", 100)


def _simulator_times(cfg: dict) -> dict:
    script = _SIMULATOR_SCRIPT.format(
        tpb=TPB,
        reduce=REDUCE_NUMBA,
        matmul=MATMUL,
        reduce_n=cfg["sim_reduce_n"],
        matmul_n=cfg["sim_matmul_n"],
        threads=REDUCE_THREADS,
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=cfg["sim_timeout_s"]
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError):
        return {}


def _compile(part: Part, od, numba) -> None:
    """The first compile of a small kernel: overdub's (rewrite, typing, the grid loop) against njit's of the
    same loop. Both compilers are warmed up by compiling another module's copy first."""
    x, y = np.ones(64, np.float32), np.ones(64, np.float32)
    times = {"od": [], "njit": []}
    for round_ in range(10):
        m = fresh_module("cpu_small", SMALL)
        t0 = time.perf_counter()
        od.cuda(m.small, np.float32(2), x, y, blocks=1, threads=64, target="cpu")
        t_od = time.perf_counter() - t0
        t0 = time.perf_counter()
        numba.njit(m.small_loop)(np.float32(2), x, y)
        t_nb = time.perf_counter() - t0
        if round_:  # round 0 warms both compilers up
            times["od"].append(t_od)
            times["njit"].append(t_nb)
    t_od, t_nb = min(times["od"]), min(times["njit"])
    part.measure("first compile of a small kernel [od cpu]", t_od * 1e3, "ms")
    part.measure("first compile of a small kernel [njit]", t_nb * 1e3, "ms")
    part.measure("first compile ratio od/njit", ratio(t_od, t_nb), "x")
    part.target("first compile od/njit", ratio(t_od, t_nb), "<=", 1.2)


def _parallel(part: Part, cfg: dict, check_only: bool, od, cpu_target) -> None:
    """A compute-bound kernel on one worker and on every worker: the speed-up from parallel blocks, next to
    numba's njit(parallel=True) of the same loop."""
    import numba

    with part.guard("parallel blocks"):
        n = cfg["compute_n"]
        m = fresh_module("cpu_compute", COMPUTE)
        x = np.random.default_rng(3).random(n)
        y = np.zeros_like(x)
        blocks = -(-n // SAXPY_THREADS)

        def run():
            od.cuda(m.compute, x, y, threads=SAXPY_THREADS, blocks=blocks, target="cpu")

        run()
        expected = np.sin(x[:, None] * np.arange(64)).sum(axis=1)
        if not part.check("compute [od cpu] == numpy", lambda: check_close("compute", y, expected, rtol=1e-9)):
            return
        if check_only:
            return
        workers = cpu_target.TARGET.workers

        def run_on(count):
            cpu_target.TARGET.workers = count
            try:
                run()
            finally:
                cpu_target.TARGET.workers = workers

        t_one, t_all = _best_interleaved(lambda: run_on(1), lambda: run_on(workers), cfg["repeats"])
        cpu0, wall0 = time.process_time(), time.perf_counter()
        run()
        busy = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        part.measure("compute [od cpu, 1 worker]", t_one * 1e3, "ms", n=n)
        part.measure(
            "cores busy during a parallel run (process CPU time / wall time)",
            busy,
            "x",
            load_average=os.getloadavg()[0],
        )
        part.measure(f"compute [od cpu, {workers} workers]", t_all * 1e3, "ms", n=n)
        part.measure("speed-up from parallel blocks", ratio(t_one, t_all), "x", workers=workers)
        part.target(f"parallel speed-up >= 0.7 x {workers} workers", ratio(t_one, t_all), ">=", 0.7 * workers)
        # what this machine gives any parallel loop: numba's prange on every core against its serial loop
        serial, parallel = numba.njit(m.compute_loop), numba.njit(m.compute_loop, parallel=True)
        serial(x, y), parallel(x, y)
        t_serial, t_parallel = _best_interleaved(lambda: serial(x, y), lambda: parallel(x, y), cfg["repeats"])
        part.measure("compute [njit]", t_serial * 1e3, "ms", n=n)
        part.measure(f"compute [njit(parallel=True), {numba.get_num_threads()} threads]", t_parallel * 1e3, "ms", n=n)
        part.measure("speed-up of njit(parallel=True) over njit (the machine's)", ratio(t_serial, t_parallel), "x")
        part.measure("overdub on every worker / njit(parallel=True)", ratio(t_all, t_parallel), "x")
    _launch_cost(part, check_only, od)
    _barrier_launch_cost(part, check_only, od)


LAUNCHES = 10_000


def _launch_cost(part: Part, check_only: bool, od) -> None:
    """The fixed cost of a launch: 10,000 launches of a 1,024-thread kernel (4 blocks of 256) on every worker,
    against numba's njit(parallel=True) of the same loop called as often (issue 36 item 3: at most 1.5x)."""
    import numba

    with part.guard("launch cost"):
        m = fresh_module("cpu_launch_cost", SMALL)
        x, y = np.ones(1024, dtype=np.float32), np.zeros(1024, dtype=np.float32)
        a = np.float32(2)
        prange_source = "def loop(a, x, y):\n    for i in numba.prange(x.size):\n        y[i] = a * x[i] + y[i]\n"
        loop = fresh_module("cpu_launch_cost_loop", prange_source).loop
        parallel = numba.njit(loop, parallel=True)
        od.cuda(m.small, a, x, y, blocks=4, threads=256, target="cpu")
        parallel(a, x, y)
        if not part.check(
            "launch-cost kernel [od cpu] == njit", lambda: check_close("small", y, 2 * 2.0 * np.ones(1024))
        ):
            return
        if check_only:
            return

        _launch_rows(part, od, m.small, (a, x, y), parallel, (a, x, y), "launch cost", "[od cpu, every worker]", "")


def _barrier_launch_cost(part: Part, check_only: bool, od) -> None:
    """The fixed cost of a launch where the kernel synchronizes: 10,000 launches of a 1,024-thread kernel with a
    ``cuda.syncthreads()`` (4 blocks of 256; its threads run as block regions) against njit(parallel=True) of the
    same loop (issue 36 item 3, "also where they use a barrier": at most 1.5x)."""
    import numba

    with part.guard("barrier launch cost"):
        m = fresh_module("cpu_barrier_launch_cost", MIRROR)
        a = np.arange(1024, dtype=np.float32)
        out, expected = np.zeros_like(a), np.zeros_like(a)
        parallel = numba.njit(m.mirror_loop, parallel=True)
        od.cuda(m.mirror, a, out, blocks=4, threads=256, target="cpu")
        parallel(a, expected)
        if not part.check("barrier kernel [od cpu] == njit", lambda: check_close("mirror", out, expected)):
            return
        if check_only:
            return

        rows = ("barrier launch cost", "with a barrier [od cpu]", " (barrier row)")
        _launch_rows(part, od, m.mirror, (a, out), parallel, (a, expected), *rows)


def _launch_rows(part: Part, od, kernel, args, parallel, loop_args, name: str, what: str, row: str) -> None:
    """LAUNCHES launches of ``kernel`` (4 blocks of 256) against as many calls of ``parallel``, interleaved, best of
    3: both per call, their ratio, and issue 36 item 3's target (at most 1.5x)."""

    def od_launches():
        for _ in range(LAUNCHES):
            od.cuda(kernel, *args, blocks=4, threads=256, target="cpu")

    def nb_calls():
        for _ in range(LAUNCHES):
            parallel(*loop_args)

    t_od, t_nb = _best_interleaved(od_launches, nb_calls, 3)
    part.measure(f"10,000 launches of a 1,024-thread kernel {what}", t_od / LAUNCHES * 1e6, "us")
    part.measure(f"10,000 calls of the same loop [njit(parallel=True)]{row}", t_nb / LAUNCHES * 1e6, "us")
    part.measure(f"{name} ratio od/njit(parallel=True)", ratio(t_od, t_nb), "x")
    part.target(f"{name} od/njit(parallel=True)", ratio(t_od, t_nb), "<=", 1.5)
