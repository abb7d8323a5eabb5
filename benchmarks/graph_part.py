"""Part 9: CUDA graphs -- the host cost of replaying a 20-kernel graph, per kernel, against the same 20 launches
on a stream and against graphs built by hand (the driver's own stream capture through cuda.bindings, and
cupy's); and what keeping a graph valid costs: after a redefinition, the update of the executable graph in
place against a full re-capture (the recompile itself excluded from both).

Each round runs every contender once, in turn (the host's speed drifts within a run); the value is the median
of the rounds. A contender's time is the host time of ``batch`` replays (or launches) divided by the batch and
by 20, with the GPU synchronized before each batch, outside the timed interval.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from _common import fresh_module, median, ratio

N_KERNELS = 20

PY_SOURCE = "\n".join(
    ["import overdub as od", "from numba import cuda", "", "@od.function", "def f(x):", "    return x + 1.0", ""]
    + [
        f"def k{i}(a, x):\n    j = cuda.grid(1)\n    if j < a.size:\n        a[j] = {'f(a[j])' if i == 0 else 'a[j]'} + x\n"
        for i in range(N_KERNELS)
    ]
)
C_SOURCE = "\n".join(
    f'extern "C" __global__ void k{i}(float* a, int n, float x) {{ int j = blockIdx.x * blockDim.x + '
    f"threadIdx.x; if (j < n) a[j] = a[j] + x; }}"
    for i in range(N_KERNELS)
)


def part9(part, gpu, cfg, check_only: bool) -> None:
    from cuda.bindings import driver as drv

    import overdub as od

    cp = gpu.cp
    rounds, batch = (1, 2) if check_only else (cfg.get("graph_rounds", 9), cfg.get("graph_batch", 100))
    part.config.update(kernels=N_KERNELS, rounds=rounds, batch=batch)
    m = fresh_module("graphs", PY_SOURCE)
    kernels = [getattr(m, f"k{i}") for i in range(N_KERNELS)]
    a = cp.zeros(32, dtype=np.float32)

    def stream_launches():
        for k in kernels:
            od.cuda(k, a, np.float32(1.0), blocks=1, threads=32)

    stream_launches()
    gpu.sync()
    with od.graph() as g:
        stream_launches()

    # the same kernels in CUDA C, captured by hand with the driver, and by cupy
    code = gpu.core_code(C_SOURCE)
    functions = [drv.cuKernelGetFunction(code.get_kernel(f"k{i}")._handle)[1] for i in range(N_KERNELS)]
    raw = cp.zeros(32, dtype=np.float32)
    params = ((int(raw.data.ptr), 32, 1.0), (ctypes.c_void_p, ctypes.c_int, ctypes.c_float))
    _, capture_stream = drv.cuStreamCreate(1)
    drv.cuStreamBeginCapture(capture_stream, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED)
    for function in functions:
        drv.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, capture_stream, params, 0)
    _, driver_graph = drv.cuStreamEndCapture(capture_stream)
    _, driver_exec = drv.cuGraphInstantiate(driver_graph, 0)
    null = drv.CUstream(0)
    raw_kernels = [cp.RawKernel(C_SOURCE, f"k{i}") for i in range(N_KERNELS)]
    cupy_stream = cp.cuda.Stream(non_blocking=True)
    with cupy_stream:
        cupy_stream.begin_capture()
        for kernel in raw_kernels:
            kernel((1,), (32,), (raw, np.int32(32), np.float32(1.0)))
        cupy_graph = cupy_stream.end_capture()
    plain = fresh_module("graphs_numba", PY_SOURCE.replace("f(a[j])", "(a[j] + 1.0)"))  # f inlined
    numba_kernels = [gpu.nbcuda.jit(getattr(plain, f"k{i}")) for i in range(N_KERNELS)]
    numba_a = gpu.nbcuda.as_cuda_array(a)

    contenders = {
        "od graph": g.launch,
        "driver graph": lambda: drv.cuGraphLaunch(driver_exec, null),
        **_core_graph(part, gpu, code, raw),
        "cupy graph": lambda: cupy_graph.launch(),
        "od stream launches": stream_launches,
        "numba-cuda stream launches": lambda: [k[1, 32](numba_a, np.float32(1.0)) for k in numba_kernels],
    }
    for fn in contenders.values():  # warm up (numba compiles here)
        fn()
    gpu.sync()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            gpu.sync()
            start = time.perf_counter()
            for _ in range(batch):
                fn()
            times[name].append((time.perf_counter() - start) / batch / N_KERNELS * 1e6)
    gpu.sync()
    for name, values in times.items():
        part.measure(f"9a {name} per kernel", median(values), "us")
    od_us = part.value("9a od graph per kernel")
    part.measure("9a od graph / driver graph", ratio(od_us, part.value("9a driver graph per kernel")), "x")
    part.measure("9a od graph / cuda.core graph", ratio(od_us, part.value("9a cuda.core graph per kernel")), "x")
    part.measure("9a od graph / od stream launches", ratio(od_us, part.value("9a od stream launches per kernel")), "x")
    part.target("9a od graph / cuda.core graph (per kernel)", part.value("9a od graph / cuda.core graph"), "<=", 1.1)

    # 9b: keeping the graph valid after a redefinition -- in place against a re-capture, compiles excluded
    def redefine(step: int) -> None:
        exec(f"@od.function\ndef f(x):\n    return x + {float(step)}\n", vars(m))
        od.cuda(kernels[0], a, np.float32(1.0), blocks=1, threads=32)  # compiles the new k0 outside the timing
        gpu.sync()

    update_ms, recapture_ms = [], []
    for step in range(2, 2 + rounds):
        redefine(step)
        start = time.perf_counter()
        g.launch()
        update_ms.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
        with od.graph() as fresh:
            stream_launches()
        fresh.launch()
        recapture_ms.append((time.perf_counter() - start) * 1e3)
        fresh.close()
        gpu.sync()
    part.measure("9b update in place after a redefinition", median(update_ms), "ms")
    part.measure("9b re-capture after a redefinition", median(recapture_ms), "ms")
    part.measure("9b re-capture / update", ratio(median(recapture_ms), median(update_ms)), "x")

    def right():
        a.fill(0)
        g.launch()
        gpu.sync()
        step = 1 + rounds
        expected = (0.0 + step) + 1.0 + (N_KERNELS - 1) * 1.0
        got = a.get()
        if not np.allclose(got, expected):
            raise AssertionError(f"graph after redefinitions: {got[0]} != {expected}")

    part.check("9 the graph replays the current code after redefinitions", right)
    g.close()
    drv.cuGraphExecDestroy(driver_exec)
    drv.cuGraphDestroy(driver_graph)
    drv.cuStreamDestroy(capture_stream)


def _core_graph(part, gpu, code, raw) -> dict:
    """The same 20 C kernels in a graph built by hand with cuda.core (its graph builder), replayed on a stream
    of its own; none where this cuda.core has no graph builder (noted)."""
    try:
        from cuda.core import LaunchConfig, launch

        builder = gpu.device.create_graph_builder()
        builder.begin_building()
        config = LaunchConfig(grid=1, block=32)
        for i in range(N_KERNELS):
            launch(builder, config, code.get_kernel(f"k{i}"), int(raw.data.ptr), np.int32(32), np.float32(1.0))
        graph = builder.end_building().complete()
        stream = gpu.device.create_stream()
    except Exception as exc:  # an older cuda.core
        part.notes.append(f"no cuda.core graph: {type(exc).__name__}: {exc}")
        return {}
    return {"cuda.core graph": lambda: graph.launch(stream)}
