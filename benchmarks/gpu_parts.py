"""Parts 1-4: need a usable GPU, cupy and cuda.core.

Every overdub launch here passes ``target="cuda"``. Correctness is checked before anything is timed; a case
whose check fails is recorded as failed and not timed.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

import graph_part
import kernels as K
import launch_floor
from _common import CheckFailed, Part, check_close, fresh_module, median, ratio


def settings(quick: bool) -> dict:
    return {
        "launch_n": 3000 if quick else 20000,
        "launch_repeats": 3 if quick else 7,
        "launch_rounds": 5 if quick else 9,
        "launch_batch": 256,
        "launch_warmup": 200,
        "edges": [1, 10, 100, 1000],
        "saxpy_n": 2**24 if quick else 2**28,
        "reduce_n": 2**24 if quick else 2**28,
        "stencil_n": 1024 if quick else 4096,
        "event_runs": 10 if quick else 20,
        "event_warmup": 3,
        "recompile_repeats": 2 if quick else 3,
    }


def check_settings() -> dict:
    """--check: tiny sizes, correctness only."""
    cfg = settings(True)
    cfg.update(
        launch_n=10,
        launch_repeats=1,
        launch_rounds=1,
        launch_warmup=2,
        saxpy_n=100_003,
        reduce_n=256 * 37 + 5,
        stencil_n=131,
        event_runs=1,
        event_warmup=1,
        recompile_repeats=1,
    )
    return cfg


# --- shared GPU helpers ---------------------------------------------------------------------------------


class GPU:
    """cupy, cuda.core and numba-cuda set up once for the whole run."""

    def __init__(self):
        import cupy as cp
        from cuda.core import Device
        from numba import cuda as nbcuda
        from numba.core import config as nbconfig

        # numba-cuda warns (and builds a warning) on every launch of a grid under 128 blocks, and on every
        # launch given a host record (which it copies to the device); the launch overhead part launches 1
        # block, and passes a record in 1d, so turn both checks off: it only makes numba-cuda faster.
        nbconfig.CUDA_LOW_OCCUPANCY_WARNINGS = 0
        nbconfig.CUDA_WARN_ON_IMPLICIT_COPY = 0
        self.cp, self.nbcuda = cp, nbcuda
        self.device = Device()
        self.device.set_current()
        cc = self.device.compute_capability
        self.cc = (int(cc[0]), int(cc[1]))
        self.arch = f"sm_{self.cc[0]}{self.cc[1]}"
        self.name = getattr(self.device, "name", "?")
        self.sm_count = cp.cuda.Device().attributes["MultiProcessorCount"]
        self._spin = None

    def sync(self):
        self.cp.cuda.runtime.deviceSynchronize()

    def core_code(self, source: str):
        """``source`` compiled by cuda.core to a cubin for this device (its kernels: ``.get_kernel(name)``)."""
        from cuda.core import Program, ProgramOptions

        program = Program(source, code_type="c++", options=ProgramOptions(arch=self.arch))
        return program.compile("cubin")

    # -- event timing -----------------------------------------------------------------------------------
    def spin(self, stream, ms: float = 2.0):
        """Enqueue a kernel that keeps the GPU busy for about ``ms`` on ``stream``."""
        cp = self.cp
        if self._spin is None:
            self._spin = cp.RawKernel(K.SPIN_C, "spin")
        with stream:
            self._spin((1,), (1,), (np.int64(ms * 1e6),))

    def device_ms(self, stream, enqueue) -> float:
        """Device time of what ``enqueue()`` puts on ``stream``, by CUDA events. A spin kernel keeps the GPU
        busy while the host enqueues, so the host's launch latency is not inside the interval."""
        cp = self.cp
        start, end = cp.cuda.Event(), cp.cuda.Event()
        self.spin(stream)
        start.record(stream)
        enqueue()
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end)


def gpu_check_close(cp, name, got, expected, rtol=1e-5, atol=1e-6):
    if got.shape != expected.shape:
        raise CheckFailed(f"{name}: shape {got.shape} != {expected.shape}")
    close = cp.isclose(got, expected, rtol=rtol, atol=atol)
    if not bool(close.all()):
        bad = cp.argwhere(~close)
        first = tuple(int(i) for i in bad[0].get())
        raise CheckFailed(
            f"{name}: {int(bad.shape[0])} of {got.size} elements wrong; first at {first}: "
            f"got {float(got[first])!r}, expected {float(expected[first])!r}"
        )


def _pattern(cp, n: int, period: int):
    """n float32 values in [0, 1): (i % period) / period."""
    values = (cp.arange(n, dtype=cp.int64) % period).astype(cp.float32)
    values /= cp.float32(period)
    return values


def _time_host_loop(gpu: GPU, loop, n: int) -> float:
    """Seconds per launch of ``loop(n)`` (n enqueues, then one synchronize)."""
    gpu.sync()
    t0 = time.perf_counter()
    loop(n)
    gpu.sync()
    return (time.perf_counter() - t0) / n


# --- part 1: launch overhead ----------------------------------------------------------------------------

LAUNCH_CASES = {  # case -> (kernel, what it takes)
    "a": ("k0", "no arguments"),
    "b": ("k1", "1 array + 1 scalar"),
    "c": ("k8", "8 arrays + 4 scalars"),
    "d": ("kstruct", "a struct"),
    "e": ("krecords", "a record array"),
}


@dataclasses.dataclass(frozen=True)
class LaunchArgument:
    """One argument of part 1's kernels, in the form each launcher takes it (``core`` None: cuda.core cannot)."""

    overdub: object
    numba: object
    cupy: object
    core: object
    floor: bytes  # the parameter's bytes, as the CUDA C kernel takes it


def _launch_arguments(gpu: GPU, particle) -> dict[str, list[LaunchArgument]]:
    """Part 1's arguments by kind (``kernels.LAUNCH_KERNELS``): 8 float32 arrays of 1M elements, 4 float32
    scalars, one ``Particle`` and an array of 65536 of them."""
    import overdub as od

    cp = gpu.cp
    arrays = [cp.zeros(1 << 20, dtype=cp.float32) for _ in range(8)]
    scalars = [np.float32(1.5 + i) for i in range(4)]
    fields = (1.5, 2.5, 3.5, 7)
    record = np.array([fields], dtype=particle.dtype)  # one Particle as numpy and CUDA C lay it out
    records = od.struct_array(particle, 1 << 16, target="cuda")  # a cupy array of Particle.dtype

    def device(a, numba=None) -> LaunchArgument:
        return LaunchArgument(a, a if numba is None else numba, a, int(a.data.ptr), struct.pack("<Q", a.data.ptr))

    return {
        "array": [device(a) for a in arrays],
        "scalar": [LaunchArgument(x, x, x, x, x.tobytes()) for x in scalars],
        # cupy passes a one-element numpy array by value; numba-cuda takes a record (and copies it to the device
        # on every launch); cuda.core's launch takes numbers, pointers and buffers, not a struct
        "struct": [LaunchArgument(particle(*fields), record[0], record, None, record.tobytes())],
        # numba-cuda types a cupy array by its typestr alone ('|V16', no fields): it gets its own device array
        "records": [device(records, numba=gpu.nbcuda.device_array(records.shape, dtype=particle.dtype))],
    }


def _launch_loops(gpu: GPU, name: str, args: list[LaunchArgument], pymod, c_source: str, code, floor) -> dict:
    """The ways to launch the empty kernel ``name`` with ``args``: for each, a function making a function of n
    doing n launches (made and warmed up in turn, so a failure is recorded against its launcher). A launcher
    that cannot take one of the arguments is left out."""
    py_kernel, kernel = getattr(pymod, name), code.get_kernel(name)
    loops = {}
    if floor is not None:
        loops["C floor"] = functools.partial(_floor_loop, floor, kernel, [a.floor for a in args])
    loops["overdub"] = functools.partial(_od_loop, py_kernel, tuple(a.overdub for a in args))
    loops["overdub od.jit"] = functools.partial(_od_jit_loop, py_kernel, tuple(a.overdub for a in args))
    if all(a.core is not None for a in args):
        loops["cuda.core"] = functools.partial(_core_loop, gpu, kernel, tuple(a.core for a in args))
    loops["cupy RawKernel"] = functools.partial(_cupy_loop, gpu, c_source, name, tuple(a.cupy for a in args))
    loops["numba-cuda"] = functools.partial(_numba_loop, gpu, py_kernel, tuple(a.numba for a in args))
    return loops


# Each launcher's loop: what a launch needs is bound once, as default arguments (locals of the loop).


def _floor_loop(floor, kernel, params: list[bytes]):
    from cuda.bindings import driver

    status, function = driver.cuKernelGetFunction(kernel.handle)  # the CUfunction in the current context
    if status != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuKernelGetFunction: {status}")
    return floor.loop(int(function), params)


def _od_loop(py_kernel, args: tuple):
    import overdub as od

    def od_loop(n, cuda=od.cuda, k=py_kernel, args=args):
        for _ in range(n):
            cuda(k, *args, threads=1, blocks=1, target="cuda")

    return od_loop


def _od_jit_loop(py_kernel, args: tuple):
    import overdub as od

    def od_jit_loop(n, k=od.jit(py_kernel, target="cuda")[1, 1], args=args):  # noqa: B008 -- bound once
        for _ in range(n):
            k(*args)

    return od_jit_loop


def _core_loop(gpu: GPU, kernel, args: tuple):
    from cuda.core import LaunchConfig, launch

    stream, config = gpu.device.default_stream, LaunchConfig(grid=1, block=1)

    def core_loop(n, launch=launch, stream=stream, config=config, kernel=kernel, args=args):
        for _ in range(n):
            launch(stream, config, kernel, *args)

    return core_loop


def _cupy_loop(gpu: GPU, c_source: str, name: str, args: tuple):
    def cupy_loop(n, rk=gpu.cp.RawKernel(c_source, name), grid=(1,), block=(1,), args=args):  # noqa: B008
        for _ in range(n):
            rk(grid, block, args)

    return cupy_loop


def _numba_loop(gpu: GPU, py_kernel, args: tuple):
    def nb_loop(n, k=gpu.nbcuda.jit(py_kernel), args=args):  # noqa: B008 -- bound once
        for _ in range(n):
            k[1, 1](*args)

    return nb_loop


def _time_enqueue(gpu: GPU, loop, n: int, batch: int) -> float:
    """Host seconds per launch of ``loop``: n launches in batches of ``batch``, each timed from before its first
    launch to after its last, the GPU drained (synchronized) before each, outside the interval. A batch shorter
    than the driver's launch queue never waits for the queue to drain, so a launcher that enqueues faster than
    the GPU retires empty kernels is itself timed, not the GPU."""
    seconds, done = 0.0, 0
    while done < n:
        k = min(batch, n - done)
        gpu.sync()
        t0 = time.perf_counter()
        loop(k)
        seconds += time.perf_counter() - t0
        done += k
    gpu.sync()
    return seconds / n


def _build_floor(part: Part):
    """The C floor's library, built and loaded, or None (the reason recorded)."""
    with part.guard("C floor: build and load"), tempfile.TemporaryDirectory(prefix="odbench_floor_") as tmp:
        return launch_floor.Floor(launch_floor.build(Path(tmp)))  # a loaded library outlives its file
    return None


def part1(part: Part, gpu: GPU, cfg: dict, check_only: bool) -> None:
    n, rounds, batch = cfg["launch_n"], cfg["launch_rounds"], cfg["launch_batch"]
    part.config.update(
        launches_per_round=n,
        rounds=rounds,
        batch=batch,
        warmup=cfg["launch_warmup"],
        numba_low_occupancy_warnings=False,
        c_compiler=launch_floor.compiler(),
        device=str(gpu.name),
        arch=gpu.arch,
    )
    part.notes.append(
        "Host time per launch: n launches in batches shorter than the driver's launch queue, each batch "
        "timed from its first launch to its last (a synchronize before it, outside the interval), divided by "
        "n; median of the rounds, in which every launcher of every case runs in turn (the host's speed drifts "
        "within a run), best in the detail. C floor: cuLaunchKernel in a C loop, with the CUfunction of "
        "cuda.core's kernel and its parameters packed once. cupy RawKernel gets the cupy arrays themselves; "
        "cuda.core gets the data pointers as Python ints and a LaunchConfig built once; numba-cuda gets the "
        "cupy arrays (by default it synchronizes on the stream their __cuda_array_interface__ names, if any); "
        "numba-cuda's low-occupancy and implicit-copy warning checks are turned off. 1d: overdub gets a "
        "Particle (an @od.struct: one kernel parameter per field), cupy a one-element numpy array of "
        "Particle.dtype (the CUDA C struct by value), numba-cuda a numpy record (which it copies to the "
        "device on every launch); cuda.core cannot pass a struct and is left out. 1e: od.struct_array(Particle, "
        "65536) for overdub, cupy and cuda.core (its pointer), a numba device array of Particle.dtype for "
        "numba-cuda (which types a cupy array of a structured dtype by its typestr alone, without the fields)."
    )
    pymod = fresh_module("launch", K.launch_py_source())
    c_source = K.launch_c_source()
    code = gpu.core_code(c_source)
    pool = _launch_arguments(gpu, pymod.Particle)
    floor = _build_floor(part)

    runnable, left_out = {}, {}
    for case, (name, _) in LAUNCH_CASES.items():
        kinds = K.LAUNCH_KERNELS[name]
        args = [pool[kind][kinds[:i].count(kind)] for i, kind in enumerate(kinds)]
        loops = _launch_loops(gpu, name, args, pymod, c_source, code, floor)
        left_out[case] = {"cuda.core"} - loops.keys()  # by design (the floor is missing only by failure)
        for impl, make in loops.items():
            with part.guard(f"1{case} {impl} setup/warm-up"):
                loop = make()
                loop(cfg["launch_warmup"])  # compiles on the first call
                gpu.sync()
                runnable[(case, impl)] = loop
                part.checks.append({"name": f"1{case} {impl} launches and synchronizes", "ok": True})
    if check_only:
        return

    times = {key: [] for key in runnable}
    for _ in range(rounds):
        for key, loop in runnable.items():
            with part.guard(f"1{key[0]} {key[1]} timing"):
                times[key].append(_time_enqueue(gpu, loop, n, batch))
    _part1_results(part, times, left_out)


LAUNCH_RATIOS = (  # (name, launcher, launcher): the first's time over the second's, in each case
    ("od/cupy", "overdub", "cupy RawKernel"),
    ("od/cuda.core", "overdub", "cuda.core"),
    ("numba/od", "numba-cuda", "overdub"),
    ("od.jit kernel[b, t]/od.cuda", "overdub od.jit", "overdub"),
    ("od/C floor", "overdub", "C floor"),
    ("od.jit kernel[b, t]/C floor", "overdub od.jit", "C floor"),
    ("od.jit kernel[b, t]/cuda.core", "overdub od.jit", "cuda.core"),
)
LAUNCH_TARGETS = (  # issue 23, in every case: within 1.25x of the C floor, no slower than cuda.core
    ("od.cuda / C floor", "od/C floor", 1.25),
    ("od.jit kernel[b, t] / C floor", "od.jit kernel[b, t]/C floor", 1.25),
    ("od.cuda / cuda.core", "od/cuda.core", 1.0),
    ("od.jit kernel[b, t] / cuda.core", "od.jit kernel[b, t]/cuda.core", 1.0),
)


def _part1_results(part: Part, times: dict, left_out: dict) -> None:
    """Medians, ratios and targets from each (case, launcher)'s seconds per launch, one a round. A launcher
    left out of a case (it cannot take the arguments) has no ratio or target there."""
    for case, (_, label) in LAUNCH_CASES.items():
        us = {impl: median(ts) * 1e6 for (c, impl), ts in times.items() if c == case and ts}
        for impl, value in us.items():
            best = min(times[(case, impl)]) * 1e6
            part.measure(f"1{case} {label} [{impl}]", value, "us/launch", case=case, impl=impl, best=best)
        ratios = {what: ratio(us.get(a), us.get(b)) for what, a, b in LAUNCH_RATIOS if not {a, b} & left_out[case]}
        for what, value in ratios.items():
            part.measure(f"1{case} ratio {what}", value, "x", case=case)
        for name, what, threshold in LAUNCH_TARGETS:
            if what in ratios:
                part.target(f"1{case} {name}", ratios[what], "<=", threshold)
    part.target("1b od/cupy RawKernel", part.value("1b ratio od/cupy"), "<=", 1.0)
    part.target("1b od.jit kernel[b, t] / od.cuda", part.value("1b ratio od.jit kernel[b, t]/od.cuda"), "<=", 1.1)
    part.target("1b numba-cuda/od", part.value("1b ratio numba/od"), ">=", 8.0)


# --- part 2: validity-check scaling ---------------------------------------------------------------------


def part2(part: Part, gpu: GPU, cfg: dict, check_only: bool) -> None:
    import overdub as od

    cp = gpu.cp
    n, repeats = cfg["launch_n"], cfg["launch_repeats"]
    part.config.update(constants=cfg["edges"], launches_per_repeat=n, repeats=repeats)
    part.notes.append(
        "Kernel k(a, x) reads K module constants and calls a chain of min(K, 20) generic "
        "functions; launched as in 1b (one float32 cupy array of 1M elements, one float32 scalar)."
    )
    a = cp.zeros(1 << 20, dtype=cp.float32)
    x = np.float32(1.5)
    loops = {}
    for k in cfg["edges"]:
        with part.guard(f"K={k}"):
            source, constant = K.edges_source(k)
            mod = fresh_module(f"edges{k}", source)
            a[:] = 0
            t0 = time.perf_counter()
            od.cuda(mod.kernel, a, x, target="cuda")
            gpu.sync()
            compile_s = time.perf_counter() - t0
            edges = len(od.explain(mod.kernel, a, x, target="cuda"))
            expected = np.float32(constant + 2.0 * float(x))
            if not part.check(
                f"K={k} a[0] == {float(expected)}",
                lambda: check_close(f"K={k}", np.float32(a[0].get()), expected, rtol=1e-6),
            ):
                continue
            part.measure(f"2 K={k} edges", edges, "edges", k=k)
            part.measure(f"2 K={k} compile + first launch", compile_s, "s", k=k)

            def loop(n, cuda=od.cuda, kernel=mod.kernel, a=a, x=x):
                for _ in range(n):
                    cuda(kernel, a, x, target="cuda")

            loop(cfg["launch_warmup"])
            loops[k] = (loop, edges)
    if check_only or not loops:
        return
    best = {k: float("inf") for k in loops}
    for _ in range(repeats):
        for k, (loop, _) in loops.items():
            with part.guard(f"K={k} timing"):
                best[k] = min(best[k], _time_host_loop(gpu, loop, n))
    values = []
    for k, (_, edges) in loops.items():
        if best[k] < float("inf"):
            part.measure(f"2 K={k} ({edges} edges) launch", best[k] * 1e6, "us/launch", k=k, edges=edges)
            values.append(best[k])
    flat = max(values) / min(values) if len(values) == len(cfg["edges"]) else None
    part.measure("2 max/min launch time", flat, "x")
    part.target("2 launch time flat in edges (max/min)", flat, "<=", 1.05)


# --- part 3: generated-code quality ---------------------------------------------------------------------


def _event_series(gpu: GPU, stream, variants: dict, runs: int, warmup: int) -> dict:
    """Median device ms of each variant (interleaved run by run, after ``warmup`` runs of each)."""
    for _ in range(warmup):
        for enqueue in variants.values():
            gpu.device_ms(stream, enqueue)
    times = {name: [] for name in variants}
    for _ in range(runs):
        for name, enqueue in variants.items():
            times[name].append(gpu.device_ms(stream, enqueue))
    return {name: median(values) for name, values in times.items()}


def _check_and_time(
    part: Part,
    gpu: GPU,
    stream,
    name: str,
    reference: str,
    od_run,
    nb_run,
    out,
    expected,
    runs: int,
    warmup: int,
    check_only: bool,
    n: int,
    **tolerance,
) -> dict | None:
    """Check both versions' output against ``expected``; when both are right and timing is wanted, their
    device times, ratio and target (od/numba <= 1.02). Returns the times, or None."""
    cp = gpu.cp
    ok = True
    for impl, fn in (("overdub", od_run), ("numba-cuda", nb_run)):
        out[...] = 0
        gpu.sync()
        fn()
        gpu.sync()
        ok &= part.check(
            f"{name} [{impl}] == {reference}", lambda: gpu_check_close(cp, name.split()[-1], out, expected, **tolerance)
        )
    if not ok or check_only:
        return None
    ms = _event_series(gpu, stream, {"overdub": od_run, "numba-cuda": nb_run}, runs, warmup)
    part.measure(f"{name} [overdub]", ms["overdub"], "ms", n=n)
    part.measure(f"{name} [numba-cuda]", ms["numba-cuda"], "ms", n=n)
    part.measure(f"{name} ratio od/numba", ratio(ms["overdub"], ms["numba-cuda"]), "x")
    part.target(f"{name} od/numba", ratio(ms["overdub"], ms["numba-cuda"]), "<=", 1.02)
    return ms


def part3(part: Part, gpu: GPU, cfg: dict, check_only: bool) -> None:
    import overdub as od

    cp, nbcuda = gpu.cp, gpu.nbcuda
    stream = cp.cuda.Stream(non_blocking=True)
    nbstream = nbcuda.external_stream(stream.ptr)
    runs, warmup = cfg["event_runs"], cfg["event_warmup"]
    part.config.update(
        saxpy_n=cfg["saxpy_n"],
        reduce_n=cfg["reduce_n"],
        stencil_n=cfg["stencil_n"],
        event_runs=runs,
        event_warmup=warmup,
        stream="one non-blocking cupy stream for all",
    )
    part.notes.append(
        "Device time by CUDA events around one launch, median of the runs; a spin kernel enqueued "
        "first keeps the GPU busy while the host enqueues, so host latency is excluded. numba-cuda "
        "gets numba views of the cupy arrays (cuda.as_cuda_array(..., sync=False)). Copy "
        "bandwidth: the faster of cupy.copyto and dst[...] = src of an n-element float32 array, "
        "counting 8n bytes (read + write); saxpy counts 12n bytes."
    )

    def nbview(arr):
        return nbcuda.as_cuda_array(arr, sync=False)

    # -- (i) saxpy, in the user context "bench" --------------------------------------------------------
    with part.guard("3i saxpy"):
        n = cfg["saxpy_n"]
        odm = fresh_module("saxpy_od", K.SAXPY_OD)
        nbm = fresh_module("saxpy_nb", K.SAXPY_NUMBA)
        nb_saxpy = nbcuda.jit(nbm.saxpy_strided)
        # the grid-stride form measured fastest on an H200 (88% of copy bandwidth against 83% for one thread
        # per element): 64 blocks of 256 threads per multiprocessor
        threads, blocks = 256, min(-(-n // 256), 64 * gpu.sm_count)
        with stream:
            x = _pattern(cp, n, 1009)
            y0 = _pattern(cp, n, 997)
            y = y0.copy()
            dst = cp.empty_like(x)
        gpu.sync()
        a = np.float32(0.75)
        xv, yv = nbview(x), nbview(y)

        def od_run():
            od.cuda(
                odm.saxpy_strided,
                a,
                x,
                y,
                threads=threads,
                blocks=blocks,
                stream=stream,
                target="cuda",
                context=odm.bench,
            )

        def nb_run():
            nb_saxpy[blocks, threads, nbstream](a, xv, yv)

        n4 = n // 4  # the vector form covers the first 4*(n//4) elements
        xp, yp = od.pointer(x), od.pointer(y)

        def od_vector_run():
            od.cuda(
                odm.saxpy_vector,
                a,
                xp,
                yp,
                n4,
                threads=256,
                blocks=max(1, -(-n4 // 256)),
                stream=stream,
                target="cuda",
                context=odm.bench,
            )

        def copy_run():
            with stream:
                cp.copyto(dst, x)

        def assign_run():
            with stream:
                dst[...] = x

        expected = a * x + y0
        ok = True
        for name, fn in (("overdub", od_run), ("numba-cuda", nb_run), ("overdub, vector loads", od_vector_run)):
            y[...] = y0
            gpu.sync()
            fn()
            gpu.sync()
            covered = 4 * n4 if fn is od_vector_run else n
            ok &= part.check(
                f"3i saxpy [{name}] == a*x + y",
                lambda: gpu_check_close(cp, "saxpy", y[:covered], expected[:covered], rtol=1e-5, atol=1e-6),
            )
        for name, fn in (("copyto", copy_run), ("dst[...] = src", assign_run)):
            dst[...] = 0
            gpu.sync()
            fn()
            gpu.sync()
            ok &= part.check(f"3i copy [{name}] == src", lambda: gpu_check_close(cp, "copy", dst, x, 0, 0))
        del expected
        if ok and not check_only:
            ms = _event_series(
                gpu,
                stream,
                {
                    "overdub": od_run,
                    "numba-cuda": nb_run,
                    "vector": od_vector_run,
                    "copyto": copy_run,
                    "assign": assign_run,
                },
                runs,
                warmup,
            )
            gbps = lambda nbytes, t: nbytes / (t * 1e-3) / 1e9  # noqa: E731
            part.measure("3i saxpy [overdub]", ms["overdub"], "ms", n=n)
            part.measure("3i saxpy [numba-cuda]", ms["numba-cuda"], "ms", n=n)
            part.measure("3i saxpy ratio od/numba", ratio(ms["overdub"], ms["numba-cuda"]), "x")
            part.measure("3i saxpy bandwidth [overdub]", gbps(12 * n, ms["overdub"]), "GB/s")
            part.measure("3i saxpy bandwidth [numba-cuda]", gbps(12 * n, ms["numba-cuda"]), "GB/s")
            part.measure("3i copy [cupy.copyto]", ms["copyto"], "ms", n=n)
            part.measure("3i copy [dst[...] = src]", ms["assign"], "ms", n=n)
            copy_bw = max(gbps(8 * n, ms["copyto"]), gbps(8 * n, ms["assign"]))
            part.measure("3i copy bandwidth (best)", copy_bw, "GB/s")
            frac = gbps(12 * n, ms["overdub"]) / copy_bw
            part.measure("3i saxpy bandwidth / copy bandwidth [overdub]", frac, "x")
            part.measure("3i saxpy, vector loads [overdub]", ms["vector"], "ms", n=4 * n4)
            vector_frac = gbps(12 * 4 * n4, ms["vector"]) / copy_bw
            part.measure("3i saxpy bandwidth / copy bandwidth [overdub, vector loads]", vector_frac, "x")
            part.target("3i saxpy od/numba", ratio(ms["overdub"], ms["numba-cuda"]), "<=", 1.02)
            part.target("3i saxpy bandwidth >= 90% of copy (od.vload/od.vstore)", vector_frac, ">=", 0.90)
        del x, y, y0, dst, xv, yv

    # -- (ii) shared-memory block reduction ------------------------------------------------------------
    with part.guard("3ii reduction"):
        n = cfg["reduce_n"]
        odm = fresh_module("reduce_od", K.REDUCE_OD)
        nbm = fresh_module("reduce_nb", K.REDUCE_NUMBA)
        nb_reduce = nbcuda.jit(nbm.reduce)
        threads = K.REDUCE_THREADS
        blocks = -(-n // threads)
        with stream:
            src = _pattern(cp, n, 1013)
            out = cp.zeros(blocks, dtype=cp.float32)
            padded = cp.zeros(blocks * threads, dtype=cp.float32)
            padded[:n] = src
            expected = padded.reshape(blocks, threads).sum(axis=1)
            del padded
        gpu.sync()
        srcv, outv = nbview(src), nbview(out)

        def od_run():
            od.cuda(odm.reduce, src, out, threads=threads, blocks=blocks, stream=stream, target="cuda")

        def nb_run():
            nb_reduce[blocks, threads, nbstream](srcv, outv)

        ms = _check_and_time(
            part,
            gpu,
            stream,
            "3ii reduction",
            "block sums",
            od_run,
            nb_run,
            out,
            expected,
            runs,
            warmup,
            check_only,
            n,
            rtol=1e-4,
            atol=1e-3,
        )
        if ms:
            part.measure("3ii reduction bandwidth [overdub]", 4 * n / (ms["overdub"] * 1e-3) / 1e9, "GB/s")
        del src, out, expected, srcv, outv

    # -- (iii) 2D 5-point stencil ----------------------------------------------------------------------
    with part.guard("3iii stencil"):
        n = cfg["stencil_n"]
        m = fresh_module("stencil", K.STENCIL)
        nb_stencil = nbcuda.jit(m.stencil)
        threads = K.STENCIL_THREADS
        blocks = (-(-n // threads[0]), -(-n // threads[1]))
        with stream:
            grid = _pattern(cp, n * n, 1019).reshape(n, n)
            b = cp.zeros_like(grid)
            expected = K.stencil_reference(grid, cp)
        gpu.sync()
        gv, bv = nbview(grid), nbview(b)

        def od_run():
            od.cuda(m.stencil, grid, b, threads=threads, blocks=blocks, stream=stream, target="cuda")

        def nb_run():
            nb_stencil[blocks, threads, nbstream](gv, bv)

        _check_and_time(
            part,
            gpu,
            stream,
            "3iii stencil",
            "array expression",
            od_run,
            nb_run,
            b,
            expected,
            runs,
            warmup,
            check_only,
            n,
            rtol=1e-5,
            atol=1e-5,
        )
        del grid, b, expected, gv, bv

    # -- (iv) forward-mode AD: a user's unchanged function called with Duals vs its derivative by hand ----
    with part.guard("3iv forward-mode AD"):
        n = cfg["saxpy_n"] // 4
        m = fresh_module("autodiff", K.AUTODIFF, EXAMPLES=str(Path(__file__).resolve().parents[1] / "examples"))
        with stream:
            xs = cp.linspace(-2.0, 2.0, n)
            d_dual, d_hand = cp.zeros_like(xs), cp.zeros_like(xs)
            expected = (cp.cos(xs) + cp.sin(xs)) * cp.exp(xs) + 2 * xs
        gpu.sync()
        threads, blocks = 256, -(-n // 256)
        variants = {
            "dual": lambda: od.cuda(
                m.by_dual, d_dual, xs, threads=threads, blocks=blocks, stream=stream, target="cuda"
            ),
            "hand": lambda: od.cuda(
                m.by_hand, d_hand, xs, threads=threads, blocks=blocks, stream=stream, target="cuda"
            ),
        }
        ok = True
        for name, out in (("dual", d_dual), ("hand", d_hand)):
            variants[name]()
            gpu.sync()
            ok &= part.check(
                f"3iv derivative [{name}] == analytic",
                lambda out=out: gpu_check_close(cp, "derivative", out, expected, rtol=1e-12, atol=1e-12),
            )
        if ok and not check_only:
            ms = _event_series(gpu, stream, variants, runs, warmup)
            part.measure("3iv derivative [Dual numbers]", ms["dual"], "ms", n=n)
            part.measure("3iv derivative [by hand]", ms["hand"], "ms", n=n)
            part.measure("3iv derivative ratio dual/hand", ratio(ms["dual"], ms["hand"]), "x")
            part.target("3iv Dual derivative / hand-written", ratio(ms["dual"], ms["hand"]), "<=", 1.05)
        del xs, d_dual, d_hand, expected
    cp.get_default_memory_pool().free_all_blocks()


# --- part 4: recompile selectivity and cost -------------------------------------------------------------


def part4(part: Part, gpu: GPU, cfg: dict, check_only: bool) -> None:
    import overdub as od

    cp, nbcuda = gpu.cp, gpu.nbcuda
    repeats = cfg["recompile_repeats"]
    part.config.update(kernels=K.N_KERNELS, generic_functions=10, l_users=list(K.L_USERS), repeats=repeats)
    part.notes.append(
        "Time to first launch after redefining L: launch of a kernel calling L, synchronized "
        "(overdub recompiles L's method and the kernel; other callees' method instances are "
        "reused). numba-cuda: the same kernel and device functions exec'd into a fresh module, "
        "first call + synchronize. Best of the repeats, each with a fresh redefinition / module."
    )
    lib_src = K.LIBRARY
    kern_src = K.library_kernels_source()
    mod = fresh_module("library", lib_src + "\n" + kern_src)
    x = np.float32(0.8)
    size = 32
    init = (np.arange(size, dtype=np.float32) * np.float32(0.1)).astype(np.float32)
    arrays = [cp.asarray(init) for _ in range(K.N_KERNELS)]

    def reference(i, factor):
        ns = fresh_module(
            "library_ref", K.as_plain_python(lib_src) + K.redefine_l_source(factor).replace("@od.function\n", "")
        )
        f, g = K.kernel_callees(i)
        fx = getattr(ns, f)(float(x))
        return np.array([np.float32(fx + getattr(ns, g)(float(v))) for v in init], dtype=np.float32)

    def launch(i):
        od.cuda(getattr(mod, f"k{i}"), arrays[i], x, threads=size, blocks=1, target="cuda")

    def check_all(factor, label):
        ok = True
        for i in range(K.N_KERNELS):
            ok &= part.check(
                f"4 k{i} {label}",
                lambda i=i: check_close(f"k{i}", arrays[i].get(), reference(i, factor), rtol=1e-5, atol=1e-5),
            )
        return ok

    # first launch of all 20
    t0 = time.perf_counter()
    for i in range(K.N_KERNELS):
        launch(i)
    gpu.sync()
    part.measure("4 first launch of all 20 kernels", time.perf_counter() - t0, "s")
    if not check_all(1.5, "== reference before redefinition"):
        return
    for arr in arrays:
        arr[...] = cp.asarray(init)

    # redefine L, time the first launch of one of its users, relaunch all and count recompiles
    user = K.L_USERS[0]
    od_times = []
    for r in range(repeats):
        factor = 2.5 + r
        exec(K.redefine_l_source(factor), mod.__dict__)
        before = od.stats()["compiles"]
        t0 = time.perf_counter()
        launch(user)
        gpu.sync()
        od_times.append(time.perf_counter() - t0)
        if r == 0:
            recompiled = [f"k{user}"] if od.stats()["compiles"] > before else []
            for i in range(K.N_KERNELS):
                if i == user:
                    continue
                c = od.stats()["compiles"]
                launch(i)
                if od.stats()["compiles"] > c:
                    recompiled.append(f"k{i}")
            gpu.sync()
            delta = od.stats()["compiles"] - before
            part.measure(
                "4 kernels recompiled after redefining L",
                delta,
                "kernels",
                which=recompiled,
                expected=[f"k{i}" for i in K.L_USERS],
            )
            part.target("4 recompiled kernels == 2", delta, "==", 2)
            if not check_all(factor, "== reference after redefinition"):
                return
            if check_only:
                return
        for arr in arrays:
            arr[...] = cp.asarray(init)

    # numba-cuda from scratch, the same kernel and device functions
    nb_times = []
    warm = fresh_module("library_nb_warm", K.as_numba_device(lib_src) + "\n" + kern_src)
    nbcuda.jit(warm.k0)[1, size](cp.asarray(init), x)  # warm numba-cuda's own first-compile costs
    gpu.sync()
    for r in range(repeats):
        nbm = fresh_module(
            "library_nb", K.as_numba_device(lib_src) + K.as_numba_device(K.redefine_l_source(2.5 + r)) + "\n" + kern_src
        )
        arr = cp.asarray(init)
        t0 = time.perf_counter()
        kernel = nbcuda.jit(getattr(nbm, f"k{user}"))
        kernel[1, size](arr, x)
        gpu.sync()
        nb_times.append(time.perf_counter() - t0)
        if r == 0 and not part.check(
            f"4 numba-cuda k{user} == reference",
            lambda: check_close("numba", arr.get(), reference(user, 2.5), rtol=1e-5, atol=1e-5),
        ):
            return
    part.measure("4 first launch after redefinition [overdub]", min(od_times), "s", all=od_times)
    part.measure("4 compile from scratch + first launch [numba-cuda]", min(nb_times), "s", all=nb_times)
    part.measure("4 ratio od/numba", ratio(min(od_times), min(nb_times)), "x")
    part.target("4 recompile time od/numba", ratio(min(od_times), min(nb_times)), "<=", 1.2)


PARTS = {
    "1": ("Launch overhead", part1),
    "2": ("Validity-check scaling", part2),
    "3": ("Generated-code quality", part3),
    "4": ("Recompile selectivity and cost", part4),
    "9": ("CUDA graphs", graph_part.part9),
}
