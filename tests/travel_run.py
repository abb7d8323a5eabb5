"""A randomized run of overdub's promise across process boundaries (docs/scaling-out.md), on many engines.

After the client -- this script's process, whose own definitions are a notebook's, in ``__main__`` -- changes
something, work run in another process must compute exactly what the client computes now, in this process.

Each step picks an engine (a process pool, a Dask cluster, loky, Ray), a kind of change, and a route by which
the task's code reaches the worker; it makes the change on the client, then runs the task on the engine and in
this process and compares the two with ``numpy.array_equal``. The client's own result is also checked against
a pure-Python formula of the current definitions (the harness's own sanity check: the expected value is the
one *after* the change). Every remote call has a timeout: a timeout is a hang, and the engine is killed and
started afresh at its next use. Values are small multiples of 0.25, so every expected value is exact.

Engines (all on the CPU target): mp-fork, mp-spawn, mp-forkserver (``multiprocessing`` pools), cf-fork,
cf-spawn (``concurrent.futures.ProcessPoolExecutor``), dask-processes, dask-threads (``distributed``), loky
(``joblib``), ray-task (one ``@ray.remote`` function calling the task it is given, and one calling
``mylib.run`` itself), ray-actor (one actor running the task it is given). Each starts at its first use; one
that cannot start is skipped, with the reason in the JSON.

Routes: ``main`` (a ``__main__`` task function), ``module`` (``mylib.run``, importable by reference),
``launch`` (the kernel passed to ``mylib.launch``), ``call_host`` (a generic function passed to
``mylib.call_host``, which calls it on the host), ``closure`` (a task function made by a ``__main__`` factory).
Engines that pickle with the standard pickler (multiprocessing, concurrent.futures) cannot pickle a local
function at all, with or without overdub: they take neither the ``closure`` route nor the ``closure`` change.

Prints one JSON line at the end and exits 1 if any step mismatched, hung or failed:

    python tests/travel_run.py SEED STEPS [--engines a,b,...] [--timeout S] [--restart-rate P]
"""

from __future__ import annotations

import argparse
import collections
import copy
import faulthandler
import importlib
import itertools
import json
import linecache
import multiprocessing
import os
import random
import re
import shutil
import sys
import tempfile
import textwrap
import time
import traceback
from pathlib import Path

import numpy as np
from numba import cuda

import overdub as od

ENGINES = (
    "mp-fork",
    "mp-spawn",
    "mp-forkserver",
    "cf-fork",
    "cf-spawn",
    "dask-processes",
    "dask-threads",
    "loky",
    "ray-task",
    "ray-actor",
)
CHANGES = (
    "redef-main",
    "redef-module",
    "method-added",
    "context",
    "struct",
    "global",
    "table",
    "module-attr",
    "code-swap",
    "closure",
    "reload",
)
ROUTES = ("main", "module", "launch", "call_host", "closure")

# --- the module the run writes: mylib (edited by exec, by __code__ and by reload) and cfg ----------------------

CFG = "K = 1.5\n"

LIB = '''\
"""The run's module: tests/travel_run.py writes it, redefines its methods and reloads it."""

import numpy as np
from numba import cuda

import cfg
import overdub as od


@od.function
def scale(x: od.Float):
    return x * {scale!r}


{pick}


@od.function
def ck(x: od.Float):
    return x + cfg.K


def helper(x):
    return x * {helper!r}


@od.function
def hc(x: od.Float):
    return helper(x) + 0.5


def k_scale(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = scale(x[i])


def k_pick(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = pick(np.float32(x[i])) + 10.0 * pick(x[i]) + 100.0 * pick(np.int64(x[i]))


def k_ck(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ck(x[i])


def k_hc(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = hc(x[i])


KERNELS = {{"scale": k_scale, "pick_mod": k_pick, "ck": k_ck, "hc": k_hc}}


def launch(kernel, x, args=(), context=None):
    """``kernel`` (or each kernel of a tuple, one after the other) over ``x``, the outputs concatenated."""
    outs = []
    for k in kernel if isinstance(kernel, tuple) else (kernel,):
        out = np.zeros_like(x)
        od.cuda(k, out, x, *args, blocks=1, threads=x.size, target="cpu", context=context)
        outs.append(out)
    return np.concatenate(outs)


def where():
    """Where this process found overdub and this module (the run checks its workers import what it does)."""
    return od.__file__, __file__


def run(key, x):
    """A module task function: pickled by reference, it ships nothing itself."""
    return launch(KERNELS[key], x)


def call_host(g, x, make=None, context=None):
    """``g`` called on the host for each element of ``x`` (made into ``make(v)``), in ``context`` if given."""
    values = [float(v) if make is None else make(v) for v in x]
    if context is not None:
        return np.array([float(od.overdub(context, g, v)) for v in values])
    return np.array([float(g(v)) for v in values])
'''

# a method of `pick` per signature: (annotation, body); the kernel calls pick with a float32, a float64, an int64
PICK_SIGS = {
    "Number": ("od.Number", "x + {c!r}"),
    "Float": ("od.Float", "x * {c!r}"),
    "float32": ("od.float32", "x - {c!r}"),
    "float64": ("od.float64", "x * 2.0 + {c!r}"),
    "Integer": ("od.Integer", "x * {c!r}"),
    "int64": ("od.int64", "x + 2.0 * {c!r}"),
}
PICK_PATHS = {  # argument type -> the signatures that apply, most specific first
    "float32": ("float32", "Float", "Number"),
    "float64": ("float64", "Float", "Number"),
    "int64": ("int64", "Integer", "Number"),
}
PICK_FORMULAS = {
    "Number": lambda x, c: x + c,
    "Float": lambda x, c: x * c,
    "float32": lambda x, c: x - c,
    "float64": lambda x, c: x * 2.0 + c,
    "Integer": lambda x, c: x * c,
    "int64": lambda x, c: x + 2.0 * c,
}


def pick_source(methods: dict) -> str:
    return "\n\n".join(
        f"@od.function\ndef pick(x: {PICK_SIGS[sig][0]}):\n    return {PICK_SIGS[sig][1].format(c=c)}\n"
        for sig, c in methods.items()
    )


# in a worker that imports this script (spawn, forkserver: as __mp_main__), the run's folder is on the path
if os.environ.get("OVERDUB_TRAVEL_RUN_DIR"):
    import cfg
    import mylib
else:
    cfg = mylib = None

# --- the notebook's own definitions (this is __main__) ---------------------------------------------------------

K = 3.0
TABLE = np.array([0.5, 0.0])
ctx = od.Context("boost")


@od.function
def shift(x: od.Float):
    return x + 1.0


@od.function
def pick(x: od.Number):
    return x + 1.0


@od.function
def g_ctx(x: od.Float):
    return x + 0.25


@ctx.overdub(g_ctx)
def _(x: od.Float):
    return g_ctx(x) * 3.0


@od.struct
class P:
    a: od.float64
    b: od.float64 = 0.5


@od.function
def pval(p: P):
    return p.a * 2.0 + p.b


@od.function
def gk(x: od.Float):
    return x * K


@od.function
def gtab(x: od.Float):
    return x * TABLE[0]


@od.function
def ga(x: od.Float):
    return x + 1.0


@od.function
def gb(x: od.Float):
    return x * 3.0


def make_gen(c):
    """A generic function made by a factory: its method reads ``c`` from its closure."""

    @od.function
    def g(x: od.Float):
        return x - c

    return g


def make_kernel(gfn):
    """Kernels from one factory: the same code, a different generic function in the cell."""

    def kernel(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = gfn(x[i])

    return kernel


def make_task(kernel, args=(), context=None):
    """A task function made by a factory (the closure route)."""

    def task(x):
        return _launch(kernel, x, args, context)

    return task


def _launch(kernel, x, args=(), context=None):
    outs = []
    for k in kernel if isinstance(kernel, tuple) else (kernel,):
        out = np.zeros_like(x)
        od.cuda(k, out, x, *args, blocks=1, threads=x.size, target="cpu", context=context)
        outs.append(out)
    return np.concatenate(outs)


def k_shift(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = shift(x[i])


def k_scale(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = mylib.scale(x[i])


def k_pick(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = pick(np.float32(x[i])) + 10.0 * pick(x[i]) + 100.0 * pick(np.int64(x[i]))


def k_pickm(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = mylib.pick(np.float32(x[i])) + 10.0 * mylib.pick(x[i]) + 100.0 * mylib.pick(np.int64(x[i]))


def k_ctx(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = g_ctx(x[i])


def k_struct(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = pval(P(x[i]))


def k_struct_arg(out, x, p):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = pval(p) + x[i]


def k_gk(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = gk(x[i])


def k_K(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + K


def k_table(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + TABLE[0]


def k_table_m(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = gtab(x[i])


def k_ck(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = mylib.ck(x[i])


def k_hc(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = mylib.hc(x[i])


# the main route's task functions: __main__ functions reaching their kernel through __main__'s globals


def t_shift(x):
    return _launch(k_shift, x)


def t_scale(x):
    return _launch(k_scale, x)


def t_pick(x):
    return _launch(k_pick, x)


def t_pickm(x):
    return _launch(k_pickm, x)


def t_ctx(x):
    return _launch(k_ctx, x, (), ctx)


def t_struct(x):
    return _launch(k_struct, x)


def t_struct_arg(x, p):
    return _launch(k_struct_arg, x, (p,))


def t_gk(x):
    return _launch(k_gk, x)


def t_K(x):
    return _launch(k_K, x)


def t_table(x):
    return _launch(k_table, x)


def t_table_m(x):
    return _launch(k_table_m, x)


def t_ck(x):
    return _launch(k_ck, x)


def t_hc(x):
    return _launch(k_hc, x)


def t_pair(ka, kb, x):
    return _launch((ka, kb), x)


# Ray's remote functions and actor class (made remote once, when Ray starts)


def _ray_call(fn, *args):
    return fn(*args)


def _ray_run_module(key, x):
    return mylib.run(key, x)


class _RayRunner:
    def run(self, fn, *args):
        return fn(*args)


# --- engines -----------------------------------------------------------------------------------------------


class Hang(Exception):
    """A remote call that did not answer within the timeout."""


class Engine:
    """``submit(fn, *args)`` runs ``fn(*args)`` in another process and returns its value (raises ``Hang``
    past the timeout); ``restart()`` gives fresh workers; ``kill()`` tears everything down (the next submit
    starts afresh)."""

    by_value = True  # does it ship __main__ functions and closures by value (cloudpickle)?
    started = False

    def __init__(self, name: str, timeout: float):
        self.name, self.timeout = name, timeout
        self.rng = random.Random(0)

    def ensure(self) -> None:
        if not self.started:
            self.start()
            self.started = True

    def start(self) -> None:
        raise NotImplementedError

    def submit(self, fn, *args):
        raise NotImplementedError

    def restart(self) -> None:
        self.kill()

    def kill(self) -> None:
        if self.started:
            self.started = False
            try:
                self.stop()
            except Exception as exc:
                print(f"{self.name}: stopping raised {exc!r}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        pass


class MpPool(Engine):
    by_value = False

    def start(self):
        self.pool = multiprocessing.get_context(self.name.split("-")[1]).Pool(2)

    def submit(self, fn, *args):
        result = self.pool.apply_async(fn, args)
        try:
            return result.get(self.timeout)
        except multiprocessing.TimeoutError:
            raise Hang from None

    def stop(self):
        self.pool.terminate()
        self.pool.join()


class CfPool(Engine):
    by_value = False

    def start(self):
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context(self.name.split("-")[1])
        self.executor = ProcessPoolExecutor(2, mp_context=context)

    def submit(self, fn, *args):
        future = self.executor.submit(fn, *args)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise Hang from None

    def stop(self):
        processes = list(getattr(self.executor, "_processes", {}).values())
        for process in processes:
            if process.is_alive():
                process.kill()
        self.executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(10)


class Dask(Engine):
    def start(self):
        import logging

        from distributed import Client, LocalCluster

        logging.getLogger("distributed").setLevel(logging.ERROR)
        processes = self.name == "dask-processes"
        self.cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=processes,
            dashboard_address=":0",
            silence_logs=logging.ERROR,
        )
        self.client = Client(self.cluster)

    def submit(self, fn, *args):
        future = self.client.submit(fn, *args, pure=False)
        try:
            return future.result(timeout=self.timeout)
        except TimeoutError:
            future.cancel()
            raise Hang from None

    def restart(self):
        if self.started and self.name == "dask-processes":
            try:
                self.client.restart(timeout=60)
                return
            except Exception as exc:
                print(f"{self.name}: client.restart() raised {exc!r}: a new cluster", file=sys.stderr, flush=True)
        self.kill()

    def stop(self):
        try:
            self.client.close(timeout=10)
        finally:
            self.cluster.close(timeout=10)


class Loky(Engine):
    def start(self):
        import joblib

        self.joblib = joblib

    def submit(self, fn, *args):
        parallel = self.joblib.Parallel(n_jobs=2, backend="loky", timeout=self.timeout)  # the reusable executor
        try:
            [value] = parallel([self.joblib.delayed(fn)(*args)])
        except (TimeoutError, multiprocessing.TimeoutError):
            raise Hang from None
        return value

    def stop(self):
        from joblib.externals.loky import get_reusable_executor

        get_reusable_executor().shutdown(wait=False, kill_workers=True)


class RaySession:
    """One Ray runtime for both Ray engines; ``generation`` counts its starts (an engine's handles are made
    again once it changed)."""

    generation = 0
    up = False

    @classmethod
    def ensure(cls):
        import ray

        if not cls.up:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
            cls.up = True
            cls.generation += 1
        return ray

    @classmethod
    def shutdown(cls):
        if cls.up:
            import ray

            cls.up = False
            ray.shutdown()


class Ray(Engine):
    generation = 0

    def start(self):
        self.ray = RaySession.ensure()
        self.generation = RaySession.generation
        if self.name == "ray-task":  # defined once: Ray exports a remote function once
            self.call = self.ray.remote(_ray_call)
            self.run_module = self.ray.remote(_ray_run_module)
        else:
            self.actor = self.ray.remote(_RayRunner).remote()

    def submit(self, fn, *args):
        if self.generation != RaySession.generation or not RaySession.up:  # the other Ray engine restarted it
            self.start()
        if self.name == "ray-actor":
            ref = self.actor.run.remote(fn, *args)
        elif fn is getattr(mylib, "run", None) and self.rng.random() < 0.5:
            ref = self.run_module.remote(*args)  # the remote function that calls mylib.run itself
        else:
            ref = self.call.remote(fn, *args)
        try:
            return self.ray.get(ref, timeout=self.timeout)
        except self.ray.exceptions.GetTimeoutError:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass
            raise Hang from None

    def restart(self):
        if self.started and self.name == "ray-actor" and RaySession.up:
            self.ray.kill(self.actor)
            self.actor = self.ray.remote(_RayRunner).remote()
            return
        self.kill()

    def stop(self):
        RaySession.shutdown()


def make_engine(name: str, timeout: float) -> Engine:
    kind = {"mp": MpPool, "cf": CfPool, "dask": Dask, "loky": Loky, "ray": Ray}[name.split("-")[0]]
    return kind(name, timeout)


# --- the client's changes and what each step computes ------------------------------------------------------

_cells = itertools.count()


def run_cell(source: str, namespace: dict) -> None:
    """Run ``source`` in ``namespace`` as a notebook cell runs: compiled under a name of its own, its source
    in ``linecache`` (as IPython keeps it)."""
    source = textwrap.dedent(source)
    name = f"<travel-cell-{next(_cells)}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), namespace)


class Run:
    """The client's state (every constant the current definitions hold), its changes and the oracle."""

    def __init__(self, rng: random.Random, folder: Path):
        self.rng, self.folder = rng, folder
        self.s = {
            "shift": 1.0,
            "scale": 2.0,
            "pick": {"main": {"Number": 1.0}, "mod": {"Number": 1.0}},
            "ctx": 3.0,
            "struct": (2.0, 0.5),
            "K": 3.0,
            "T0": 0.5,
            "cfgK": 1.5,
            "helper": 2.0,
            "pair": [("ga", 1.0), ("gb", 3.0)],
        }
        self.pair_kernels = (make_kernel(ga), make_kernel(gb))
        self.ga, self.gb = 1.0, 3.0
        self.reached: list[str] = []  # the argument types whose dispatch the last method added changed

    def value(self, *avoid: float) -> float:
        """A small multiple of 0.25, not zero and none of ``avoid`` (so each change is observable)."""
        while True:
            v = self.rng.randint(-32, 32) / 4
            if v and v not in avoid:
                return v

    def write_lib(self) -> None:
        path = self.folder / "mylib.py"
        path.write_text(
            LIB.format(scale=self.s["scale"], helper=self.s["helper"], pick=pick_source(self.s["pick"]["mod"]))
        )
        shutil.rmtree(self.folder / "__pycache__", ignore_errors=True)
        stamp = time.time_ns() + 10**9 * next(_cells)  # a new mtime, whatever the clock's resolution
        os.utime(path, ns=(stamp, stamp))

    # each change returns the subjects whose result it changes (the step runs one of them)

    def change(self, kind: str) -> tuple[str, str]:
        """Make a change of ``kind`` on the client; returns (subject, variant)."""
        return getattr(self, "c_" + kind.replace("-", "_"))()

    def c_redef_main(self):
        c = self.s["shift"] = self.value(self.s["shift"])
        run_cell(f"@od.function\ndef shift(x: od.Float):\n    return x + {c!r}\n", globals())
        return "shift", ""

    def c_redef_module(self):
        c = self.s["scale"] = self.value(self.s["scale"])
        run_cell(f"@od.function\ndef scale(x: od.Float):\n    return x * {c!r}\n", vars(mylib))
        return "scale", "exec"

    def c_method_added(self):
        owner = self.rng.choice(["main", "mod"])
        methods = self.s["pick"][owner]
        namespace = globals() if owner == "main" else vars(mylib)
        variant = "added"
        missing = [sig for sig in PICK_SIGS if sig not in methods and self.reaches(methods, sig)]
        if not missing:  # every signature is there: a new generic function of the name, then a method added
            del namespace["pick"]
            c = self.value()
            methods.clear()
            methods["Number"] = c
            run_cell(f"@od.function\ndef pick(x: od.Number):\n    return x + {c!r}\n", namespace)
            missing = [sig for sig in PICK_SIGS if sig not in methods and self.reaches(methods, sig)]
            variant = "new generic function, added"
        sig = self.rng.choice(missing)
        self.reached = [t for t, chain in PICK_PATHS.items() if sig in chain and self.reaches(methods, sig, t)]
        if variant != "added":
            self.reached = list(PICK_PATHS)
        c = methods[sig] = self.value()
        annotation, body = PICK_SIGS[sig]
        run_cell(f"@od.function\ndef pick(x: {annotation}):\n    return {body.format(c=c)}\n", namespace)
        return ("pick_main" if owner == "main" else "pick_mod"), f"{variant} {sig} in {owner}"

    @staticmethod
    def reaches(methods: dict, sig: str, argtype: str | None = None) -> bool:
        """Would a method of ``sig`` be what a call with an argument of ``argtype`` (any, if None) reaches?"""
        for t, chain in PICK_PATHS.items():
            if argtype in (None, t) and sig in chain and next(s for s in chain if s in methods or s == sig) == sig:
                return True
        return False

    def c_context(self):
        c = self.s["ctx"] = self.value(self.s["ctx"])
        anew = self.rng.random() < 0.25
        cell = 'ctx = od.Context("boost")\n\n\n' if anew else ""
        cell += f"@ctx.overdub(g_ctx)\ndef _(x: od.Float):\n    return g_ctx(x) * {c!r}\n"
        run_cell(cell, globals())
        return "ctx", "context made anew" if anew else "overdub redefined"

    def c_struct(self):
        m0, b0 = self.s["struct"]
        m, b = self.s["struct"] = (self.value(m0), self.value(b0))
        run_cell(
            f"""
            @od.struct
            class P:
                a: od.float64
                b: od.float64 = {b!r}


            @od.function
            def pval(p: P):
                return p.a * {m!r} + p.b
            """,
            globals(),
        )
        return self.rng.choice(["struct_in", "struct_arg"]), ""

    def c_global(self):
        c = self.s["K"] = self.value(self.s["K"])
        run_cell(f"K = {c!r}\n", globals())
        return self.rng.choice(["gk", "K"]), ""

    def c_table(self):
        v = self.s["T0"] = self.value(self.s["T0"])
        TABLE[0] = v
        return self.rng.choice(["table", "table_m"]), ""

    def c_module_attr(self):
        cfg.K = self.s["cfgK"] = self.value(self.s["cfgK"])
        return "ck", ""

    def c_code_swap(self):
        c = self.s["helper"] = self.value(self.s["helper"])
        namespace: dict = {}
        run_cell(f"def helper(x):\n    return x * {c!r}\n", namespace)
        mylib.helper.__code__ = namespace["helper"].__code__
        return "hc", ""

    def c_closure(self):
        if self.rng.random() < 0.5:
            self.ga, self.gb = self.value(self.ga), self.value(self.gb)
            run_cell(f"@od.function\ndef ga(x: od.Float):\n    return x + {self.ga!r}\n", globals())
            run_cell(f"@od.function\ndef gb(x: od.Float):\n    return x * {self.gb!r}\n", globals())
            pair = [("ga", self.ga, ga), ("gb", self.gb, gb)]
            variant = "ga, gb redefined"
        else:
            c1 = self.value(*(c for _, c in self.s["pair"]))
            c2 = self.value(c1, *(c for _, c in self.s["pair"]))
            pair = [("gen", c1, make_gen(c1)), ("gen", c2, make_gen(c2))]
            variant = "generic functions from a factory"
        self.rng.shuffle(pair)
        self.s["pair"] = [(kind, c) for kind, c, _ in pair]
        self.pair_kernels = tuple(make_kernel(g) for _, _, g in pair)
        return "pair", variant

    def c_reload(self):
        self.s["scale"] = self.value(self.s["scale"])
        self.s["helper"] = self.value(self.s["helper"])
        self.write_lib()
        importlib.invalidate_caches()
        importlib.reload(mylib)
        return self.rng.choice(["scale", "hc"]), ""

    # the oracle: what the current definitions compute, in plain Python

    def pick_value(self, owner: str, argtype: str, x: float) -> float:
        methods = self.s["pick"][owner]
        sig = next(sig for sig in PICK_PATHS[argtype] if sig in methods)
        return PICK_FORMULAS[sig](x, methods[sig])

    def oracle(self, subject: str, x: np.ndarray, host: str | None, args: tuple) -> np.ndarray:
        """``subject``'s value over ``x``: its kernel's (``host`` None) or a host call's, with arguments of
        type ``host`` (float64, float32, int64)."""
        s = self.s
        if subject.startswith("pick"):
            owner = "main" if subject == "pick_main" else "mod"
            if host is not None:
                return np.array([self.pick_value(owner, host, v) for v in x])
            return np.array(
                [
                    self.pick_value(owner, "float32", v)
                    + 10.0 * self.pick_value(owner, "float64", v)
                    + 100.0 * self.pick_value(owner, "int64", v)
                    for v in x
                ]
            )
        if subject == "pair":
            formulas = {"ga": lambda v, c: v + c, "gb": lambda v, c: v * c, "gen": lambda v, c: v - c}
            return np.concatenate([np.array([formulas[kind](v, c) for v in x]) for kind, c in s["pair"]])
        m, b = s["struct"]
        formula = {
            "shift": lambda v: v + s["shift"],
            "scale": lambda v: v * s["scale"],
            "ctx": lambda v: (v + 0.25) * s["ctx"],
            "struct_in": lambda v: v * m + b,
            "struct_arg": lambda v: args[0].a * m + b + v,
            "gk": lambda v: v * s["K"],
            "K": lambda v: v + s["K"],
            "table": lambda v: v + s["T0"],
            "table_m": lambda v: v * s["T0"],
            "ck": lambda v: v + s["cfgK"],
            "hc": lambda v: v * s["helper"] + 0.5,
        }[subject]
        return np.array([formula(v) for v in x])


# subject -> (main task function, __main__ kernel, mylib.KERNELS key or None, host call: (generic fn, makes))
def subjects() -> dict:
    return {
        "shift": (t_shift, k_shift, None, (shift, [None])),
        "scale": (t_scale, k_scale, "scale", (mylib.scale, [None])),
        "pick_main": (t_pick, k_pick, None, (pick, [None, np.float32, np.int64])),
        "pick_mod": (t_pickm, k_pickm, "pick_mod", (mylib.pick, [None, np.float32, np.int64])),
        "ctx": (t_ctx, k_ctx, None, (g_ctx, [None])),
        "struct_in": (t_struct, k_struct, None, (pval, [P])),
        "struct_arg": (t_struct_arg, k_struct_arg, None, None),
        "gk": (t_gk, k_gk, None, (gk, [None])),
        "K": (t_K, k_K, None, None),
        "table": (t_table, k_table, None, None),
        "table_m": (t_table_m, k_table_m, None, (gtab, [None])),
        "ck": (t_ck, k_ck, "ck", (mylib.ck, [None])),
        "hc": (t_hc, k_hc, "hc", (mylib.hc, [None])),
        "pair": (t_pair, None, None, None),
    }


X = object()  # in a task's arguments: the step's input array
HOST_TYPES = {None: "float64", np.float32: "float32", np.int64: "int64"}


def routes_for(subject: str, engine: Engine) -> list[str]:
    _, _, module_key, host = subjects()[subject]
    routes = ["main", "launch"]
    if module_key is not None:
        routes.append("module")
    if host is not None:
        routes.append("call_host")
    if engine.by_value:
        routes.append("closure")
    return routes


def build(run: Run, subject: str, route: str) -> tuple[object, tuple, str | None, tuple, str]:
    """The task of a step: (fn, args, host type or None, kernel args, description)."""
    rng = run.rng
    main_task, main_kernel, module_key, host = subjects()[subject]
    kernel_args: tuple = ()
    context = ctx if subject == "ctx" else None
    if subject == "struct_arg":
        kernel_args = (P(rng.randint(-8, 8) / 4),)
    if subject == "pair":
        kernel = run.pair_kernels
        where = "factory kernels"
    elif module_key is not None and rng.random() < 0.5:
        kernel, where = mylib.KERNELS[module_key], "mylib kernel"
    else:
        kernel, where = main_kernel, "__main__ kernel"
    if route == "main":
        if subject == "pair":
            return main_task, (*run.pair_kernels, X), None, (), main_task.__name__
        return main_task, (X, *kernel_args), None, kernel_args, main_task.__name__
    if route == "module":
        return mylib.run, (module_key, X), None, (), f"mylib.run({module_key!r})"
    if route == "launch":
        return mylib.launch, (kernel, X, kernel_args, context), None, kernel_args, f"mylib.launch({where})"
    if route == "call_host":
        g, makes = host
        if subject.startswith("pick") and run.reached:
            makes = [m for m in makes if HOST_TYPES[m] in run.reached]
        make = rng.choice(makes)
        name = getattr(make, "__name__", "float")
        return (mylib.call_host, (g, X, make, context), HOST_TYPES.get(make, "float64"), (), f"call_host({name})")
    if route == "closure":
        return make_task(kernel, kernel_args, context), (X,), None, kernel_args, f"make_task({where})"
    raise ValueError(route)


class Cycle:
    """Items in successive random permutations; ``take(ok)`` takes the first queued item ``ok`` accepts."""

    def __init__(self, rng: random.Random, items):
        self.rng, self.items, self.queue = rng, list(items), []

    def take(self, ok=lambda item: True):
        for _ in range(3):
            for i, item in enumerate(self.queue):
                if ok(item):
                    return self.queue.pop(i)
            fresh = self.items[:]
            self.rng.shuffle(fresh)
            self.queue.extend(fresh)
        raise LookupError("no item is acceptable")

    def remove(self, item):
        self.items.remove(item)
        self.queue = [i for i in self.queue if i != item]


def short(exc: BaseException) -> str:
    """One line: the exception's type and message (a Ray task error's cause; long ones cut in the middle)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        return f"{type(exc).__name__}({short(cause)})"
    text = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(exc).__name__}: {exc}")
    text = " | ".join(line.strip() for line in text.splitlines() if line.strip() and set(line.strip()) != {"^"})
    return text if len(text) <= 400 else text[:240] + " ... " + text[-160:]


class Tally:
    """Counts per change kind, engine and route, and failures per (engine, route, change)."""

    KINDS = ("mismatch", "error", "hang", "client_wrong")

    def __init__(self):
        self.counts = {key: collections.Counter() for key in ("changes", "engines", "routes", "actions")}
        self.combos: dict = collections.defaultdict(lambda: dict.fromkeys(("steps", *self.KINDS, "first"), 0))
        self.totals: collections.Counter = collections.Counter()
        self.failures: list[str] = []

    def fail(self, what: str, combo: tuple, message: str) -> None:
        self.totals[what] += 1
        entry = self.combos[combo]
        entry[what] += 1
        entry["first"] = entry["first"] or message[:300]
        if len(self.failures) < 12:
            self.failures.append(message[:600])
        print(f"FAILED {message}", file=sys.stderr, flush=True)

    def failing(self) -> dict:
        return {
            " / ".join(combo): {"failed": sum(e[k] for k in self.KINDS), "of": e["steps"], "first": e["first"]}
            for combo, e in sorted(self.combos.items())
            if sum(e[k] for k in self.KINDS)
        }


def step_once(step: int, run: Run, engine: Engine, kind: str, tally: Tally, timeout: float) -> None:
    """One step: the change, then the task on ``engine`` and here (in a random order), then the comparisons."""
    rng = run.rng
    before = copy.deepcopy(run.s)
    try:
        subject, variant = run.change(kind)
    except Exception as exc:  # the client refused its own change: counted, and the run goes on
        combo = (engine.name, "-", kind)
        tally.combos[combo]["steps"] += 1
        tally.fail("error", combo, f"step {step} {engine.name} {kind}: the change raised {short(exc)}")
        traceback.print_exc()
        return
    route = rng.choice(routes_for(subject, engine))
    combo = (engine.name, route, kind)
    tally.combos[combo]["steps"] += 1
    for key, value in (("changes", kind), ("engines", engine.name), ("routes", route)):
        tally.counts[key][value] += 1

    # the harness's own check: what is due now differs from what was due before the change (else new inputs)
    for _ in range(20):
        x = np.array(rng.sample(range(-4, 5), 4), dtype=np.float64)
        fn, args, host, kernel_args, what = build(run, subject, route)
        args = tuple(x if a is X else a for a in args)
        due = run.oracle(subject, x, host, kernel_args)
        after, run.s = run.s, before
        try:
            unobservable = np.array_equal(run.oracle(subject, x, host, kernel_args), due)
        finally:
            run.s = after
        if not unobservable:
            break
    else:
        tally.totals["unobservable"] += 1
    label = f"step {step} {engine.name} {route} {kind} [{subject}{': ' + variant if variant else ''}; {what}]"

    expected = got = None
    for side in ("local", "remote") if rng.random() < 0.5 else ("remote", "local"):
        if side == "local":
            try:
                expected = fn(*args)
            except Exception as exc:
                tally.fail("error", combo, f"{label}: the client raised {short(exc)}")
                traceback.print_exc()
                return
            continue
        try:
            got = engine.submit(fn, *args)
        except Hang:
            tally.fail("hang", combo, f"{label}: no answer in {timeout:g} s")
            engine.kill()
            return
        except Exception as exc:
            tally.fail("error", combo, f"{label}: {short(exc)}")
            if any(word in type(exc).__name__ for word in ("Broken", "Died", "Killed", "Unavailable")):
                engine.kill()
            return
    if not np.array_equal(np.asarray(expected), due):
        tally.fail("client_wrong", combo, f"{label}: the client computed {expected}, {due} is due")
    if not np.array_equal(np.asarray(got), np.asarray(expected)):
        tally.fail("mismatch", combo, f"{label}: got {got}, the client computes {expected}")
    print(f"{label} done", file=sys.stderr, flush=True)


def main() -> int:
    global cfg, mylib
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seed", type=int)
    parser.add_argument("steps", type=int)
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated, of: " + ", ".join(ENGINES))
    parser.add_argument("--changes", default=",".join(CHANGES), help="comma-separated, of: " + ", ".join(CHANGES))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each remote call")
    parser.add_argument("--restart-rate", type=float, default=0.03, help="chance a step first restarts its engine")
    options = parser.parse_args()
    names = [n for n in options.engines.split(",") if n]
    kinds = [k for k in options.changes.split(",") if k]
    for bad in [n for n in names if n not in ENGINES] + [k for k in kinds if k not in CHANGES]:
        parser.error(f"unknown engine or change {bad!r}")

    rng = random.Random(options.seed)
    folder = Path(tempfile.mkdtemp(prefix="odtravel"))
    (folder / "cfg.py").write_text(CFG)
    run = Run(rng, folder)
    run.write_lib()
    # before any engine starts: the workers find mylib and cfg, and share a disk cache of the run's own
    sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [str(folder), os.environ.get("PYTHONPATH", "")] if p)
    os.environ["OVERDUB_TRAVEL_RUN_DIR"] = str(folder)
    os.environ.setdefault("OVERDUB_CACHE_DIR", str(folder / "cache"))
    importlib.invalidate_caches()
    cfg = importlib.import_module("cfg")
    mylib = importlib.import_module("mylib")

    engines = {name: make_engine(name, options.timeout) for name in names}
    for engine in engines.values():
        engine.rng = random.Random(rng.random())
    engine_cycle, change_cycle = Cycle(rng, names), Cycle(rng, kinds)
    tally = Tally()
    skipped: dict[str, str] = {}
    startup: dict[str, float] = {}
    began = time.perf_counter()
    step = 0
    try:
        while step < options.steps and engine_cycle.items:
            faulthandler.dump_traceback_later(max(4 * options.timeout, 180), exit=True)  # the client hanging
            name = engine_cycle.take()
            engine = engines[name]
            if not engine.started and name not in startup:  # its first use
                t0 = time.perf_counter()
                try:
                    engine.ensure()
                except Exception as exc:  # an engine that cannot start (not installed, say): skipped
                    skipped[name] = short(exc)
                    engine_cycle.remove(name)
                    print(f"{name}: skipped ({short(exc)})", file=sys.stderr, flush=True)
                    continue
                timeout, engine.timeout = engine.timeout, max(engine.timeout, 120.0)  # its workers' start too
                try:  # its workers must import the overdub this process does, and find the run's module
                    found = tuple(engine.submit(mylib.where))
                except Hang:
                    found = (f"no answer to mylib.where() in {engine.timeout:g} s",)
                    tally.fail("hang", (name, "-", "-"), f"{name}: {found[0]}")
                except Exception as exc:  # an engine that started and cannot run a module function: an error
                    found = (short(exc),)
                    traceback.print_exc()
                    tally.fail("error", (name, "-", "-"), f"{name}: mylib.where() on its workers raised {found[0]}")
                finally:
                    engine.timeout = timeout
                if found != (od.__file__, mylib.__file__):
                    here = (od.__file__, mylib.__file__)
                    skipped[name] = found[0] if len(found) == 1 else f"its workers import {found}, this process {here}"
                    engine_cycle.remove(name)
                    engine.kill()
                    print(f"{name}: skipped ({skipped[name]})", file=sys.stderr, flush=True)
                    continue
                startup[name] = round(time.perf_counter() - t0, 2)
            elif engine.started and rng.random() < options.restart_rate:
                tally.counts["actions"][f"restart {name}"] += 1
                try:
                    engine.restart()
                except Exception as exc:
                    print(f"{name}: restart raised {short(exc)}: killed", file=sys.stderr, flush=True)
                    engine.kill()
            try:
                engine.ensure()  # again after a hang or a restart
            except Exception as exc:
                tally.fail("error", (name, "-", "-"), f"step {step} {name}: could not start again: {short(exc)}")
                step += 1
                continue
            by_value = engine.by_value
            kind = change_cycle.take(lambda k: by_value or k != "closure")  # noqa: B023 (used at once)
            step_once(step, run, engine, kind, tally, options.timeout)
            step += 1
    finally:
        faulthandler.dump_traceback_later(120, exit=True)  # a teardown that hangs ends the run all the same
        for engine in engines.values():
            engine.kill()
        faulthandler.cancel_dump_traceback_later()
        shutil.rmtree(folder, ignore_errors=True)

    totals = tally.totals
    result = {
        "seed": options.seed,
        "steps": step,
        "changes": dict(sorted(tally.counts["changes"].items())),
        "engines": dict(sorted(tally.counts["engines"].items())),
        "routes": dict(sorted(tally.counts["routes"].items())),
        "actions": dict(sorted(tally.counts["actions"].items())),
        "mismatches": totals["mismatch"],
        "hangs": totals["hang"],
        "errors": totals["error"],
        "client_wrong": totals["client_wrong"],
        "unobservable_changes": totals["unobservable"],
        "failures": tally.failures,
        "failing": tally.failing(),
        "skipped": skipped,
        "startup_seconds": startup,
        "not_applicable": "mp-*, cf-*: the closure route and the closure change (the standard pickler cannot "
        "pickle a local function, with or without overdub)",
        "seconds": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(result), flush=True)
    bad = totals["mismatch"] + totals["hang"] + totals["error"] + totals["client_wrong"]
    return 1 if bad or step < options.steps else 0


if __name__ == "__main__":
    sys.exit(main())
