"""PTX compile latency (issue 13, item 2): overdub's ``od.code_ptx`` of a small kernel against numba-cuda's
``cuda.compile_ptx``, each in fresh processes, interleaved, medians of CPU time.

    python benchmarks/ptx_latency.py [--runs 20] [--overdub PATH]...

Each run is a new process that imports everything, compiles another kernel with the same tool first (so the
one-time costs of a first compile -- NVVM's and libdevice's loading, numba's registries, overdub's version
digest -- are not counted), then times the compile of ``saxpy`` through a scalar function ``scale``:

* ``overdub``: ``scale`` a generic function, with the disk cache off and on (an empty directory: the entry is
  written);
* ``overdub, no callee``: the same kernel with ``scale`` pasted in;
* ``numba-cuda``: ``compile_ptx`` of the kernel with ``scale`` pasted in, and of the kernel calling ``scale`` as
  a ``cuda.jit(device=True)`` function. numba-cuda asks the device for its compute capability when it
  compiles a device function, so without a GPU that variant answers for it -- as overdub does
  (``overdub.targets.cuda._compiling_for``).

``--overdub PATH`` (repeatable) measures the overdub found at PATH (a checkout) as well, to compare versions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

KERNELS = {
    "overdub": """
        import overdub as od

        @od.function
        def scale(a: od.Float):
            return a * 2

        def saxpy(a, x, y):
            i = cuda.grid(1)
            if i < x.size:
                y[i] = scale(a) * x[i] + y[i]
    """,
    "pasted": """
        def saxpy(a, x, y):
            i = cuda.grid(1)
            if i < x.size:
                y[i] = a * 2 * x[i] + y[i]
    """,
    "device": """
        @cuda.jit(device=True)
        def scale(a):
            return a * 2

        def saxpy(a, x, y):
            i = cuda.grid(1)
            if i < x.size:
                y[i] = scale(a) * x[i] + y[i]
    """,
}

WARM_UP = {  # another kernel of the same shape, compiled first by the same tool
    "overdub": """
        import overdub as od

        @od.function
        def twice(a: od.Float):
            return a + a

        def saxpy(a, x, y):
            i = cuda.grid(1)
            if i < x.size:
                y[i] = twice(a) + x[i]
    """,
    "pasted": """
        def saxpy(a, x, y):
            i = cuda.grid(1)
            if i < x.size:
                y[i] = a + a + x[i]
    """,
    "device": """
        @cuda.jit(device=True)
        def twice(a):
            return a + a

        def saxpy(a, x, y):
            i = cuda.grid(1)
            if i < x.size:
                y[i] = twice(a) + x[i]
    """,
}

RUN = """
import importlib.util, os, sys, time
from numba import cuda
from numba.core import types

tool, kernel = sys.argv[1], sys.argv[2]
f32 = types.float32
signature = (f32, types.Array(f32, 1, "C"), types.Array(f32, 1, "C"))
if kernel == "device":
    from numba.cuda import dispatcher

    class Device:
        compute_capability = (9, 0)
    dispatcher.get_current_device = lambda: Device()
if tool == "overdub":
    import overdub as od
    compile_ptx = lambda f: od.code_ptx(f, *signature, cc=(9, 0))
else:
    compile_ptx = lambda f: cuda.compile_ptx(f, signature, cc=(9, 0))[0]


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(sys.argv[3], name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


compile_ptx(load("warm_" + kernel).saxpy)
measured = load("kernel_" + kernel).saxpy
start = time.process_time()
ptx = compile_ptx(measured)
print(1000 * (time.process_time() - start))
assert ".entry" in ptx
"""

VARIANTS = [  # label, tool, kernel, disk cache
    ("overdub, cache off", "overdub", "overdub", "0"),
    ("overdub, cache on (entry written)", "overdub", "overdub", "1"),
    ("overdub, no callee, cache off", "overdub", "pasted", "0"),
    ("numba-cuda, callee pasted", "numba", "pasted", "0"),
    ("numba-cuda, device function", "numba", "device", "0"),
]


def _one(directory: str, overdub_path: str, tool: str, kernel: str, cache: str) -> float:
    env = dict(
        os.environ,
        OVERDUB_CACHE=cache,
        OVERDUB_CACHE_DIR=tempfile.mkdtemp(dir=directory),
        PYTHONPATH=os.pathsep.join(filter(None, [overdub_path, os.environ.get("PYTHONPATH")])),
    )
    done = subprocess.run(
        [sys.executable, "-c", RUN, tool, kernel, directory],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=directory,
    )
    if done.returncode:
        raise RuntimeError(done.stderr)
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--overdub", action="append", default=[], help="another overdub checkout to measure")
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checkouts = [here] + [os.path.abspath(p) for p in args.overdub]
    with tempfile.TemporaryDirectory() as directory:
        for kernel in KERNELS:
            for prefix, sources in (("kernel_", KERNELS), ("warm_", WARM_UP)):
                with open(os.path.join(directory, f"{prefix}{kernel}.py"), "w") as file:
                    file.write("from numba import cuda\n" + textwrap.dedent(sources[kernel]))
        jobs = [
            (label if path == here else f"{label} [{path}]", path, tool, kernel, cache)
            for label, tool, kernel, cache in VARIANTS
            for path in (checkouts if tool == "overdub" else [here])
        ]
        times: dict[str, list[float]] = {job[0]: [] for job in jobs}
        for _ in range(args.runs):  # interleaved: the machine's load falls on every variant alike
            for label, path, tool, kernel, cache in jobs:
                times[label].append(_one(directory, path, tool, kernel, cache))
    pasted = statistics.median(times["numba-cuda, callee pasted"])
    device = statistics.median(times["numba-cuda, device function"])
    print(f"{'variant':60} {'median ms':>9} {'/ pasted':>9} {'/ device fn':>11}")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:60} {median:9.1f} {median / pasted:9.2f} {median / device:11.2f}")


if __name__ == "__main__":
    main()
