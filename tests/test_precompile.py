"""od.precompile: kernels compiled ahead, their calls shared between this process and workers (forks of it on
the CPU target, spawned processes elsewhere), into the disk cache; this process and a fresh one then launch
them without compiling.

A spawned worker costs a process start (numba's import): the tests that start one are few and small.
"""

import importlib
import os
import pathlib
import pickle
import sys
import time
import types

import numpy as np
import pytest

import overdub as od
from helpers import last_json, run_python, unique_name
from overdub import precompiling
from overdub.call import KernelCall
from overdub.runtime import runtime

KERNELS = """
import overdub as od
from numba import cuda

counting = od.Context("counting", state=od.Float)


@od.function
def twice(x: od.Float):
    return 2.0 * x


def k0(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = twice(x[i])


def k1(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = twice(x[i]) + 1.0


def broken(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = twice(x)  # no method of twice takes an array


def with_state(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + od.state()
"""

PROGRAM = """
import json, os, sys
import overdub as od
kernels, target, precompiled = __import__(sys.argv[1]), sys.argv[2], sys.argv[3:]
xp = __import__("numpy" if target == "cpu" else "cupy")
x = xp.arange(8.0)
result = {"pid": os.getpid()}
if precompiled:
    calls = [(getattr(kernels, name), (xp.zeros(8), x)) for name in precompiled]
    try:
        report = od.precompile(calls, target=target, workers=2)
    except od.CompileError as error:
        result["error"] = str(error)
    else:
        result.update(report=[[call.how, call.process, call.call] for call in report], spawned=report.spawned)
result["precompile_stats"] = od.stats()
outs = []
for name in ("k0", "k1"):
    out = xp.zeros(8)
    od.cuda(getattr(kernels, name), out, x, threads=8, target=target)
    outs.append(out.tolist())
result.update(outs=outs, stats=od.stats())
print(json.dumps(result))
"""

MAIN_KERNEL = """
from numba import cuda

def doubled(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i]
"""

X = np.arange(8.0)


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """The kernels above as an importable module of a unique name (a worker imports it by name)."""
    name = unique_name("odprecompile")
    (tmp_path / f"{name}.py").write_text(KERNELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(name)
    sys.modules.pop(name, None)


def _launched(kernel) -> list[float]:
    out = np.zeros(8)
    od.cuda(kernel, out, X, threads=8, target="cpu")
    return out.tolist()


def _fresh_process(kernels, target: str, *precompiled: str) -> dict:
    """A new Python with this test's disk cache (and none of the definitions earlier tests left in this one):
    ``od.precompile`` of the ``precompiled`` kernels with two processes, then ``kernels.k0`` and ``k1``
    launched. What the precompile did (or its error), the stats after it and after the launches, the results."""
    path = pathlib.Path(kernels.__file__).parent
    return last_json(run_python("-c", PROGRAM, kernels.__name__, target, *precompiled, path=[path]))


def _counts(stats: dict) -> tuple[int, int, int]:
    return stats["compiles"], stats["disk_hits"], stats["disk_misses"]


def test_kernels_precompiled_in_parallel_launch_without_compiling_there_and_in_a_fresh_process(kernels):
    first = _fresh_process(kernels, "cpu", "k0", "k1")
    assert [how for how, _, _ in first["report"]] == ["compiled here", "compiled in a worker"]
    assert first["spawned"] == 1 and first["report"][1][1] != first["pid"]  # k1 compiled in another process
    assert first["report"][1][2] == "k1(array(float64, 1d, C), array(float64, 1d, C))"
    assert first["precompile_stats"]["compiles"] == first["precompile_stats"]["disk_hits"] == 1  # k1: the worker's
    assert _counts(first["stats"]) == _counts(first["precompile_stats"])  # the launches compiled and loaded nothing
    assert first["outs"] == [(2 * X).tolist(), (2 * X + 1).tolist()]
    fresh = _fresh_process(kernels, "cpu")
    assert fresh["outs"] == first["outs"]
    assert (fresh["stats"]["compiles"], fresh["stats"]["disk_hits"]) == (0, 2)


def test_a_call_failing_in_a_worker_is_named_in_the_compile_error_after_the_others_are_cached(kernels):
    run = _fresh_process(kernels, "cpu", "k0", "broken")  # k0 compiles here, broken in the worker
    assert "1 of 2 kernel calls failed" in run["error"]
    assert "broken(array(float64, 1d, C), array(float64, 1d, C))" in run["error"]
    assert "twice" in run["error"]  # the compile's own error, compiled again in this process
    assert run["stats"]["compiles"] - run["precompile_stats"]["compiles"] == 1  # k1 at its launch; k0 was ready


def test_a_warm_precompile_loads_from_the_disk_cache_and_starts_no_process(kernels):
    calls = [(kernels.k0, (od.float64[::1], od.float64[::1])), (kernels.k1, (np.zeros(8), X))]
    assert [call.how for call in od.precompile(calls, target="cpu", workers=1)] == ["compiled here"] * 2
    assert [call.how for call in od.precompile(calls, target="cpu")] == ["in memory"] * 2
    runtime.reset()  # as a new process
    report = od.precompile(calls, target="cpu")
    assert [call.how for call in report] == ["loaded from the disk cache"] * 2
    assert report.spawned == 0 and od.stats()["compiles"] == 0
    assert _launched(kernels.k1) == (2 * X + 1).tolist()
    assert od.stats()["compiles"] == 0


def _main_def_and_closure(kernels):
    in_main: dict = {"__name__": "__main__"}
    exec(MAIN_KERNEL, in_main)
    offset = 3.0

    def closure(out, x):
        i = kernels.cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + offset

    return in_main["doubled"], closure


def test_kernels_a_spawned_worker_cannot_import_are_compiled_here_with_the_reason(kernels, monkeypatch):
    monkeypatch.setattr(precompiling, "forks", lambda calls: None)  # as on macOS, or a driver's linker
    doubled, closure = _main_def_and_closure(kernels)
    report = od.precompile([(doubled, (np.zeros(8), X)), (closure, (np.zeros(8), X))], target="cpu", workers=2)
    assert [call.how for call in report] == ["compiled here"] * 2
    assert "defined in __main__" in report[0].note and "defined inside a function" in report[1].note
    assert report.spawned == 0
    assert _launched(closure) == (X + 3).tolist()


def test_cpu_workers_are_forks_that_compile_any_call_this_process_could(kernels):
    """A forked worker has this process's every definition: a def of ``__main__`` compiles there, and is
    loaded here from the entry it stored (a closure's code, which the disk cache does not store, is compiled
    here again, saying so)."""
    call = KernelCall.of(kernels.k0, (np.zeros(8), X), "cpu")
    assert (precompiling.forks([call]) is not None) is sys.platform.startswith("linux")
    if not sys.platform.startswith("linux"):
        pytest.skip("workers are forks on Linux only")
    doubled, closure = _main_def_and_closure(kernels)
    calls = [(kernels.k0, (np.zeros(8), X)), (doubled, (np.zeros(8), X)), (kernels.k1, (np.zeros(8), X)),
             (closure, (np.zeros(8), X))]  # fmt: skip
    report = od.precompile(calls, target="cpu", workers=2)
    assert report.spawned == 1
    assert [call.how for call in report] == ["compiled here", "compiled in a worker", "compiled here", "compiled here"]
    assert report[1].process != report[0].process and "cannot store" in report[3].note
    compiles = od.stats()["compiles"]
    assert _launched(doubled) == (2 * X).tolist() and _launched(closure) == (X + 3).tolist()
    assert _launched(kernels.k1) == (2 * X + 1).tolist() and od.stats()["compiles"] == compiles


def test_a_forked_worker_that_dies_leaves_its_share_compiled_here(kernels, monkeypatch):
    monkeypatch.setattr(precompiling, "_compile_in_worker", lambda make: os._exit(3))
    if not sys.platform.startswith("linux"):
        pytest.skip("workers are forks on Linux only")
    calls = [(kernels.k0, (np.zeros(8), X)), (kernels.k1, (np.zeros(8), X))]
    report = od.precompile(calls, target="cpu", workers=2)
    assert [call.how for call in report] == ["compiled here"] * 2
    assert "ended without answering (status" in report[1].note
    assert _launched(kernels.k1) == (2 * X + 1).tolist()


def test_a_forked_worker_that_hangs_is_killed_and_its_share_compiled_here(kernels, monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("workers are forks on Linux only")
    monkeypatch.setattr(precompiling, "_compile_in_worker", lambda make: time.sleep(600))
    monkeypatch.setattr(precompiling, "ANSWER_WITHIN", 0.5)
    started = time.perf_counter()
    report = od.precompile([(kernels.k0, (np.zeros(8), X)), (kernels.k1, (np.zeros(8), X))], target="cpu", workers=2)
    assert time.perf_counter() - started < 60
    assert [call.how for call in report] == ["compiled here"] * 2
    assert "gave no answer in 0.5 s: killed" in report[1].note
    assert _launched(kernels.k1) == (2 * X + 1).tolist()


def test_cuda_workers_are_forks_too_and_compile_a_def_of_main(kernels):
    """NVVM is a library a fork can call: the CUDA target's workers are forks on Linux (where linking needs no
    driver), compiling what a spawned worker could not import -- a def of ``__main__``."""
    if not sys.platform.startswith("linux"):
        pytest.skip("workers are forks on Linux only")
    doubled, _ = _main_def_and_closure(kernels)
    types = (od.float64[::1], od.float64[::1])
    report = od.precompile([(kernels.k0, types), (doubled, types)], target="cuda", workers=2)
    assert [call.how for call in report] == ["compiled here", "compiled in a worker"] and report.spawned == 1
    compiles = od.stats()["compiles"]
    assert ".entry" in od.code_ptx(doubled, *types) and od.stats()["compiles"] == compiles


def test_a_cuda_compile_fork_never_asks_the_driver_and_links_for_its_parents_device():
    """In a forked compile worker the driver is never asked: ``make_current`` refuses (its parent then compiles
    the call), and a kernel stored for its parent's launches holds the cubin under the key the parent's
    launches look it up by, which the parent asked the driver for before the fork."""
    from overdub.targets import cuda as cuda_target

    cuda_driver = importlib.import_module("overdub.targets.cuda.driver")  # the package's `driver` is a function

    if not cuda_target._links_without_driver():
        pytest.skip("no nvJitLink here to link a cubin")
    target = cuda_target.target_for((9, 0))
    code = target.compile_kernel(lambda out: None, (od.float64[::1],))
    try:
        cuda_driver.become_compile_fork(cuda_driver.CompileFork((9, 0), (9, 0, "a")))
        with pytest.raises(RuntimeError, match="forked compile worker cannot use the CUDA driver"):
            cuda_driver.make_current()
        cuda_driver.make_current_if_gpu()  # a compile's: nothing to do in a fork
        target._launches_load_cubins = lambda: True  # as for its parent's device
        stored = target.serialized(code)
    finally:
        cuda_driver._fork.clear()
        del target._launches_load_cubins
    assert list(stored["library"]["cubin_cache"]) == [(9, 0, "a")]


def test_calls_are_checked_before_anything_compiles(kernels):
    with pytest.raises(TypeError, match=r"k0.*cannot take the 1 argument"):
        od.precompile([(kernels.k0, (X,))], target="cpu")
    with pytest.raises(TypeError, match=r"\(kernel, args\) pairs"):
        od.precompile([kernels.k0], target="cpu")
    with pytest.raises(ValueError, match="workers=0"):
        od.precompile([(kernels.k0, (X, X))], target="cpu", workers=0)
    assert od.stats()["compiles"] == 0


def test_an_od_jit_kernel_is_precompiled_as_its_launches_compile_it(kernels):
    jitted = od.jit(target="cpu", fastmath=True)(kernels.k1)
    assert [call.how for call in od.precompile([(jitted, (np.zeros(8), X))])] == ["compiled here"]
    out = np.zeros(8)
    jitted[1, 8](out, X)
    assert out.tolist() == (2 * X + 1).tolist() and od.stats()["compiles"] == 1


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_worker_makes_the_same_compile_job_from_the_call_it_receives(kernels, target):
    calls = [
        KernelCall.of(kernels.k1, (od.float64[::1], od.float64[::1]), target, typed=True),
        KernelCall.of(
            kernels.with_state, (od.float64[::1], od.float64[::1]), target, kernels.counting, 1.5, typed=True
        ),
    ]
    for call in calls:
        by_name, why = precompiling._by_name(call)
        assert why == ""
        assert pickle.loads(pickle.dumps(by_name)).call().job == call.job


def test_precompiled_cuda_kernels_are_what_code_ptx_reads(kernels):
    types = (od.float64[::1], od.float64[::1])
    od.precompile([(kernels.k0, types)], target="cuda")
    runtime.reset()  # as a new process
    assert ".entry" in od.code_ptx(kernels.k0, *types)
    assert (od.stats()["compiles"], od.stats()["disk_hits"]) == (0, 1)


@pytest.mark.gpu
def test_a_fresh_process_launches_cuda_kernels_precompiled_in_parallel_from_their_cubins(kernels, cupy):
    first = _fresh_process(kernels, "cuda", "k0", "k1")
    assert [how for how, _, _ in first["report"]] == ["compiled here", "compiled in a worker"]
    assert _counts(first["stats"]) == _counts(first["precompile_stats"])
    fresh = _fresh_process(kernels, "cuda")
    assert fresh["outs"] == first["outs"] == [(2 * X).tolist(), (2 * X + 1).tolist()]
    assert (fresh["stats"]["compiles"], fresh["stats"]["disk_hits"]) == (0, 2)


def test_by_default_workers_start_only_where_they_beat_compiling_here():
    from overdub.precompiling import STARTUP_GUESS, worth_it

    assert worth_it(20, 0.08, STARTUP_GUESS, 16) == 1  # 1.6 s of compiles: a worker's startup alone is more
    assert worth_it(20, 0.5, STARTUP_GUESS, 16) > 1  # 10 s: workers pay
    processes = worth_it(40, 1.0, 2.0, 16)
    assert 2 <= processes <= 16 and 2.0 + -(-40 // processes) * 1.0 < 0.9 * 40
    assert worth_it(5, 10.0, 1.0, 1) == 1  # one CPU: no worker
    assert worth_it(1, 100.0, 0.1, 16) == 1
    # forked workers may outnumber the CPUs: 19 calls in 19 processes sharing 16 CPUs, not 2 calls each in 10
    assert worth_it(19, 1.0, 0.05, 16) == 10 and worth_it(19, 1.0, 0.05, 16, forks=True) == 19
    assert worth_it(64, 1.0, 0.05, 16, forks=True) == 16  # 4 calls each: more processes only share the CPUs
    assert worth_it(40, 1.0, 0.05, 16, forks=True) <= 32


def test_the_choice_times_a_compile_after_the_first_whose_cost_is_the_compilers_own_start(kernels, monkeypatch):
    """The first compile of a process pays the compiler's start, which would make workers look worth starting
    where they are not: the second compile here is what a compile costs. (A clock of the test's own: the
    first compile takes 100 s on it, the others 1 s.)"""
    compiled_here, seen, clock = precompiling._compiled_here, [], [0.0]

    def timed(call, note, failures):
        clock[0] += 100.0 if not seen else 1.0
        seen.append(call)
        return compiled_here(call, note, failures)

    asked = []
    monkeypatch.setattr(precompiling, "_compiled_here", timed)
    monkeypatch.setattr(precompiling, "time", types.SimpleNamespace(perf_counter=lambda: clock[0], time=time.time))
    monkeypatch.setattr(precompiling, "worth_it", lambda calls, per_call, *rest: asked.append((calls, per_call)) or 1)
    calls = [(kernels.k0, (np.zeros(8), X)), (kernels.k1, (np.zeros(8), X)), (kernels.k0, (np.zeros(8, np.float32), X))]
    report = od.precompile(calls, target="cpu")
    assert report.spawned == 0 and len(seen) == 3
    assert asked == [(1, 1.0)]  # one call left to compile, at the second compile's cost
    if not sys.platform.startswith("linux"):
        return
    # where workers are forks and more than FORK_AFTER_ONE calls are left, the first compile's time decides
    seen.clear()
    asked.clear()
    more = [(kernels.k0, (np.zeros(8, dtype), X)) for dtype in (np.int8, np.int16, np.int32, np.uint8, np.uint16)]
    od.precompile(more, target="cpu")
    assert asked == [(4, 100.0)] and len(seen) == 5


def test_a_small_program_precompiled_by_default_compiles_here_and_starts_no_process(kernels):
    calls = [(kernels.k0, (np.zeros(8), X)), (kernels.k1, (np.zeros(8), X))]
    report = od.precompile(calls, target="cpu")
    assert report.spawned == 0 and [call.how for call in report] == ["compiled here"] * 2


HELD_LOCK_PROGRAM = """
import json, os, signal, sys, threading
import numpy as np
import overdub as od
from overdub import world

kernels = __import__(sys.argv[1])
fork = os.fork


def fork_while_another_thread_compiles():  # another thread takes a compile's lock right before the fork
    grabbed, done = threading.Event(), threading.Event()

    def holding():
        with world.lock:
            grabbed.set()
            done.wait()

    threading.Thread(target=holding, daemon=True).start()
    grabbed.wait(0.5)  # (where od.precompile holds the lock itself, the thread waits for it: go on)
    pid = fork()
    if pid:
        done.set()
    else:  # a worker stuck on that lock dies in time: its share is then compiled here (and the test fails)
        signal.alarm(20)
    return pid


os.fork = fork_while_another_thread_compiles
x = np.arange(8.0)
report = od.precompile([(kernels.k0, (np.zeros(8), x)), (kernels.k1, (np.zeros(8), x))], target="cpu", workers=2)
print(json.dumps([call.how for call in report]))
"""


def test_a_fork_made_while_another_thread_holds_the_compilers_lock_compiles(kernels, tmp_path):
    """od.precompile forks holding the compile's locks: a fork made while another thread held one would leave it
    held in the child, by a thread the child does not have, and the worker would wait for it forever."""
    if not sys.platform.startswith("linux"):
        pytest.skip("workers are forks on Linux only")
    done = run_python(
        "-c", HELD_LOCK_PROGRAM, kernels.__name__, path=[str(pathlib.Path(kernels.__file__).parent)], timeout=20
    )
    assert last_json(done) == ["compiled here", "compiled in a worker"]
