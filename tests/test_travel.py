"""overdub across processes (overdub/travel/, overdub/scaleout.py, docs/scaling-out.md): a process's
definitions travel with its work -- pickled generic functions, shipped kernels, the cloudpickled ``overdub``
module -- and the receiving process adopts them; kernels arriving by value are interned by content; what
cannot travel fails on the sender, and what fails to arrive makes a launch an error, never stale code."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import overdub as od
from helpers import last_json, run_python
from overdub import byvalue, world
from overdub.runtime import runtime
from overdub.travel import arrival, defs, interning, origins, snapshots
from overdub.travel.shipped import Shipped
from overdub.travel.tasks import _with_token

SOURCE = """
import numpy as np
import overdub as od
from numba import cuda

@od.function
def g(x: od.Float):
    return x + 1.0

def kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = g(x[i])

def other(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * 3.0

def run_here(x):
    out = np.zeros_like(x)
    od.cuda(kernel, out, x, blocks=1, threads=x.size, target="cpu")
    return out.tolist()
"""


@pytest.fixture(autouse=True)
def as_sender():
    """Each test starts as a process that adopted nothing (what it adopts is kept across runtime.reset()), with
    the definitions earlier tests left collected: a snapshot leaves out what died, so one collected between two
    snapshots a test compares would change the second."""
    gc.collect()
    yield
    for kept in (origins.adopted, arrival._failed, origins._foreign):
        kept.clear()


@pytest.fixture
def importable(tmp_path, monkeypatch):
    """``importable(prefix, source)``: a module of ``source`` written to a file on ``sys.path`` and imported, so
    that spawned workers import it too; removed from ``sys.modules`` after the test."""
    import importlib

    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def make(prefix: str, source: str):
        name = f"{prefix}_{os.getpid()}_{len(names)}"
        (tmp_path / f"{name}.py").write_text(source)
        names.append(name)
        return importlib.import_module(name)

    yield make
    for name in names:
        sys.modules.pop(name, None)


def adopt_elsewhere(token):
    """Adopt ``token`` as a process other than the one that made its tables would (one forked from it)."""
    mine = origins.ORIGIN
    origins.ORIGIN = "1-another0000"
    try:
        arrival.adopt("another process", *token[1:])
    finally:
        origins.ORIGIN = mine


def loads_elsewhere(data):
    """``pickle.loads(data)`` as a process other than the one that pickled it (one forked from it) would."""
    mine = origins.ORIGIN
    origins.ORIGIN = "1-another0000"
    try:
        return pickle.loads(data)
    finally:
        origins.ORIGIN = mine


def launch(kernel, x=(0.0, 1.0, 2.0)):
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    od.cuda(kernel, out, x, blocks=1, threads=x.size, target="cpu")
    return out.tolist()


def test_adopting_another_snapshot_gives_its_methods_and_recompiles_only_what_used_them(make_module):
    m = make_module(SOURCE)
    assert launch(m.kernel) == [1.0, 2.0, 3.0] and launch(m.other) == [0.0, 3.0, 6.0]
    sent = snapshots.snapshot()
    m.run("@od.function\ndef g(x: od.Float):\n    return x * 10.0\n")
    m.run("@od.function\ndef g(x: od.float32):\n    return x - 5.0\n")
    assert launch(m.kernel) == [0.0, 10.0, 20.0]
    compiles = od.stats()["compiles"]
    adopt_elsewhere(sent)
    assert launch(m.kernel) == [1.0, 2.0, 3.0] and launch(m.other) == [0.0, 3.0, 6.0]
    assert od.stats()["compiles"] == compiles + 1  # the kernel calling g, not the other
    assert [method.sig for method in m.g.methods] == [(od.Float,)]  # the method the sender had not: deleted
    compiles = od.stats()["compiles"]
    adopt_elsewhere(sent)  # the same snapshot again: nothing to do
    assert launch(m.kernel) == [1.0, 2.0, 3.0] and od.stats()["compiles"] == compiles


def test_a_process_never_adopts_its_own_definitions_coming_back(make_module):
    m = make_module(SOURCE)
    assert launch(m.kernel) == [1.0, 2.0, 3.0]
    compiles = od.stats()["compiles"]
    assert pickle.loads(pickle.dumps(m.g)) is m.g  # the snapshot travels with it, from this very process
    assert launch(m.kernel) == [1.0, 2.0, 3.0] and od.stats()["compiles"] == compiles


def test_a_snapshot_is_rebuilt_when_a_global_a_method_reads_changes(make_module):
    m = make_module("import overdub as od\nK = 2.0\n\n@od.function\ndef h(x: od.Float):\n    return x * K\n")
    first = snapshots.snapshot()
    assert snapshots.snapshot() == first  # cached: nothing changed
    m.K = 3.0
    assert snapshots.snapshot()[1] != first[1]


def test_a_snapshot_rebuilt_to_the_same_bytes_keeps_its_token(make_module):
    """Rebuilt because the world moved or a def it read was collected, a snapshot of the same definitions is
    the same token: a task pickled twice is the same bytes, and a receiver has nothing new to adopt."""
    m = make_module("import overdub as od\n\n@od.function\ndef h(x: od.Float):\n    return x * 2.0\n")
    first = snapshots.snapshot()
    world.bump_world()
    snapshots._snapshots["last"].read[0].ref = lambda: None  # as if a def it read had been collected
    assert snapshots.snapshot() == first
    m.run("@od.function\ndef h(x: od.Float):\n    return x * 3.0\n")
    assert snapshots.snapshot()[1] != first[1]


def test_a_def_shipped_by_value_arrives_interned_by_content(make_module):
    m = make_module(SOURCE)
    sent = byvalue.dumps(m.other)
    a, b = pickle.loads(sent), pickle.loads(sent)
    assert a is not b and byvalue.arrived_by_value(a) and not byvalue.arrived_by_value(m.other)
    assert interning.interned(a) is interning.interned(b) is a
    assert launch(a) == launch(b) == [0.0, 3.0, 6.0]
    assert od.stats()["compiles"] == 1
    m.run("def other(out, x):\n    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = x[i] * 4.0\n")
    changed = pickle.loads(byvalue.dumps(m.other))
    assert interning.interned(changed) is changed and launch(changed) == [0.0, 4.0, 8.0]


def test_a_recursive_def_and_an_empty_cell_ship_by_value(make_module):
    m = make_module("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)\n")
    arrived = pickle.loads(byvalue.dumps(m.fact))
    assert arrived(5) == 120 and arrived.__globals__["fact"] is arrived

    def make():
        def inner():
            return later

        return inner
        later = 1

    assert pickle.loads(byvalue.dumps(make())).__closure__[0] is not None


def test_a_generic_function_whose_methods_cannot_travel_fails_on_the_sender_by_name(make_module):
    lock = threading.Lock()

    @od.function
    def guarded(x: od.Float):
        assert lock is not None
        return x

    m = make_module(SOURCE)
    with pytest.raises(pickle.PicklingError, match=r"cannot ship .*guarded.*lock"):
        pickle.dumps(guarded)
    assert pickle.loads(pickle.dumps(m.g)) is m.g  # the others still travel


def test_definitions_that_fail_to_arrive_make_the_next_launch_an_error_not_stale_code(make_module):
    m = make_module(SOURCE)
    assert launch(m.kernel) == [1.0, 2.0, 3.0]
    arrival.adopt("another process", "a digest", (), b"not a pickle")  # unpickling it fails: never raises here
    with pytest.raises(RuntimeError, match="could not be adopted"):
        launch(m.kernel)
    arrival._failed.clear()
    arrival.adopt("another process", "another digest", (), pickle.dumps((1, [])))  # another overdub version's
    with pytest.raises(RuntimeError, match="format 1 of another overdub version"):
        launch(m.kernel)


def test_cloudpickle_ships_the_snapshot_with_the_overdub_module():
    cloudpickle = pytest.importorskip("cloudpickle")

    def task():
        return od.stats()

    digest = snapshots.snapshot()[1].encode()
    assert b"_overdub_arriving" in cloudpickle.dumps(od) and digest in cloudpickle.dumps(od)
    assert b"def_arriving" in cloudpickle.dumps(task) and digest in cloudpickle.dumps(task)  # it reaches od


def test_a_kernel_cloudpickle_ships_by_value_arrives_as_one_def_per_content():
    """A def launched as a kernel ships as its cached bytes: every copy of the same content arrives as one
    def (one compiled kernel); a changed cell makes new bytes, never the old def."""
    cloudpickle = pytest.importorskip("cloudpickle")
    scale = 3.0

    def kernel(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * scale

    assert launch(kernel) == [0.0, 3.0, 6.0]  # launched here: a kernel from now on
    sent = cloudpickle.dumps(kernel)
    assert b"def_arriving" in sent and cloudpickle.dumps(kernel) == sent
    a, b = loads_elsewhere(sent), loads_elsewhere(sent)
    assert a is b and a is not kernel and byvalue.arrived_by_value(a)
    shipped_on = cloudpickle.dumps(a)  # a Dask scheduler pickles each task again: the same bytes, the same def
    assert b"def_arriving" in shipped_on and loads_elsewhere(shipped_on) is a
    assert launch(a) == [0.0, 3.0, 6.0]
    scale = 4.0
    changed = loads_elsewhere(cloudpickle.dumps(kernel))
    assert changed is not a and launch(changed) == [0.0, 4.0, 8.0] and launch(a) == [0.0, 3.0, 6.0]
    back_here = pickle.loads(sent)  # in the process that sent it (a Dask worker of its own): the def itself
    assert back_here.__code__ is kernel.__code__ and launch(back_here) == [0.0, 4.0, 8.0]

    def plain(x):  # never launched: cloudpickle's own by-value pickle
        return x * scale

    assert b"def_arriving" not in cloudpickle.dumps(plain) and pickle.loads(cloudpickle.dumps(plain))(2.0) == 8.0


def test_a_def_by_value_arrives_with_the_submodules_it_names_loaded():
    import overdub.cuda.random  # noqa: F401  (loaded: a def naming od.cuda.random needs it where it arrives)

    def task():
        return od.cuda.random, np.linalg

    values = pickle.loads(byvalue.dumps(task)).__globals__
    state = byvalue.function_reduce(task, [])[2]
    assert values["od"] is od and {"overdub.cuda", "overdub.cuda.random"} <= set(state[-1])
    assert "numpy.linalg" in state[-1] and not any(m.startswith("overdub.travel") for m in state[-1])


# --- other processes ---------------------------------------------------------------------------------------


def _pool_task(g, x):
    """In a spawned worker: the kernel of g's module, launched on the CPU target."""
    import importlib

    return importlib.import_module(g.__module__).run_here(np.asarray(x))


def test_a_spawned_pool_runs_the_method_the_client_redefined_by_exec(importable):
    module = importable("odtravel", SOURCE)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert pool.starmap(_pool_task, [(module.g, [1.0, 2.0])] * 2) == [[2.0, 3.0]] * 2
        exec("@od.function\ndef g(x: od.Float):\n    return x * 10.0\n", vars(module))
        assert module.run_here(np.asarray([1.0, 2.0])) == [10.0, 20.0]
        assert pool.starmap(_pool_task, [(module.g, [1.0, 2.0])] * 4) == [[10.0, 20.0]] * 4


# --- Dask ---------------------------------------------------------------------------------------------------


def _scaleout_run(seed: int, steps: int, workers: int, timeout: float = 900) -> dict:
    """tests/scaleout_run.py in a fresh process (its definitions are __main__'s, as a notebook's are)."""
    script = Path(__file__).with_name("scaleout_run.py")
    return last_json(run_python(script, seed, steps, "--workers", workers, timeout=timeout))


@pytest.mark.soak
def test_dask_workers_run_the_clients_definitions_through_redefinitions_restarts_and_kills():
    pytest.importorskip("distributed")
    result = _scaleout_run(seed=11, steps=24, workers=2)
    assert (result["mismatches"], result["hangs"], result["errors"]) == (0, 0, 0), result["failures"]
    assert result["graphs"] == 48


@pytest.mark.slow
def test_dask_randomized_thousand_steps_on_four_workers():
    pytest.importorskip("distributed")
    result = _scaleout_run(seed=2026, steps=1000, workers=4, timeout=5400)
    assert (result["mismatches"], result["hangs"], result["errors"]) == (0, 0, 0), result["failures"]


def test_map_blocks_and_map_overlap_run_a_kernel_per_chunk(make_module):
    da = pytest.importorskip("dask.array")
    import dask

    m = make_module(
        """
        from numba import cuda

        def axpy(out, x, y, a):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i] + y[i]

        def blur(out, x):
            i = cuda.grid(1)
            if 0 < i < out.size - 1:
                out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0
            elif i < out.size:
                out[i] = x[i]
    """
    )
    x = da.arange(40.0, chunks=8)
    y = da.ones(40, chunks=8)
    with dask.config.set(scheduler="threads"):
        assert np.array_equal(od.map_blocks(m.axpy, x, y, args=(2.0,)).compute(), 2.0 * np.arange(40.0) + 1.0)
        blurred = od.map_overlap(m.blur, x, depth=1, boundary="reflect").compute()
    host = np.pad(np.arange(40.0), 1, mode="symmetric")  # dask's "reflect" repeats the edge
    expected = (host[:-2] + host[1:-1] + host[2:]) / 3.0
    assert np.allclose(blurred, expected)
    assert od.stats()["compiles"] == 2  # one per kernel, however many chunks


def test_a_package_installed_with_its_metadata_anywhere_travels_by_reference(tmp_path, monkeypatch):
    """pip install --target puts a package and its *.dist-info in any directory: an installed package, whose
    functions (cloudpickle's own, say) travel by reference, not as the user's code does."""
    from overdub import libraries

    name = f"odinstalled_{os.getpid()}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("def helper(x):\n    return x + 1\n")
    (tmp_path / f"{name}-1.0.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module(name)
    try:
        assert libraries.is_library_module(name)
        assert pickle.loads(byvalue.dumps(module.helper)) is module.helper
    finally:
        sys.modules.pop(name, None)


def test_a_users_overdub_on_a_targets_own_context_travels(make_module):
    m = make_module(SOURCE)
    m.run("@od.CPU.overdub(g)\ndef _(x: od.Float):\n    return x * 100.0\n")
    try:
        assert launch(m.kernel) == [0.0, 100.0, 200.0]
        sent = snapshots.snapshot()
        m.run("@od.CPU.overdub(g)\ndef _(x: od.Float):\n    return x * 7.0\n")
        assert launch(m.kernel) == [0.0, 7.0, 14.0]
        adopt_elsewhere(sent)
        assert launch(m.kernel) == [0.0, 100.0, 200.0]
    finally:
        od.CPU.table(m.g).remove((od.Float,), "test cleanup")


def test_a_method_added_to_a_plain_callable_travels(make_module):
    m = make_module(
        """
        import math
        import overdub as od

        def kernel(out, x):
            out[0] = math.fabs(x[0])
    """
    )
    m.run("import math\n@od.method(math.fabs)\ndef _(x: od.float64):\n    return x + 1000.0\n")
    table = od.extending.table(__import__("math").fabs)
    try:
        assert launch(m.kernel, [-2.0]) == [998.0]
        sent = snapshots.snapshot()
        m.run("import math\n@od.method(math.fabs)\ndef _(x: od.float64):\n    return x + 5.0\n")
        assert launch(m.kernel, [-2.0]) == [3.0]
        adopt_elsewhere(sent)
        assert launch(m.kernel, [-2.0]) == [998.0]
    finally:
        table.remove((od.float64,), "test cleanup")


def test_a_table_that_cannot_arrive_leaves_the_others_right_and_says_so(make_module):
    m = make_module(SOURCE)
    assert launch(m.kernel) == [1.0, 2.0, 3.0]
    _root, digest, _others, blob = snapshots.snapshot()
    m.run("@od.function\ndef g(x: od.Float):\n    return x * 10.0\n")
    sent_format, entries = pickle.loads(blob)
    broken = pickle.dumps((sent_format, [("a table only the sender can read", b"not a pickle"), *entries]))
    with pytest.warns(RuntimeWarning, match="a table only the sender can read .* could not be adopted"):
        adopt_elsewhere((None, digest + "-broken", (), broken))
    assert launch(m.kernel) == [1.0, 2.0, 3.0]  # g arrived, and nothing blocks the launch


def test_a_def_adopted_by_value_never_loads_the_senders_disk_entry_for_its_module(tmp_path, monkeypatch):
    """The client stores a kernel whose method reads its module's ``C``; a worker whose module still has the old
    ``C`` adopts the client's new method by value (its own globals): the entry's facts name the module, so
    they cannot vouch for the adopted def -- a miss, never the stale code (found by the 1,000-step Dask run)."""
    import importlib

    name = f"odtravel_cache_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(
        SOURCE.replace("return x + 1.0", "return x + C").replace(
            "import overdub as od\n", "import overdub as od\nC = 1.0\n", 1
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    try:
        assert launch(module.kernel) == [1.0, 2.0, 3.0]  # stored on disk with C = 1.0
        module.C = 5.0
        sent = snapshots.snapshot()  # the client's method now reads C = 5.0
        module.C = 1.0  # the worker's module, imported before the change
        runtime.reset()  # as a worker process
        adopt_elsewhere(sent)
        assert launch(module.kernel) == [5.0, 6.0, 7.0]
        assert od.stats()["disk_hits"] == 0
    finally:
        sys.modules.pop(name, None)


def test_a_generic_function_whose_methods_fail_to_arrive_fails_its_calls_with_the_cause(make_module):
    m = make_module(SOURCE)
    _root, digest, _others, blob = snapshots.snapshot()
    entries = dict(pickle.loads(blob)[1])
    key = next(k for k in entries if k.endswith(str(id(m.g))))
    entry = pickle.loads(entries[key])
    broken = snapshots.Entry(
        entry.key, entry.owner, ((entry.methods[0][0], "other", b"not a pickle", False),), entry.signatures
    )
    snapshots.local.building = True  # as a snapshot's entry is pickled: its owner without a snapshot of its own
    try:
        sent = pickle.dumps((snapshots.FORMAT, [(key, byvalue.dumps(broken))]))
    finally:
        snapshots.local.building = False
    with pytest.warns(RuntimeWarning, match="could not be adopted"):
        adopt_elsewhere((None, digest + "-broken", (), sent))
    with pytest.raises(
        od.registry.NotArrivedError, match=r"g: its definitions, sent .* could not be adopted here: UnpicklingError"
    ):
        m.g(1.0)
    adopt_elsewhere((None, digest, (), blob))  # the sender's next snapshot arrives: right again
    assert m.g(1.0) == 2.0


def test_an_engine_ships_a_def_reaching_overdub_by_value_and_a_numpy_helper_by_reference(make_module):
    from overdub import engines

    m = make_module(SOURCE + "\ndef helper(x):\n    return x * 2\n")
    sys.modules[m.__name__] = m
    try:
        plain = engines.reduce_for_engine(m.helper)  # as the engine sent it before (by reference), with the token
        assert plain is not None and plain[0] is _with_token and plain[1][0] == snapshots.snapshot()
        assert pickle.loads(multiprocessing.reduction.ForkingPickler.dumps(m.helper)) is m.helper
        reduced = engines.reduce_for_engine(m.run_here)
        assert reduced is not None and reduced[1][0] == snapshots.snapshot()
        arrived = reduced[0](*reduced[1])
        x = np.array([1.0])
        assert arrived is not m.run_here and arrived(x) == m.run_here(x) == [2.0]
        m.run("@od.function\ndef g(x: od.Float):\n    return x * 10.0\n")
        assert engines.reduce_for_engine(m.run_here)[1][0][1] != reduced[1][0][1]  # a new token
    finally:
        sys.modules.pop(m.__name__, None)


# --- what a def reads that no global names: its body's imports; an od.jit kernel's options -----------------

IMPORTING = """
import numpy as np
import overdub as od
from numba import cuda

def kernel(out, x, k):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + k

def task(v):
    import {cfg}
    from {cfg} import K
    x = np.full(2, v)
    out = np.zeros_like(x)
    od.cuda(kernel, out, x, {cfg}.K + K, blocks=1, threads=2, target="cpu")
    return out.tolist()
"""


@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_a_def_importing_the_users_module_in_its_body_reads_it_as_the_client_has_it(make_module, method, monkeypatch):
    import concurrent.futures

    cfg = make_module("K = 1.5\n", prefix="odcfg")  # a module only the client can import
    monkeypatch.setitem(sys.modules, cfg.__name__, cfg)
    module = make_module(IMPORTING.replace("{cfg}", cfg.__name__))
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context(method)) as pool:
        assert pool.submit(module.task, 1.0).result(timeout=120) == [4.0, 4.0]
        cfg.K = 7.0  # rebound on the client, as a notebook cell does; the worker imported it before
        assert module.task(1.0) == [15.0, 15.0]
        assert pool.submit(module.task, 1.0).result(timeout=120) == [15.0, 15.0]


def test_a_def_importing_the_users_module_in_its_body_arrives_with_it_as_it_was_shipped(make_module, monkeypatch):
    cfg = make_module("K = 1.5\n", prefix="odcfg")
    monkeypatch.setitem(sys.modules, cfg.__name__, cfg)
    module = make_module(IMPORTING.replace("{cfg}", cfg.__name__))
    first = pickle.loads(defs.def_bytes(module.task)[1])
    cfg.K = 7.0
    second = pickle.loads(defs.def_bytes(module.task)[1])
    assert (first(1.0), second(1.0)) == ([4.0, 4.0], [15.0, 15.0])
    # two arrivals of different contents are two definitions, never interned as one
    assert interning.interned(first) is not interning.interned(second)


OUT_OF_RANGE = """
from numba import cuda

def kernel(out, x):
    i = cuda.grid(1)
    out[i + 100] = x[i]
"""


def test_an_od_jit_kernel_launched_by_od_cuda_or_map_blocks_keeps_its_options_across_processes(make_module):
    checked = od.jit(debug=True)(make_module(OUT_OF_RANGE).kernel)
    x = np.arange(4.0)
    with pytest.raises(IndexError):  # od.cuda of an od.jit kernel compiles with the kernel's options
        od.cuda(checked, np.zeros(4), x, blocks=1, threads=4, target="cpu")
    arrived = pickle.loads(multiprocessing.reduction.ForkingPickler.dumps(Shipped(checked))).kernel
    assert (type(arrived), arrived.options, arrived.py_func.__name__) == (type(checked), checked.options, "kernel")
    with pytest.raises(IndexError):
        od.cuda(arrived, np.zeros(4), x, blocks=1, threads=4, target="cpu")


# --- the disk cache across processes: an entry naming another process's __main__ ---------------------------

MAIN_BLOCK = """
import json, multiprocessing, os, pathlib, sys, warnings
import numpy as np
from numba import cuda
import overdub as od

def entries():
    return sorted(str(p) for p in pathlib.Path(os.environ["OVERDUB_CACHE_DIR"]).glob("v*/*/*/*.odk"))

if __name__ == "__main__":
    @od.struct
    class Q:
        a: od.float64
        b: od.float64 = 0.5

    @od.function
    def qv(q: Q):
        return q.a * 10.0 + q.b

    def kernel(out, x, q):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + qv(q)

    def task(v, q):
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            x = np.full(4, v)
            out = np.zeros_like(x)
            od.cuda(kernel, out, x, q, blocks=1, threads=4, target="cpu")
        return float(out[0]), [str(w.message) for w in caught]

    local = task(1.0, Q(1.0))
    stored = entries()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        remote = pool.apply_async(task, (1.0, Q(1.0))).get(120)
    print(json.dumps({"local": local, "remote": remote, "stored": stored, "after": entries()}))
"""


def test_a_worker_lacking_a_struct_of_the_clients_main_misses_its_disk_entry_quietly_and_keeps_it(tmp_path):
    """A struct defined under ``if __name__ == "__main__":`` is named ``__main__.Q`` in the client's disk cache
    entry; a spawned worker's ``__mp_main__`` never defines it: a miss there, with no warning, and the client's
    entry stays."""
    script = tmp_path / "main_block.py"
    script.write_text(MAIN_BLOCK)
    env = {"OVERDUB_CACHE_DIR": tmp_path / "cache", "OVERDUB_CACHE": None}
    done = run_python(script, env=env, cwd=tmp_path)
    result = last_json(done)
    assert result["local"] == result["remote"] == [11.5, []], (result, done.stderr[-3000:])
    assert result["stored"] and set(result["stored"]) <= set(result["after"])  # the client's entry is kept
    assert "unusable" not in done.stderr


def _entry_file(name: str, body: bytes) -> Path:
    """A signed entry of the disk cache holding ``body``, under a key of its own."""
    from overdub import diskcache

    root, secret = diskcache._opened()
    key = "ab" + "0" * 62
    path = root / key[:2] / key / f"{name}{diskcache._SUFFIX}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(diskcache._sealed(secret, key, body))
    return path


def test_a_disk_entry_naming_what_this_process_lacks_is_a_quiet_miss_and_a_damaged_one_is_still_removed(
    make_module, monkeypatch
):
    from overdub import diskcache

    m = make_module(
        """
        import overdub as od

        @od.struct
        class Q:
            a: od.float64

        def helper(x):
            return x + 1.0
        """
    )
    monkeypatch.setitem(sys.modules, m.__name__, m)
    named_class = _entry_file("class", pickle.dumps({"facts": [], "payload": m.Q, "needs": set()}))
    assert diskcache._read(named_class)["payload"] is m.Q
    by_name = snapshots.ByName(m.__name__, "helper")  # pickled as registry.resolve_reference(module, name)
    named_function = _entry_file("by_name", pickle.dumps({"facts": [], "payload": by_name, "needs": set()}))
    other = make_module("import overdub as od\n\n@od.struct\nclass R:\n    a: od.float64\n")
    monkeypatch.setitem(sys.modules, other.__name__, other)
    named_module = _entry_file("module", pickle.dumps({"facts": [], "payload": other.R, "needs": set()}))
    monkeypatch.delitem(sys.modules, other.__name__)  # a module this process cannot import
    del m.Q, m.helper  # as a spawned worker's __mp_main__ lacks what the client's __main__ defined
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for path in (named_class, named_function, named_module):
            assert diskcache._read(path) is None
            assert path.exists()
    damaged = _entry_file("damaged", b"\x80\x05not a pickle at all")
    with pytest.warns(RuntimeWarning, match="unusable: it does not unpickle"):
        assert diskcache._read(damaged) is None
    assert not damaged.exists()


# --- what a def reads, changed in place; plain code; older snapshots ---------------------------------------

READS = """
import numpy as np
import overdub as od

PARAMS = {"k": 1.0}
W = np.ones(3)

def reads_dict(x):
    return od.function, x + PARAMS["k"]

def reads_default(x, w=W):
    return od.function, x + w[0]
"""


@pytest.mark.parametrize(("name", "change"), [("reads_dict", "PARAMS['k'] = 100.0"), ("reads_default", "W[0] = 5.0")])
def test_a_def_ships_anew_when_what_it_reads_is_changed_in_place(make_module, name, change):
    module = make_module(READS)
    func = getattr(module, name)
    before = defs.def_bytes(func)[0]
    assert defs.def_bytes(func)[0] == before  # nothing changed: the cached bytes
    exec(change, vars(module))
    assert defs.def_bytes(func)[0] != before
    assert pickle.loads(defs.def_bytes(func)[1])(1.0)[1] == func(1.0)[1]


def test_a_submodule_read_through_its_package_ships_as_the_client_has_it(make_module):
    import types

    config, package = types.ModuleType("odtravel_pkg.config"), types.ModuleType("odtravel_pkg")
    config.K, package.config = 1.5, config  # pkg.config, a submodule of the user's code
    user = make_module("import overdub as od\n\ndef k(x):\n    return od, x + pkg.config.K\n")
    user.pkg = package
    before = defs.def_bytes(user.k)[0]
    config.K = 100.0
    assert defs.def_bytes(user.k)[0] != before
    assert pickle.loads(defs.def_bytes(user.k)[1])(1.0)[1] == 101.0


def test_a_def_closing_over_an_array_arrives_with_it(make_module):
    module = make_module(
        "import numpy as np\nimport overdub as od\n\ndef make(w):\n    def k(x):\n        return od, x + w[0]\n"
        "    return k\n\nk = make(np.array([2.0, 3.0]))\n"
    )
    assert pickle.loads(defs.def_bytes(module.k)[1])(1.0)[1] == 3.0


def _init_state(v):
    import odplain_state

    odplain_state.STATE["v"] = v


def test_plain_code_keeps_its_engines_semantics_a_pools_initializer_sets_what_tasks_read(tmp_path, monkeypatch):
    (tmp_path / "odplain_state.py").write_text("STATE = {}\n\ndef task(x):\n    return x + STATE.get('v', -1000)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import odplain_state

    for method in ("spawn", "fork", "forkserver"):
        with multiprocessing.get_context(method).Pool(1, initializer=_init_state, initargs=(10,)) as pool:
            assert pool.apply_async(odplain_state.task, (1,)).get(120) == 11, method


def test_a_process_never_goes_back_to_an_older_snapshot_of_the_root_it_adopted(make_module):
    module = make_module(SOURCE)
    older = snapshots.snapshot()
    exec("@od.function\ndef g(x: od.Float):\n    return x * 10.0\n", vars(module))
    newer = snapshots.snapshot()
    assert origins.sequence(newer[1]) > origins.sequence(older[1])
    exec("@od.function\ndef g(x: od.Float):\n    return x - 1.0\n", vars(module))  # what this process has now
    mine = origins.ORIGIN
    origins.ORIGIN = "1-another0000"  # a worker of this process, its root
    try:
        arrival.adopt(*newer)  # the newer definitions (g(x) = 10x)...
        assert launch(module.kernel) == [0.0, 10.0, 20.0]
        arrival.adopt(*older)  # ...and a result of a worker that had not seen them does not take them back
        assert launch(module.kernel) == [0.0, 10.0, 20.0]
    finally:
        origins.ORIGIN = mine


# --- the definitions of a task's submission, whenever the engine pickles or runs it -----------------------

SUBMITTED = """
import overdub as od

@od.function
def f(x: od.Float):
    return x * 2.0

def task(x):
    return float(f(x))
"""


def _redefine_f(module, c: float) -> None:
    module.run(f"@od.function\ndef f(x: od.Float):\n    return x * {c}\n")


def test_pool_work_runs_the_definitions_of_its_submission_though_a_redefinition_follows_at_once(importable):
    import concurrent.futures

    module = importable("odsubmitted", SUBMITTED)
    module.run = lambda source: exec(source, vars(module))
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(1) as pool, concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as executor:
        assert pool.apply_async(module.task, (1.0,)).get(120) == executor.submit(module.task, 1.0).result(120)
        for c in (3.0, 4.0, 5.0):
            due = module.task(1.0)
            submitted = (
                pool.apply_async(module.task, (1.0,)),
                executor.submit(module.task, 1.0),
                pool.imap(module.task, [1.0, 1.0]),
            )
            _redefine_f(module, c)  # the next cell, before the pools' threads pickled the work
            assert submitted[0].get(120) == submitted[1].result(120) == due
            assert list(submitted[2]) == [due, due]


def test_dask_work_runs_the_definitions_of_its_submission_though_a_redefinition_follows_at_once():
    pytest.importorskip("distributed")
    script = SUBMITTED + (
        "\nif __name__ == '__main__':\n"
        "    import logging, dask\n"
        "    from distributed import Client, LocalCluster\n"
        "    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=':0',\n"
        "                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:\n"
        "        client.submit(task, 1.0, pure=False).result(timeout=120)\n"
        "        wrong = []\n"
        "        for c in (3.0, 4.0, 5.0):\n"
        "            due = task(1.0)\n"
        "            work = (client.submit(task, 1.0, pure=False), client.map(task, [1.0, 1.0], pure=False),\n"
        "                    client.compute(dask.delayed(task)(1.0)))\n"
        "            exec(f'@od.function\\ndef f(x: od.Float):\\n    return x * {c}\\n', globals())\n"
        "            got = (work[0].result(timeout=120), client.gather(work[1]), work[2].result(timeout=120))\n"
        "            wrong += [] if got == (due, [due, due], due) else [(due, got)]\n"
        "        print('WRONG' if wrong else 'RIGHT', wrong)\n"
    )
    done = run_python("-c", script, timeout=600, check=False)
    assert done.stdout.strip().splitlines()[-1:] == ["RIGHT []"], done.stdout + done.stderr[-3000:]


def test_plain_code_holding_what_does_not_pickle_by_value_still_ships_by_reference(tmp_path, monkeypatch):
    (tmp_path / "odplain_lock.py").write_text(
        "import threading\nLOCK = threading.Lock()\n\ndef task(x):\n    with LOCK:\n        return x + 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import odplain_lock

    assert pickle.loads(multiprocessing.reduction.ForkingPickler.dumps(odplain_lock.task)) is odplain_lock.task
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply_async(odplain_lock.task, (1,)).get(120) == 2


# --- tasks that are no def: methods, callable instances, processes ---------------------------------------

TASK_OBJECTS = """
import multiprocessing
import overdub as od

@od.function
def f(x: od.Float):
    return x * 2.0

class Scaler:
    def __call__(self, x):
        return float(f(x))

    def bound(self, x):
        return float(f(x))

    @classmethod
    def cls(cls, x):
        return float(f(x))
"""


def test_a_method_or_a_callable_instance_as_a_task_runs_the_definitions_the_client_has_now(importable):
    import concurrent.futures

    module = importable("odtaskobjects", TASK_OBJECTS)
    scaler = module.Scaler()
    tasks = (scaler, scaler.bound, module.Scaler.cls)
    for task in tasks:  # each pickles with the client's definitions first
        assert b"_with_token" in bytes(multiprocessing.reduction.ForkingPickler.dumps(task))
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(1) as pool, concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as executor:
        assert [pool.apply_async(t, (1.0,)).get(120) for t in tasks] == [2.0] * 3
        exec("@od.function\ndef f(x: od.Float):\n    return x * 5.0\n", vars(module))  # a cell run again
        assert [pool.apply_async(t, (1.0,)).get(120) for t in tasks] == [5.0] * 3
        assert [executor.submit(t, 1.0).result(120) for t in tasks] == [5.0] * 3


# --- what travels is freed when nothing holds it -------------------------------------------------------------


def test_a_def_shipped_and_dropped_is_freed_here_and_where_it_arrived(make_module):
    import gc
    import weakref

    module = make_module(
        "import numpy as np\nimport overdub as od\n\ndef make(w):\n    def k(x):\n        return od, x + w[0]\n    return k\n"
    )
    shipped = module.make(np.ones(1_000))
    digest, blob, _ = defs.def_bytes(shipped)
    arrived = defs.def_arriving(("1-another0000", "1.x", (), _empty_snapshot()), digest, blob)
    assert interning.interned(arrived) is arrived
    here, there = weakref.ref(shipped), weakref.ref(arrived)
    del shipped, arrived
    interning.recent.clear()  # the last few arrivals are kept between one task and the next
    gc.collect()
    assert (here(), there()) == (None, None)


def _empty_snapshot() -> bytes:
    return pickle.dumps((snapshots.FORMAT, []))


SELF_NAMING = """
import numpy as np
import overdub as od
from numba import cuda

@od.struct
class Vec:
    x: od.float64

    def __add__(self, other: "Vec"):
        return Vec(self.x + other.x)

    def __mul__(self, k: od.Float):
        return Pair(Vec(self.x * k), self)

@od.struct
class Pair:
    a: Vec
    b: Vec

    def __add__(self, other: "Pair"):
        return Pair(self.a + other.a, self.b + other.b)

@od.method(abs)
def _abs(v: Vec):
    return Vec(abs(v.x))

def kernel(out, v):
    i = cuda.grid(1)
    if i < out.size:
        q = v * 2.0
        q = q + q
        out[i] = abs(q.a).x + q.b.x

def run_here(v):
    out = np.zeros(2)
    od.cuda(kernel, out, v, blocks=1, threads=2, target="cpu")
    return out.tolist(), sorted(vars(type(v)))
"""


def test_a_struct_whose_methods_name_its_class_and_another_naming_it_back_travel_to_a_spawned_pool(importable):
    """A struct's methods name their own class (``return Vec(...)``) and two classes name each other: each
    arrives in the worker with its methods, and the methods on it travel and are redefined there too."""
    module = importable("odselfnaming", SELF_NAMING)
    here, members = module.run_here(module.Vec(-1.5))
    assert here == [3.0, 3.0]  # abs(-6.0) + (-3.0)
    snapshots.snapshot()
    assert not [key for key in snapshots.unshippable if key.startswith("UserMethods")], snapshots.unshippable
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(module.run_here, (module.Vec(-1.5),)) == (here, members)
        exec("@od.method(abs)\ndef _abs(v: Vec):\n    return Vec(abs(v.x) * 10.0)\n", vars(module))
        assert module.run_here(module.Vec(-1.5))[0] == [57.0, 57.0]
        assert pool.apply(module.run_here, (module.Vec(-1.5),))[0] == [57.0, 57.0]
