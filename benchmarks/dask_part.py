"""Part 8: scaling out with Dask -- what overdub costs per task, and what its definitions cost to ship.

Run in a fresh process as ``__main__`` (so its definitions are a notebook's, shipped by value):

    python benchmarks/dask_part.py [--quick] [--workers 2] [--gpu]

It starts one ``LocalCluster`` (worker processes) and, on that same cluster, times a graph of many small
chunks mapped with

* overdub, the kernel in an importable module (``x.map_blocks(run_module)``), then
* overdub, the kernel and its generic function defined in ``__main__`` (the notebook graph),
* ``od.map_blocks`` over the module's kernel,
* ``numba.njit`` over each chunk, and plain numpy,

and with ``--gpu`` (cupy chunks, dask-cuda's ``LocalCUDACluster`` when installed) the same with the CUDA
target against numba-cuda and cupy. Each graph is computed once to warm up (compiles) and then timed; the
per-task figure is the graph's time over its tasks. It also measures, in this process, the receiving side's
check when nothing changed (``arrival.adopt`` of the snapshot adopted last, and a generic function's whole
unpickling) and the snapshot's bytes per generic function. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import cuda

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import overdub as od  # noqa: E402
from overdub import registry  # noqa: E402
from overdub.travel import arrival, defs, origins, snapshots  # noqa: E402
from overdub.travel.tasks import reduce_def  # noqa: E402

LIB = """
import numba
import numpy as np
import overdub as od
from numba import cuda

@od.function
def f(x: od.Float):
    return 2.0 * x + 1.0

def kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = f(x[i])

def run_module(block):
    xp = np if isinstance(block, np.ndarray) else __import__("cupy")
    out = xp.empty_like(block)
    od.cuda(kernel, out, block, blocks=(block.size + 127) // 128, threads=128, target=TARGET)
    return out

@numba.njit(cache=False)
def njit_chunk(x):
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = 2.0 * x[i] + 1.0
    return out

def run_njit(block):
    return njit_chunk(block)

def run_numpy(block):
    return 2.0 * block + 1.0

@cuda.jit
def numba_cuda_kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i] + 1.0

def run_numba_cuda(block):
    import cupy
    out = cupy.empty_like(block)
    numba_cuda_kernel[(block.size + 127) // 128, 128](out, block)
    return out

TARGET = "cpu"
"""

lib = None
TARGET = "cpu"


@od.function
def g(x: od.Float):
    return 2.0 * x + 1.0


def main_kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = g(x[i])


def run_main(block):
    xp = np if isinstance(block, np.ndarray) else sys.modules["cupy"]
    out = xp.empty_like(block)
    od.cuda(main_kernel, out, block, blocks=(block.size + 127) // 128, threads=128, target=TARGET)
    return out


def run_main_numpy(block):
    """The same chunk function without overdub, defined in __main__: what a notebook graph costs Dask itself
    (cloudpickle ships it by value, with the modules it names)."""
    out = np.empty_like(block)
    np.multiply(block, 2.0, out=out)
    return out + 1.0


def _graph_seconds(client, array, func, repeats: int) -> float:
    client.compute(array.map_blocks(func)).result()  # warm-up: compiles on every worker
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        client.compute(array.map_blocks(func)).result()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _sync_costs(generic_functions: int) -> dict:
    """The receiving side's check when nothing changed, and the snapshot's bytes per generic function."""
    source = "\n".join(
        f"@od.function\ndef h{i}(x: od.Float):\n    return x + {i}.0\n\n@od.function\ndef h{i}(x: od.Integer):\n"
        f"    return x - {i}\n"
        for i in range(generic_functions)
    )
    module = type(sys)("odbench_sync")
    module.od = od
    sys.modules[module.__name__] = module
    exec(source, vars(module))
    _root, digest, others, blob = snapshots.snapshot()
    n = sum(1 for gf in registry.every_generic_function() if gf.table.methods and snapshots.ships(gf.__module__))
    origins.adopted["digest"] = digest  # as a worker that adopted it: the check is the per-task cost
    loops = 200_000
    start = time.perf_counter()
    for _ in range(loops):
        arrival.adopt("another process", digest, others, blob)
    adopt_us = (time.perf_counter() - start) / loops * 1e6
    data = pickle.dumps(module.h0)
    start = time.perf_counter()
    for _ in range(20_000):
        pickle.loads(data)
    loads_us = (time.perf_counter() - start) / 20_000 * 1e6
    origins.adopted.clear()
    return {
        "sync_check_us": adopt_us,
        "generic_function_unpickle_us": loads_us,
        "snapshot_bytes": len(blob),
        "generic_functions": n,
        "bytes_per_generic_function": len(blob) / max(n, 1),
    }


def _engine_rows(quick: bool) -> dict:
    """Pools and Ray: the per-task time of the notebook's overdub task (a ``__main__`` function launching a
    kernel on a small chunk) against the same engine running the numpy task, and what shipping costs per
    task when nothing changed -- on the client (the task pickled by the engine's pickler) and on the worker
    (a shipped def's arrival: the token's check and the interned def)."""
    import concurrent.futures as cf
    import multiprocessing as mp
    from multiprocessing.reduction import ForkingPickler

    global TARGET
    TARGET = "cpu"  # numpy chunks (a forked child cannot use the parent's CUDA context)

    tasks = 64 if quick else 256
    block = np.arange(256, dtype=np.float64)
    rows: dict = {}

    def per_task(submit_all) -> float:
        submit_all(2)  # warm-up: every worker compiles
        start = time.perf_counter()
        submit_all(tasks)
        return (time.perf_counter() - start) / tasks * 1e6

    engines = {}
    for method in ("fork", "spawn"):
        pool = mp.get_context(method).Pool(2)
        engines[f"multiprocessing.Pool ({method})"] = (pool, lambda fn, n, pool=pool: pool.map(fn, [block] * n))
    executor = cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn"))
    engines["ProcessPoolExecutor (spawn)"] = (executor, lambda fn, n: list(executor.map(fn, [block] * n)))
    try:
        import joblib

        engines["joblib loky"] = (
            None,
            lambda fn, n: joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(fn)(block) for _ in range(n)),
        )
    except ImportError:
        pass
    try:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        remote = ray.remote(lambda fn, b: fn(b))
        engines["Ray tasks"] = (None, lambda fn, n: ray.get([remote.remote(fn, block) for _ in range(n)]))
    except ImportError:
        ray = None
    right = True
    for name, (owner, submit) in engines.items():
        overdub_us = per_task(lambda n, submit=submit: submit(run_main, n))
        numpy_us = per_task(lambda n, submit=submit: submit(run_main_numpy, n))
        right = right and all(np.array_equal(r, 2.0 * block + 1.0) for r in submit(run_main, 4))
        rows[name] = {"overdub_us": overdub_us, "numpy_us": numpy_us, "ratio": overdub_us / numpy_us}
        if owner is not None:
            owner.shutdown() if hasattr(owner, "shutdown") else owner.terminate()
    if ray is not None:
        ray.shutdown()
    loops = 20_000
    start = time.perf_counter()
    for _ in range(loops):
        ForkingPickler.dumps(run_main)
    ship_us = (time.perf_counter() - start) / loops * 1e6
    token, digest, blob = reduce_def(run_main)[1]
    origins.adopted["digest"] = token[1]  # as a worker that adopted it
    start = time.perf_counter()
    for _ in range(loops):
        defs.def_arriving(token, digest, blob)
    arrive_us = (time.perf_counter() - start) / loops * 1e6
    origins.adopted.clear()
    return {"engines": rows, "engines_right": right, "ship_us": ship_us, "arrive_us": arrive_us}


def main() -> None:
    global lib, TARGET
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--gpu", action="store_true")
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="odbench_dask"))
    (folder / "odbench_dasklib.py").write_text(LIB)
    sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(folder), str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    import importlib

    lib = importlib.import_module("odbench_dasklib")
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    chunks, chunk = (64, 1024) if not options.quick else (32, 256)
    repeats = 3 if options.quick else 7
    results: dict = {"tasks": chunks, "chunk": chunk, "workers": options.workers}
    cluster = LocalCluster(n_workers=options.workers, threads_per_worker=1, processes=True)
    client = Client(cluster)
    try:
        x = da.from_array(np.arange(chunks * chunk, dtype=np.float64), chunks=chunk)
        per_task = {
            "overdub (module kernel)": _graph_seconds(client, x, lib.run_module, repeats),
            "overdub (__main__ kernel, notebook graph)": _graph_seconds(client, x, run_main, repeats),
            "numba.njit": _graph_seconds(client, x, lib.run_njit, repeats),
            "numpy": _graph_seconds(client, x, lib.run_numpy, repeats),
            "numpy (__main__ function, notebook graph)": _graph_seconds(client, x, run_main_numpy, repeats),
        }
        run_od = od.map_blocks
        client.compute(run_od(lib.kernel, x)).result()
        start = time.perf_counter()
        for _ in range(repeats):
            client.compute(run_od(lib.kernel, x)).result()
        per_task["od.map_blocks"] = (time.perf_counter() - start) / repeats
        expected = 2.0 * np.arange(chunks * chunk, dtype=np.float64) + 1.0
        results["right"] = bool(
            np.array_equal(client.compute(x.map_blocks(run_main)).result(), expected)
            and np.array_equal(client.compute(x.map_blocks(lib.run_module)).result(), expected)
        )
        results["cpu_graph_ms"] = {k: v * 1e3 for k, v in per_task.items()}
        results["cpu_per_task_us"] = {k: v / chunks * 1e6 for k, v in per_task.items()}
        results["compiles_per_worker"] = client.run(lambda: od.stats()["compiles"])
    finally:
        client.close()
        cluster.close()
    if options.gpu:
        results["gpu"] = _gpu(chunks, chunk, repeats)
    results.update(_engine_rows(options.quick))
    results.update(_sync_costs(20))
    print(json.dumps(results))


def _gpu(chunks: int, chunk: int, repeats: int) -> dict:
    global TARGET
    import cupy
    import dask.array as da
    from dask.distributed import Client

    try:
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(n_workers=1)
    except ImportError:
        from dask.distributed import LocalCluster

        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True)
    TARGET = lib.TARGET = "cuda"
    client = Client(cluster)
    try:
        x = da.from_array(cupy.arange(chunks * chunk, dtype=np.float64), chunks=chunk, asarray=False)
        graphs = {
            "overdub (__main__ kernel, notebook graph)": _graph_seconds(client, x, run_main, repeats),
            "numba-cuda": _graph_seconds(client, x, lib.run_numba_cuda, repeats),
            "cupy": _graph_seconds(client, x, lib.run_numpy, repeats),
        }
        right = np.array_equal(
            client.compute(x.map_blocks(run_main)).result().get(), 2.0 * np.arange(chunks * chunk) + 1.0
        )
        return {"right": bool(right), "graph_ms": {k: v * 1e3 for k, v in graphs.items()}}
    finally:
        client.close()
        cluster.close()


def run(part, quick: bool, has_gpu: bool) -> None:
    """The suite's part 8: this script in a fresh process; its figures as measurements."""
    import subprocess

    command = [sys.executable, str(Path(__file__)), *(["--quick"] if quick else []), *(["--gpu"] if has_gpu else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    part.config.update({k: result[k] for k in ("tasks", "chunk", "workers")})
    for name, us in result["cpu_per_task_us"].items():
        part.measure(f"per task, CPU: {name}", us, "us")
    module, notebook = (
        result["cpu_graph_ms"][k] for k in ("overdub (module kernel)", "overdub (__main__ kernel, notebook graph)")
    )
    part.measure("notebook graph / module graph", notebook / module, "x")
    part.measure("sync check per task (nothing changed)", result["sync_check_us"], "us")
    part.measure("generic function unpickled with the snapshot", result["generic_function_unpickle_us"], "us")
    part.measure("snapshot bytes per generic function", result["bytes_per_generic_function"], "B")
    for name, row in result["engines"].items():
        part.measure(f"per task, CPU, {name}: overdub", row["overdub_us"], "us")
        part.measure(f"per task, CPU, {name}: numpy", row["numpy_us"], "us")
    part.measure("a task's def shipped when nothing changed (client)", result["ship_us"], "us")
    part.measure("a shipped def's arrival when nothing changed (worker)", result["arrive_us"], "us")
    part.target("arrival check per task when nothing changed (us)", result["arrive_us"], "<=", 1.0)
    right = result["right"] and result["engines_right"] and result.get("gpu", {}).get("right", True)
    part.target("every graph's result is the client's", right, "==", True)
    part.target("notebook graph / module graph", notebook / module, "<=", 1.2)
    part.target("sync check per task (us)", result["sync_check_us"], "<=", 1.0)
    part.target("snapshot bytes per generic function", result["bytes_per_generic_function"], "<=", 2048)
    for name, ms in result.get("gpu", {}).get("graph_ms", {}).items():
        part.measure(f"graph of {result['tasks']} cupy chunks: {name}", ms, "ms")


if __name__ == "__main__":
    main()
