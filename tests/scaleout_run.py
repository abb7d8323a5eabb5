"""A randomized run of client-side redefinitions against Dask workers (docs/scaling-out.md).

Run as a script -- its own definitions are a notebook's, in ``__main__`` -- it starts a ``LocalCluster`` of
worker processes (or takes ``--scheduler``), then takes ``STEPS`` random steps. Each step changes something on
the client -- a method of a module's generic function redefined by ``exec`` or by editing the file and
``importlib.reload``, a ``__main__`` generic function redefined, a new method, a context's overdub redefined,
``client.restart()``, a worker killed -- then computes a graph on the workers and compares it with what the
client computes now, in this process. Every graph has a timeout: a hang is a failure. Prints one JSON line:
steps, graphs, mismatches, hangs, actions taken, seconds.

    python tests/scaleout_run.py SEED STEPS [--workers N] [--target cpu|cuda] [--cuda-cluster]
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import random
import signal
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
from numba import cuda

import overdub as od

LIB = """
import overdub as od
from numba import cuda

C = {c}

@od.function
def scale(x: od.Float):
    return x * C

boost = od.Context("boost")

@boost.overdub(scale)
def _(x: od.Float):
    return scale(x) + 0.5

def kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = scale(x[i])
"""

# the notebook's own definitions (this is __main__: they travel by value)


@od.function
def shift(x: od.Float):
    return x + 1.0


def _diagnose(client) -> str:
    """What a hung graph's tasks are doing: their states on the scheduler, the workers it knows, and the
    stacks of the tasks running on them."""
    try:
        states = client.run_on_scheduler(
            lambda dask_scheduler: dict(collections.Counter(ts.state for ts in dask_scheduler.tasks.values()))
        )
        workers = list(client.scheduler_info()["workers"])
        stacks = client.call_stack()
        return json.dumps({"task states": states, "workers": workers, "stacks": stacks}, default=str)[:6000]
    except Exception as exc:
        return f"(no diagnosis: {exc!r})"


def main_kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = shift(lib.scale(x[i]))


def run_main(block):
    """A task function of __main__ (cloudpickle ships it by value, with its global ``od``)."""
    xp = sys.modules.get("cupy") if type(block).__module__.startswith("cupy") else np
    out = xp.empty_like(block)
    od.cuda(main_kernel, out, block, blocks=1, threads=block.size, target=TARGET)
    return out


def run_context(block):
    xp = sys.modules.get("cupy") if type(block).__module__.startswith("cupy") else np
    out = xp.empty_like(block)
    od.cuda(lib.kernel, out, block, blocks=1, threads=block.size, target=TARGET, context=lib.boost)
    return out


def where():
    """The worker's GPU, as the task sees it (dask-cuda gives each worker its own)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


TARGET = "cpu"
lib = None  # the module under test, imported in main()


def _exec(source: str, namespace: dict) -> None:
    exec(compile(textwrap.dedent(source), "<cell>", "exec"), namespace)


def main() -> None:
    global TARGET, lib
    parser = argparse.ArgumentParser()
    parser.add_argument("seed", type=int)
    parser.add_argument("steps", type=int)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--cuda-cluster", action="store_true")
    parser.add_argument("--timeout", type=float, default=120.0)
    # how many times the definition changes outnumber restarts and kills (1: each 1 step in 10)
    parser.add_argument("--calm", type=int, default=1)
    options = parser.parse_args()
    TARGET = options.target
    rng = random.Random(options.seed)
    folder = Path(tempfile.mkdtemp(prefix="odscale"))
    name = f"odscale_lib_{os.getpid()}"
    (folder / f"{name}.py").write_text(LIB.format(c=2.0))
    sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])
    lib = importlib.import_module(name)

    import dask
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    dask.config.set({"distributed.scheduler.allowed-failures": 10})
    if options.cuda_cluster:
        import cupy as xp
        from dask_cuda import LocalCUDACluster

        def new_cluster():
            cluster = LocalCUDACluster(n_workers=options.workers)
            return cluster, Client(cluster)
    else:
        xp = np

        def new_cluster():
            cluster = LocalCluster(n_workers=options.workers, threads_per_worker=2, processes=True)
            return cluster, Client(cluster)

    cluster, client = new_cluster()
    host = np.arange(64.0)
    x = da.from_array(xp.asarray(host), chunks=8, asarray=False)
    counts: collections.Counter = collections.Counter()
    graphs = mismatches = hangs = errors = new_clusters = 0
    failures: list[str] = []
    began = time.perf_counter()
    try:
        for step in range(options.steps):
            changes = ["exec", "exec", "reload", "main", "main", "new method", "context", "none"]
            action = rng.choice(changes * options.calm + ["restart", "kill"])
            counts[action] += 1
            c = round(rng.uniform(-4, 4), 2)
            if action == "exec":  # a notebook cell redefining the module's method
                _exec(f"@od.function\ndef scale(x: od.Float):\n    return x * {c}\n", vars(lib))
            elif action == "reload":  # the file edited, then importlib.reload
                (folder / f"{name}.py").write_text(LIB.format(c=c))
                importlib.invalidate_caches()
                lib = importlib.reload(lib)
            elif action == "main":  # a __main__ generic function redefined
                _exec(f"@od.function\ndef shift(x: od.Float):\n    return x + {c}\n", globals())
            elif action == "new method":  # a more specific method, or its redefinition
                _exec(f"@od.function\ndef scale(x: od.float64):\n    return x * {c} - 1.0\n", vars(lib))
            elif action == "context":
                _exec(f"@boost.overdub(scale)\ndef _(x: od.Float):\n    return scale(x) + {c}\n", vars(lib))
            elif action == "restart":
                try:
                    client.restart(timeout=45)
                except Exception:  # distributed's restart can wait forever for a worker killed just before
                    new_clusters += 1  # (it does so without overdub too): a fresh cluster is a restart too
                    client.close()
                    cluster.close()
                    cluster, client = new_cluster()
            elif action == "kill":
                address, pid = rng.choice(sorted(client.run(os.getpid).items()))
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 120
                while address in client.scheduler_info()["workers"] and time.monotonic() < deadline:
                    time.sleep(0.1)  # until the scheduler has seen the death (its nanny starts another)
                try:  # a worker that runs a task without overdub: the cluster is whole again
                    client.wait_for_workers(options.workers, timeout=60)
                    client.submit(os.getpid, pure=False).result(timeout=60)
                except Exception:  # distributed's nanny may not start another (it does so without overdub too)
                    new_clusters += 1
                    client.close()
                    cluster.close()
                    cluster, client = new_cluster()
            print(f"step {step}: {action} ({time.perf_counter() - began:.1f} s)", file=sys.stderr, flush=True)
            for run in (run_main, run_context):
                expected = run(host.copy() if xp is np else xp.asarray(host))
                expected = expected if xp is np else expected.get()
                graphs += 1
                try:
                    future = client.compute(x.map_blocks(run))
                    got = future.result(timeout=options.timeout)
                except TimeoutError:
                    hangs += 1
                    failures.append(f"step {step} ({action}): {run.__name__} timed out")
                    print(f"HANG at step {step}: {_diagnose(client)}", file=sys.stderr, flush=True)
                    continue
                except Exception as exc:  # a task failed: counted, and the run goes on
                    errors += 1
                    failures.append(f"step {step} ({action}): {run.__name__} raised {type(exc).__name__}: {exc}")
                    continue
                got = got if xp is np else got.get()
                if not np.array_equal(got, expected):
                    mismatches += 1
                    failures.append(f"step {step} ({action}): {run.__name__} {got[:3]} != {expected[:3]}")
        gpus = sorted(set(client.run(where).values())) if options.cuda_cluster else []
    finally:
        client.close()
        cluster.close()
    print(
        json.dumps(
            {
                "seed": options.seed,
                "steps": options.steps,
                "workers": options.workers,
                "graphs": graphs,
                "mismatches": mismatches,
                "hangs": hangs,
                "errors": errors,
                "restarts_by_a_new_cluster": new_clusters,
                "actions": dict(counts),
                "failures": failures[:10],
                "gpus": gpus,
                "seconds": round(time.perf_counter() - began, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
