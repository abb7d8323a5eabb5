"""The CPU target's native launch function (``_fastlaunch.cpu_launcher``, overdub/targets/cpu/native.py): every
guard the generated launch function checks, checked in C too -- another dtype, rank, layout or writeability takes
the slow path and the right code --, the launch tuple packed as numba lays it out, and the grid run as the
generated function runs it."""

import threading

import numpy as np
import pytest
from numba import cuda

import overdub as od
from overdub.runtime import runtime
from overdub.targets import get_target
from overdub.targets.cpu import runner

fastlaunch = pytest.importorskip("overdub._fastlaunch")
pytestmark = pytest.mark.skipif(runner.SYMBOLS is None, reason="the native CPU grid runner is not built")


def _launchers(kernel):
    """The launch functions the launch table holds for ``kernel``, of every argument classes."""
    return [launch for key, launches in runtime.launches.items() if key[0]() is kernel for launch in launches]


def mixed(out, a, b, n, scale, flag, m):
    i = cuda.grid(1)
    if i < n:
        value = a[i] * scale + b[i % m, 0]
        out[i] = value if flag else -value


def test_a_launch_of_numpy_arrays_and_scalars_is_native_and_packs_every_argument_where_numba_lays_it():
    """int, float, bool, int32 and float32 scalars between arrays of 1 and 2 dimensions: each read at its own
    offset of the launch tuple (a bool, a byte; an int32 after it, aligned) -- the results are numpy's."""
    n, m = 1000, 7
    a = np.arange(n, dtype=np.float32)
    b = np.arange(2 * m, dtype=np.float64).reshape(m, 2)
    out = np.zeros(n)
    for flag, scale in ((True, np.float32(0.5)), (False, np.float32(2.0))):
        od.cuda(mixed, out, a, b, n, scale, flag, np.int32(m), blocks=4, threads=256, target="cpu")
        expected = a.astype(np.float64) * np.float64(scale) + b[np.arange(n) % m, 0]
        np.testing.assert_allclose(out, expected if flag else -expected, rtol=1e-6)
    assert any(type(launch) is fastlaunch.Launcher for launch in _launchers(mixed))


def copy_rows(out, a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        for j in range(a.shape[1]):
            out[i, j] = a[i, j] + 1


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,  # C
        lambda a: np.asfortranarray(a),  # F
        lambda a: a[:, ::2],  # neither
        lambda a: a.astype(np.float32),  # another dtype
        lambda a: _read_only(a),  # read-only
    ],
    ids=["C", "F", "strided", "float32", "read-only"],
)
def test_an_array_that_differs_from_the_guarded_one_takes_the_slow_path_and_its_own_code(make):
    """Arrays of the same class (numpy's ndarray) the C guard tells apart -- layout, dtype, writeability -- each
    launch code compiled for them, with their strides, and give numpy's answer."""
    base = np.arange(48.0).reshape(6, 8)
    out = np.zeros((6, 8))
    od.cuda(copy_rows, out, base, blocks=1, threads=8, target="cpu")  # the C-layout launcher first
    a = make(base)
    out = np.zeros(a.shape, dtype=np.float64)
    od.cuda(copy_rows, out, a, blocks=1, threads=8, target="cpu")
    np.testing.assert_array_equal(out, np.asarray(a, dtype=np.float64) + 1)


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def test_a_python_int_past_int64_takes_the_unsigned_kernel_and_a_numpy_shmem_is_normalised():
    def store(out, k):
        out[0] = k

    out = np.zeros(1, dtype=np.uint64)
    od.cuda(store, out, 5, target="cpu")
    od.cuda(store, out, 2**63 + 5, target="cpu")
    assert out[0] == 2**63 + 5
    od.cuda(store, out, 7, shmem=np.int64(0), target="cpu")
    assert out[0] == 7


def test_a_redefined_callee_makes_the_native_launch_recompile(make_module):
    mod = make_module(
        """
import overdub as od
from numba import cuda

@od.function
def f(x):
    return x + 1

def k(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = f(out[i])
"""
    )
    out = np.zeros(64)
    od.cuda(mod.k, out, blocks=2, threads=32, target="cpu")
    assert any(type(launch) is fastlaunch.Launcher for launch in _launchers(mod.k))
    mod.run("@od.function\ndef f(x):\n    return x + 10\n")
    od.cuda(mod.k, out, blocks=2, threads=32, target="cpu")
    assert (out == 11).all()


def test_a_stream_is_checked_and_a_bad_one_refused():
    def fill(out):
        out[cuda.grid(1)] = 3

    out = np.zeros(8)
    od.cuda(fill, out, threads=8, target="cpu")
    with pytest.raises(TypeError):
        od.cuda(fill, out, threads=8, stream="not a stream", target="cpu")
    od.cuda(fill, out, threads=8, target="cpu")
    assert (out == 3).all()


def test_a_grid_the_runner_refuses_raises_its_error_from_the_native_launch():
    """A grid sync over more blocks than the runner holds: the runner's error, named, through the C launch."""

    def synced(out):
        cuda.cg.this_grid().sync()
        out[0] = 1

    out = np.zeros(1)
    od.cuda(synced, out, blocks=2, threads=32, target="cpu")
    with pytest.raises(Exception, match="grid sync needs every block"):
        od.cuda(synced, out, blocks=4096, threads=1024, target="cpu")
    od.cuda(synced, out, blocks=2, threads=32, target="cpu")  # and the launch after it runs
    assert out[0] == 1


def test_a_printing_kernel_flushes_at_the_end_of_its_native_launch(capfd):
    def say(x):
        if cuda.grid(1) == 0:
            print(x)

    od.cuda(say, 41, threads=4, target="cpu")
    assert capfd.readouterr().out == "41\n"


def test_a_struct_argument_keeps_the_generated_launch_function():
    @od.struct
    class Pair:
        a: od.float64
        b: od.float64

    def total(out, p):
        out[0] = p.a + p.b

    out = np.zeros(1)
    od.cuda(total, out, Pair(1.5, 2.0), target="cpu")
    assert out[0] == 3.5
    assert all(type(launch) is not fastlaunch.Launcher for launch in _launchers(total))


def test_threads_launching_at_once_each_get_their_own_results():
    def scale(out, a, k):
        i = cuda.grid(1)
        if i < a.size:
            out[i] = a[i] * k

    a, failures = np.arange(4096.0), []

    def worker(k):
        out = np.zeros_like(a)
        for _ in range(200):
            od.cuda(scale, out, a, float(k), blocks=16, threads=256, target="cpu")
            if not (out == a * k).all():
                failures.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


# --- a store at a constant index into a launch's array ------------------------------------------------------


def every_thread_stores(out, x, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[i + 1] = x[i] * 2.0
        out[0] = -0.0


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_every_thread_storing_one_value_at_a_constant_index_leaves_it_there(workers):
    """The store skipped where memory holds its bits: -0.0 over 0.0 still stores (bits differ)."""
    target = get_target("cpu")
    before = target.workers
    target.workers = workers
    try:
        n = 5000
        out, x = np.zeros(n + 1), np.arange(n, dtype=np.float64)
        od.cuda(every_thread_stores, out, x, n, blocks=8, threads=128, target="cpu")
        assert out[0] == 0 and np.signbit(out[0])
        np.testing.assert_array_equal(out[1:], 2 * x)
    finally:
        target.workers = before


def test_constant_index_stores_of_ints_bools_and_2d_indices_and_a_running_sum_give_numpys_answers():
    def stores(a, b, c, x):
        if cuda.grid(1) == 0:
            a[1, 2] = 7
            b[0] = True
            b[1] = False
            for k in range(x.size):  # a constant-index store in a loop: each iteration's value
                c[0] = c[0] + x[k]

    a, b, c, x = np.zeros((2, 3), np.int32), np.array([False, True]), np.zeros(1), np.arange(10.0)
    od.cuda(stores, a, b, c, x, threads=32, target="cpu")
    assert a[1, 2] == 7 and a.sum() == 7
    assert b.tolist() == [True, False]
    assert c[0] == 45


def test_the_cpu_code_of_a_constant_index_store_compares_the_bits_it_holds_first():
    n = 100
    out, x = np.zeros(n + 1), np.arange(n, dtype=np.float64)
    lines = od.code_llvm(every_thread_stores, out, x, n, target="cpu").splitlines()
    store = next(i for i, line in enumerate(lines) if "store double -0.0" in line)
    assert any("icmp" in line and "-9223372036854775808" in line for line in lines[:store])  # -0.0's bits


def chosen_store(out_even, out_odd, x, j):
    out = out_even if j % 2 == 0 else out_odd  # stumpy's QT_out: one of two arguments, by a branch
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = x[i]
        out[0] = 5.0


def local_store(out, n):
    la = cuda.local.array(4, np.int64)
    la[1] = 1  # a local array's element is uninitialised: reading it to compare would be undefined
    la[2] = 2
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = la[1] + la[2 if i % 2 else 1]


def test_a_store_into_an_argument_chosen_by_a_branch_compares_and_one_into_a_local_array_does_not(monkeypatch):
    from overdub.targets.cpu import stores

    decided = []
    rule = stores._launch_array
    monkeypatch.setattr(stores, "_launch_array", lambda lower, inst: decided.append(rule(lower, inst)) or decided[-1])
    x = np.arange(64.0)
    even, odd = np.zeros(64), np.zeros(64)
    lines = od.code_llvm(chosen_store, even, odd, x, 2, target="cpu").splitlines()
    store = next(i for i, line in enumerate(lines) if "store double 5.0" in line)
    assert any("icmp" in line and "4617315517961601024" in line for line in lines[:store])  # 5.0's bits
    assert decided and all(decided)
    od.cuda(chosen_store, even, odd, x, 3, blocks=2, threads=32, target="cpu")
    assert odd[0] == 5 and (odd[1:] == x[1:]).all() and not even.any()
    decided.clear()
    od.code_llvm(local_store, np.zeros(8, np.int64), 8, target="cpu")
    assert decided and not any(decided)  # each of la's stores is numba's


@pytest.mark.parametrize("workers", [1, 2])
def test_a_kernel_storing_into_a_local_array_at_constant_indices_then_returning_early_runs_right(workers):
    """The differential fuzzer's seed 27 in little: constant stores into a local array, an early return (the
    kernel then runs its threads as fibers where it may raise), a generic function called after."""
    target = get_target("cpu")
    before = target.workers
    target.workers = workers
    try:
        out = np.zeros(40, np.int64)
        od.cuda(local_store, out, 37, blocks=3, threads=16, target="cpu")
        assert out[:37].tolist() == [3 if i % 2 else 2 for i in range(37)] and not out[37:].any()
    finally:
        target.workers = before
