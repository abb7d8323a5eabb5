"""The cuda-mlir target against the numba-cuda target and against numba-cuda-mlir's own ``mlir_jit``, on the
same kernels: saxpy, a block reduction (shared memory, a barrier, an atomic) and a 3-point stencil, each
calling a device function (a generic function's method under overdub, a device function under ``mlir_jit``).

Parts:

* ``compile``: a cold compile to PTX for sm_90 (a fresh module each time, overdub's caches empty, the disk cache
  off), median of ``--repeat``; no GPU needed.
* ``device``: each kernel's device time on the GPU (CUDA events around ``--launches`` launches, after a warm-up),
  results checked against numpy first.
* ``launch``: the host cost of one launch of a one-thread kernel (10,000 launches, then a synchronize).

Usage: ``python benchmarks/cuda_mlir.py [--parts compile,device,launch] [--repeat 5] [--json FILE]``. Without a
GPU the ``device`` and ``launch`` parts say so and are skipped. Ratios are cuda-mlir / numba-cuda and cuda-mlir
/ mlir_jit in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("OVERDUB_CACHE", "0")

from _common import fresh_module

N = 1 << 24
KERNELS = {
    "saxpy": """
@od.function
def axpy(a, x, y):
    return a * x + y

def kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = axpy(a, x[i], y[i])
""",
    "reduction": """
@od.function
def square(x):
    return x * x

def kernel(a, x, y, out):
    sm = cuda.shared.array(256, numba.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[t] = square(x[i]) if i < x.size else numba.float32(0)
    cuda.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(out, 0, sm[0])
""",
    "stencil": """
@od.function
def blend(l, c, r):
    return 0.25 * l + 0.5 * c + 0.25 * r

def kernel(a, x, y, out):
    i = cuda.grid(1)
    if 0 < i < x.size - 1:
        out[i] = blend(x[i - 1], x[i], x[i + 1])
""",
}


def _plain(source: str) -> str:
    """The kernel as numba-cuda-mlir's own program writes it: the generic function a device function."""
    return source.replace("@od.function", "@mlir_cuda.jit(device=True)").replace("numba.float32", "float32")


def _plain_module(name: str, source: str):
    """The kernel as a numba-cuda-mlir program: its own ``cuda`` and types."""
    import numba_cuda_mlir.cuda as mlir_cuda
    from numba_cuda_mlir.numba_cuda import types as mt

    return fresh_module(f"mlir_plain_{name}", _plain(source), mlir_cuda=mlir_cuda, cuda=mlir_cuda, float32=mt.float32)


def _argtypes():
    from numba.core import types

    f32 = types.float32
    return (f32, f32[::1], f32[::1], f32[::1])


def compile_part(repeat: int) -> dict[str, dict[str, float]]:
    from numba_cuda_mlir import compiler as mlir_compiler
    from numba_cuda_mlir.numba_cuda import types as mt

    import overdub as od
    from overdub.runtime import runtime
    from overdub.targets.cudamlir import _compiling_for

    results: dict[str, dict[str, float]] = {}
    for name, source in KERNELS.items():
        times: dict[str, list[float]] = {"cuda": [], "cuda-mlir": [], "mlir_jit": []}
        for _ in range(repeat + 1):  # the first round warms the compilers' imports up
            for target in ("cuda", "cuda-mlir"):
                runtime.reset()
                module = fresh_module(f"mlir_{name}", source)
                started = time.perf_counter()
                od.code_ptx(module.kernel, *_argtypes(), target=target, cc=(9, 0))
                times[target].append(time.perf_counter() - started)
            module = _plain_module(name, source)
            f32 = mt.float32
            started = time.perf_counter()
            with _compiling_for((9, 0)):
                mlir_compiler.compile_ptx(module.kernel, (f32, f32[::1], f32[::1], f32[::1]), cc=(9, 0))
            times["mlir_jit"].append(time.perf_counter() - started)
        results[name] = {key: statistics.median(values[1:]) * 1e3 for key, values in times.items()}
    return results


def _gpu() -> bool:
    from overdub.targets import gpu_usable

    return gpu_usable()


def _data():
    import cupy

    rng = np.random.default_rng(0)
    x = cupy.asarray(rng.standard_normal(N).astype(np.float32))
    y = cupy.asarray(rng.standard_normal(N).astype(np.float32))
    return np.float32(2.0), x, y, cupy.zeros(N, dtype=np.float32)


def _expected(name: str, a, x, y):
    xs, ys = x.get(), y.get()
    if name == "saxpy":
        return a * xs + ys
    if name == "reduction":
        return np.array([np.sum(xs.astype(np.float64) ** 2)], dtype=np.float32)
    out = np.zeros_like(xs)
    out[1:-1] = 0.25 * xs[:-2] + 0.5 * xs[1:-1] + 0.25 * xs[2:]
    return out


def _launchers(name: str):
    """(label, launch(args), blocks) for the three compilers, each on a fresh module of the kernel."""
    import numba_cuda_mlir.cuda as mlir_cuda

    import overdub as od

    blocks = (N + 255) // 256
    made = []
    for target in ("cuda", "cuda-mlir"):
        module = fresh_module(f"mlir_dev_{name}", KERNELS[name])
        made.append(
            (target, lambda args, k=module.kernel, t=target: od.cuda(k, *args, blocks=blocks, threads=256, target=t))
        )
    plain = _plain_module(name, KERNELS[name])
    jitted = mlir_cuda.jit(plain.kernel)
    made.append(("mlir_jit", lambda args, k=jitted: k[blocks, 256](*args)))
    return made


def device_part(launches: int) -> dict[str, dict[str, float]]:
    import cupy

    results: dict[str, dict[str, float]] = {}
    a, x, y, out = _data()
    for name in KERNELS:
        results[name] = {}
        for label, launch in _launchers(name):
            out.fill(0)
            launch((a, x, y, out))
            cupy.cuda.runtime.deviceSynchronize()
            got = out.get()[:1] if name == "reduction" else out.get()
            expected = _expected(name, a, x, y)
            if not np.allclose(got, expected, rtol=1e-3, atol=1e-3):
                results[name][label] = float("nan")  # wrong: not timed
                continue
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            for _ in range(launches):
                launch((a, x, y, out))
            stop.record()
            stop.synchronize()
            results[name][label] = cupy.cuda.get_elapsed_time(start, stop) / launches * 1e3  # us a launch
    return results


def launch_part(launches: int = 10_000) -> dict[str, float]:
    import cupy
    import numba_cuda_mlir.cuda as mlir_cuda

    import overdub as od

    def one(out):
        out[0] = 1.0

    out = cupy.zeros(1, dtype=np.float32)
    jitted = mlir_cuda.jit(one)
    runs = {
        "cuda": lambda: od.cuda(one, out, target="cuda"),
        "cuda-mlir": lambda: od.cuda(one, out, target="cuda-mlir"),
        "mlir_jit": lambda: jitted[1, 1](out),
    }
    results = {}
    for label, run in runs.items():
        run()
        cupy.cuda.runtime.deviceSynchronize()
        started = time.perf_counter()
        for _ in range(launches):
            run()
        cupy.cuda.runtime.deviceSynchronize()
        results[label] = (time.perf_counter() - started) / launches * 1e6  # us a launch
    return results


def _table(title: str, rows: dict[str, dict[str, float]], unit: str) -> str:
    lines = [
        f"### {title} ({unit})",
        "",
        "| kernel | numba-cuda target | cuda-mlir target | mlir_jit | cuda-mlir / numba-cuda | cuda-mlir / mlir_jit |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        c, m, j = row["cuda"], row["cuda-mlir"], row["mlir_jit"]
        lines.append(f"| {name} | {c:.2f} | {m:.2f} | {j:.2f} | {m / c:.2f}x | {m / j:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="compile,device,launch")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--json", default=None)
    options = parser.parse_args()
    parts = options.parts.split(",")
    report: dict[str, object] = {}
    if "compile" in parts:
        report["compile_ms"] = rows = compile_part(options.repeat)
        print(_table("cold compile to sm_90 PTX", rows, "ms, median"))
    for part in ("device", "launch"):
        if part in parts and not _gpu():
            print(f"\n{part}: no usable GPU here, skipped")
            parts.remove(part)
    if "device" in parts:
        report["device_us"] = rows = device_part(options.launches)
        print("\n" + _table(f"device time of one launch over {N:,} float32", rows, "us"))
    if "launch" in parts:
        report["launch_us"] = floor = launch_part()
        print("\n### host cost of a launch (us)\n")
        for label, value in floor.items():
            print(f"- {label}: {value:.2f}")
    if options.json:
        with open(options.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
