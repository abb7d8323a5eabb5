"""Threads that wait for each other on the CPU target: barriers, shared memory (static and dynamic), warp
operations, grid groups and atomics, with blocks running in parallel -- each result compared with numpy's.

The kernels live in sync_kernels.py; tests/test_gpu.py runs the same ones on the GPU and compares.
"""

import os
import shutil
import signal
import sysconfig
import textwrap

import numpy as np
import pytest
from numba import cuda

import overdub as od
import sync_kernels as k
from helpers import SCALED, in_threads, run_python
from overdub.runtime import runtime
from overdub.targets import cpu
from overdub.targets.cpu import runner as cpu_runner

pytestmark = pytest.mark.usefixtures("four_workers")  # blocks interleave on more threads than the cores


def _can_build_extensions() -> bool:
    """Could ``pip install`` have built the C extensions here (a C compiler and Python's headers)?"""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    return shutil.which(compiler) is not None and os.path.exists(headers)


@pytest.fixture(autouse=True)
def native_runner(request):
    """Every test here but those marked ``no_runner`` needs the native runner, and FAILS without it: CI
    installs overdub with ``pip install -e .``, which builds it, and a build that silently lost it must not
    pass. OVERDUB_ALLOW_NO_CPUGRID=1 skips them instead (a machine without a C compiler)."""
    if cpu_runner.SYMBOLS is not None or request.node.get_closest_marker("no_runner"):
        return
    if os.environ.get("OVERDUB_ALLOW_NO_CPUGRID") == "1":
        pytest.skip("overdub.targets.cpu._cpugrid is not built (OVERDUB_ALLOW_NO_CPUGRID=1)")
    if not _can_build_extensions():
        pytest.skip(
            "overdub.targets.cpu._cpugrid is not built, and this machine has no C compiler or Python headers to build it"
        )
    pytest.fail(
        "overdub.targets.cpu._cpugrid (the CPU grid runner, overdub/targets/cpu/_cpugrid.c) is not built: install with "
        "`pip install -e .` where a C compiler is available, or set OVERDUB_ALLOW_NO_CPUGRID=1 to skip"
    )


# --- block barriers and shared memory --------------------------------------------------------------------


def test_shared_memory_tree_reduction_sums_each_block():
    a = np.random.default_rng(1).random(1000)
    blocks = -(-a.size // k.REDUCE_THREADS)
    out = np.zeros(blocks)
    od.cuda(k.tree_sum, a, out, blocks=blocks, threads=k.REDUCE_THREADS, target="cpu")
    padded = np.concatenate([a, np.zeros(blocks * k.REDUCE_THREADS - a.size)])
    np.testing.assert_allclose(out, padded.reshape(blocks, -1).sum(axis=1))


def test_tiled_shared_memory_matmul_matches_numpy():
    rng = np.random.default_rng(2)
    n = 48
    A, B = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    C = np.zeros((n, n), np.float32)
    grid = -(-n // k.TPB)
    od.cuda(k.docs_fast_matmul, A, B, C, blocks=(grid, grid), threads=(k.TPB, k.TPB), target="cpu")
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)


def test_a_barrier_in_a_loop_passes_data_between_threads():
    a = np.arange(3 * 64, dtype=np.int64)
    out = np.zeros_like(a)
    od.cuda(k.rotate, a, out, 5, blocks=3, threads=64, target="cpu")
    expected = np.concatenate([np.roll(block, -5) for block in a.reshape(3, 64)])
    np.testing.assert_array_equal(out, expected)


def test_dynamic_shared_memory_has_the_launch_s_shmem_bytes():
    a = np.arange(96.0)
    out = np.zeros_like(a)
    od.cuda(k.reverse_dynamic, a, out, blocks=3, threads=32, shmem=32 * 8, target="cpu")
    expected = np.concatenate([block[::-1] for block in a.reshape(3, 32)]) + 32
    np.testing.assert_array_equal(out, expected)


def test_two_shared_arrays_of_one_kernel_do_not_alias(make_module):
    m = make_module("""
        import numba
        import numpy as np
        from numba import cuda

        def kernel(out):
            x = cuda.shared.array(32, numba.int64)
            y = cuda.shared.array(shape=(32,), dtype=np.int64)
            t = cuda.threadIdx.x
            x[t] = t
            y[t] = 100 + t
            cuda.syncthreads()
            out[t] = x[31 - t] * 1000 + y[31 - t]
    """)
    out = np.zeros(32, np.int64)
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    t = np.arange(32)
    np.testing.assert_array_equal(out, (31 - t) * 1000 + 100 + 31 - t)


def test_each_block_has_its_own_shared_memory(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(out):
            s = cuda.shared.array((2, 16), numba.float32)
            t = cuda.threadIdx.x
            s[t % 2, t // 2] = cuda.blockIdx.x
            cuda.syncthreads()
            total = 0.0
            for j in range(16):
                total += s[0, j] + s[1, j]
            out[cuda.blockIdx.x, t] = total
    """)
    out = np.zeros((20, 32), np.float32)
    od.cuda(m.kernel, out, blocks=20, threads=32, target="cpu")
    np.testing.assert_array_equal(out, np.repeat(np.arange(20, dtype=np.float32)[:, None] * 32, 32, axis=1))


def test_syncthreads_count_and_or_reduce_a_predicate_over_the_block():
    a = np.ones(3 * 64, np.int64)
    a[64:70] = 0  # block 1: 58 true
    a[128:] = 0  # block 2: none
    out = np.zeros((3, 3), np.int64)
    od.cuda(k.barrier_votes, a, out, blocks=3, threads=64, target="cpu")
    np.testing.assert_array_equal(out, [[64, 1, 1], [58, 0, 1], [0, 0, 0]])


def test_threads_that_exited_count_as_arrived_at_a_barrier(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(a, out):
            t = cuda.threadIdx.x
            if t >= a.size:
                return
            s = cuda.shared.array(64, numba.int64)
            s[t] = a[t]
            cuda.syncthreads()
            out[t] = s[a.size - 1 - t]
    """)
    a = np.arange(40, dtype=np.int64)
    out = np.zeros(40, np.int64)
    od.cuda(m.kernel, a, out, blocks=1, threads=64, target="cpu")
    np.testing.assert_array_equal(out, a[::-1])


def test_a_callee_that_synchronizes_makes_its_kernel_run_its_threads_as_fibers():
    a = np.arange(2 * 64, dtype=np.int64) % 7
    out = np.zeros_like(a)
    od.cuda(k.scan_in_callee, a, out, blocks=2, threads=64, target="cpu")
    expected = np.concatenate([np.cumsum(block) for block in a.reshape(2, 64)])
    np.testing.assert_array_equal(out, expected)


# --- warps -----------------------------------------------------------------------------------------------


def test_warp_shuffle_reduction_sums_every_warp():
    a = np.arange(512, dtype=np.int64)
    out = np.zeros(1, np.int64)
    od.cuda(k.warp_sum, a, out, blocks=4, threads=128, target="cpu")
    assert out[0] == a.sum()


def test_warp_functions_have_cuda_semantics_for_warps_of_32():
    a = np.arange(64, dtype=np.int64)
    a[40] = 5
    out = np.zeros((64, 6), np.int64)
    od.cuda(k.warp_ops, a, out, blocks=1, threads=64, target="cpu")
    lanes, warps = a.reshape(2, 32), np.arange(64) // 32
    np.testing.assert_array_equal(out[:, 0], lanes[:, 3][warps])
    up = np.concatenate([np.concatenate([[w[0]], w[:-1]]) for w in lanes])
    np.testing.assert_array_equal(out[:, 1], up)
    np.testing.assert_array_equal(out[:, 2], lanes.sum(axis=1)[warps])
    assert (out[:, 3] == 1).all()
    np.testing.assert_array_equal(out[:, 4], [1 if (lanes[w] == 5).any() else 0 for w in warps])
    ballots = [sum(1 << i for i in range(32) if lanes[w][i] % 2 == 0) for w in (0, 1)]
    np.testing.assert_array_equal(out[:, 5], np.array(ballots)[warps])


def test_docs_warp_reduction_with_activemask_and_warpsize():
    data = np.arange(256, dtype=np.int64)
    out = np.zeros(8, np.int64)
    od.cuda(k.docs_warp_reduce, data, out, blocks=2, threads=128, target="cpu")
    np.testing.assert_array_equal(out, data.reshape(8, 32).sum(axis=1))


# --- grids -----------------------------------------------------------------------------------------------


def test_a_grid_sync_separates_two_phases_across_blocks():
    a, b = np.zeros(8 * 64, np.int64), np.zeros(8 * 64, np.int64)
    od.cuda(k.two_phase, a, b, blocks=8, threads=64, target="cpu")
    i = np.arange(a.size)
    np.testing.assert_array_equal(b, ((i + 64) % a.size) * 3)


def test_docs_sequential_rows_with_a_grid_group():
    M = np.zeros((16, 128), np.int32)
    od.cuda(k.docs_sequential_rows, M, blocks=4, threads=32, target="cpu")
    expected = np.zeros_like(M)
    for row in range(1, 16):
        expected[row] = expected[row - 1, ::-1] + 1
    np.testing.assert_array_equal(M, expected)


def test_docs_shared_memory_reduction_in_one_block():
    data = np.arange(k.nelem, dtype=np.int32)
    od.cuda(k.docs_array_sum, data, blocks=1, threads=k.nelem, target="cpu")
    assert data[0] == np.arange(k.nelem).sum()


def test_od_jit_kernels_run_the_docs_matmul_on_the_cpu():
    rng = np.random.default_rng(3)
    A, B = rng.random((32, 32), dtype=np.float32), rng.random((32, 32), dtype=np.float32)
    C = np.zeros((32, 32), np.float32)
    kernel = od.jit(k.docs_fast_matmul.py_func, target="cpu")
    kernel[(2, 2), (k.TPB, k.TPB)](A, B, C)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)


# --- atomics under parallel blocks -----------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 4])
def test_integer_atomics_are_exact_on_one_worker_and_on_several(workers):
    cpu.TARGET.workers = workers
    a = np.random.default_rng(4).integers(0, 1000, 200_000)
    out = np.zeros(13, np.int64)
    od.cuda(k.histogram, a, out, blocks=-(-a.size // 128), threads=128, target="cpu")
    np.testing.assert_array_equal(out, 50 * np.bincount(a % 13, minlength=13))


@pytest.mark.parametrize("workers", [1, 4])
def test_atomic_max_min_and_cas_are_exact_on_one_worker_and_on_several(workers):
    cpu.TARGET.workers = workers
    a = np.random.default_rng(5).integers(-(10**9), 10**9, 100_000)
    out = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0])
    od.cuda(k.atomic_extremes, a, out, blocks=-(-a.size // 64), threads=64, target="cpu")
    np.testing.assert_array_equal(out, [a.max(), a.min(), (a > 0).sum()])


@pytest.mark.parametrize("workers", [1, 4])
def test_float_atomic_add_and_the_other_integer_atomics(make_module, workers):
    cpu.TARGET.workers = workers
    m = make_module("""
        from numba import cuda

        def kernel(f, u, i):
            t = cuda.grid(1)
            cuda.atomic.add(f, 0, 0.5)
            cuda.atomic.sub(f, 1, 0.25)
            cuda.atomic.inc(u, 0, 9)
            cuda.atomic.dec(u, 1, 9)
            cuda.atomic.or_(i, 0, 1 << (t % 40))
            cuda.atomic.and_(i, 1, ~(1 << (t % 40)))
            cuda.atomic.xor(i, 2, 1)
            cuda.atomic.exch(i, 3, 7)
    """)
    f, u = np.zeros(2), np.zeros(2, np.uint32)
    i = np.array([0, -1, 0, 0])
    od.cuda(m.kernel, f, u, i, blocks=25, threads=40, target="cpu")
    assert f[0] == 500.0 and f[1] == -250.0
    assert u[0] == 1000 % 10 and u[1] == (-1000) % 10
    assert i[0] == (1 << 40) - 1 and i[1] == -(1 << 40) and i[2] == 0 and i[3] == 7


# --- errors ----------------------------------------------------------------------------------------------


def test_threads_waiting_at_different_barriers_are_a_deadlock_error(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            if cuda.threadIdx.x == 0:
                cuda.syncthreads()
            else:
                cuda.syncwarp()
            out[0] = 1
    """)
    with pytest.raises(cpu.CPUGridError, match=r"kernel\(.*deadlock in block \(0, 0, 0\)"):
        od.cuda(m.kernel, np.zeros(1), blocks=1, threads=64, target="cpu")
    od.cuda(m.kernel, np.zeros(1), blocks=1, threads=1, target="cpu")  # the runner is usable afterwards


def test_an_exception_in_a_fiber_reaches_a_debug_launch(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            t = cuda.threadIdx.x
            cuda.syncthreads()
            if cuda.blockIdx.x == 3 and t == 5:
                raise ValueError("thread 5 of block 3")
            cuda.syncthreads()
            out[cuda.grid(1)] = 1
    """)
    with pytest.raises(ValueError, match="thread 5 of block 3"):  # with debug: without, the thread ends alone
        od.cuda(m.kernel, np.zeros(8 * 32), blocks=8, threads=32, target="cpu", debug=True)


def test_an_exception_in_the_grid_loop_reaches_a_debug_launch(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            if cuda.grid(1) == 700:
                raise ValueError("thread 700")
            out[cuda.grid(1)] = 1
    """)
    with pytest.raises(ValueError, match="thread 700"):  # with debug: without, the thread ends alone
        od.cuda(m.kernel, np.zeros(1024), blocks=4, threads=256, target="cpu", debug=True)


def test_bad_shared_array_arguments_name_the_construct(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out, n):
            s = cuda.shared.array(n, dtype=out.dtype)
    """)
    with pytest.raises(od.CompileError, match=r"cuda\.shared\.array\(shape, dtype\) takes a constant shape"):
        od.cuda(m.kernel, np.zeros(4), 4, blocks=1, threads=4, target="cpu")


def test_overdub_cpu_threads_must_be_a_positive_number(monkeypatch):
    monkeypatch.setenv("OVERDUB_CPU_THREADS", "0")
    with pytest.raises(ValueError, match="OVERDUB_CPU_THREADS is '0'"):
        cpu.CPUTarget()
    monkeypatch.setenv("OVERDUB_CPU_THREADS", "3")
    assert cpu.CPUTarget().workers == 3


# --- parallel blocks -------------------------------------------------------------------------------------


def test_every_block_runs_once_whatever_the_number_of_workers(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            cuda.atomic.add(out, cuda.blockIdx.x, 1)
    """)
    for workers in (1, 2, 3, 7):
        cpu.TARGET.workers = workers
        out = np.zeros(1001, np.int64)
        od.cuda(m.kernel, out, blocks=1001, threads=3, target="cpu")
        assert (out == 3).all(), workers


def test_launches_from_two_python_threads_run_whole_and_in_order(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out, value):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = out[i] * 2 + value
    """)
    outs = [np.zeros(100_000, np.int64) for _ in range(2)]
    od.cuda(m.kernel, outs[0], 1, blocks=400, threads=256, target="cpu")  # compiled before the threads start

    def work(out):
        for value in range(20):
            od.cuda(m.kernel, out, value, blocks=400, threads=256, target="cpu")

    assert in_threads(work, outs) == []
    expected = 1
    for value in range(20):
        expected = expected * 2 + value
    assert (outs[0] == expected).all()
    expected = 0
    for value in range(20):
        expected = expected * 2 + value
    assert (outs[1] == expected).all()


def test_blocks_run_at_the_same_time_on_two_workers(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(flags, spins):
            me = cuda.blockIdx.x
            cuda.atomic.add(flags, me, 1)
            n = 0
            while cuda.atomic.add(flags, 1 - me, 0) == 0 and n < 2_000_000_000:
                n += 1
            spins[me] = n
    """)
    cpu.TARGET.workers = 2
    flags, spins = np.zeros(2, np.int64), np.zeros(2, np.int64)
    od.cuda(m.kernel, flags, spins, blocks=2, threads=1, target="cpu")  # blocks one after another: a block spins out
    assert (spins < 2_000_000_000).all()


def test_laneid_is_the_thread_s_lane_in_its_warp(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
            out[t] = cuda.laneid * 2 + 1
    """)
    out = np.zeros(48 * 2, np.int64)
    od.cuda(m.kernel, out, blocks=1, threads=(48, 2), target="cpu")
    np.testing.assert_array_equal(out, (np.arange(96) % 32) * 2 + 1)


def test_const_array_like_reads_a_global_table(make_module):
    m = make_module("""
        import numpy as np
        from numba import cuda

        TABLE = np.array([3, 1, 4, 1, 5], dtype=np.int64)

        def kernel(out):
            table = cuda.const.array_like(TABLE)
            i = cuda.grid(1)
            out[i] = table[i % 5]
    """)
    out = np.zeros(10, np.int64)
    od.cuda(m.kernel, out, blocks=2, threads=5, target="cpu")
    np.testing.assert_array_equal(out, [3, 1, 4, 1, 5] * 2)


def test_a_boolean_barrier_predicate_is_refused_as_on_the_gpu(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            out[0] = cuda.syncthreads_count(cuda.threadIdx.x > 1)
    """)
    with pytest.raises(od.CompileError, match=r"cuda\.syncthreads_count takes an integer predicate"):
        od.cuda(m.kernel, np.zeros(1, np.int64), blocks=1, threads=4, target="cpu")


def test_a_forked_child_runs_grids_on_a_pool_of_its_own(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            cuda.atomic.add(out, 0, 1)
    """)
    out = np.zeros(1, np.int64)
    od.cuda(m.kernel, out, blocks=64, threads=8, target="cpu")  # the parent's pool is running
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if its launch completes
        signal.alarm(60)  # a child whose launch hangs dies
        try:
            child = np.zeros(1, np.int64)
            od.cuda(m.kernel, child, blocks=64, threads=8, target="cpu")
            os._exit(0 if child[0] == 512 else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.no_runner
def test_without_the_native_runner_blocks_run_serially_and_barriers_are_refused(tmp_path):
    script = tmp_path / "no_runner.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        sys.modules["overdub.targets.cpu._cpugrid"] = None          # as where no C compiler built it
        import numpy as np
        import overdub as od
        from numba import cuda
        from overdub.targets.cpu import UnsupportedOnCPU

        def saxpy(a, x, y):
            i = cuda.grid(1)
            if i < x.size:
                y[i] = a * x[i] + y[i]

        def barrier(out):
            cuda.syncthreads()

        x, y = np.arange(1000.0), np.ones(1000)
        od.cuda(saxpy, 2.0, x, y, blocks=4, threads=256, target="cpu")
        assert (y == 2 * x + 1).all()
        try:
            od.cuda(barrier, y, blocks=1, threads=4, target="cpu")
        except UnsupportedOnCPU as error:
            assert "cuda.syncthreads needs overdub's native CPU grid runner" in str(error), error
            assert "no_runner.py:15" in str(error), error
            print("refused")
    """)
    )
    assert run_python(script).stdout.strip() == "refused"


def test_atomics_in_a_callee_compiled_on_its_own_are_exact(make_module):
    m = make_module("""
        import overdub as od
        from numba import cuda

        @od.function
        def count(out, i):
            for _ in range(50):
                cuda.atomic.add(out, i % out.size, 1)

        def kernel(a, out):
            i = cuda.grid(1)
            if i < a.size:
                count(out, a[i])
    """)
    a = np.random.default_rng(6).integers(0, 1000, 100_000)
    out = np.zeros(7, np.int64)
    od.cuda(m.kernel, a, out, blocks=-(-a.size // 128), threads=128, target="cpu")
    np.testing.assert_array_equal(out, 50 * np.bincount(a % 7, minlength=7))


def test_a_launch_state_reaches_callees_of_a_kernel_run_as_fibers(make_module):
    m = make_module(
        SCALED
        + textwrap.dedent("""
        import numba
        from numba import cuda

        def kernel(out):
            s = cuda.shared.array(32, numba.float64)
            t = cuda.threadIdx.x
            s[t] = h(float(t))
            cuda.syncthreads()
            out[cuda.grid(1)] = s[31 - t]
    """)
    )
    out = np.zeros(64)
    od.cuda(m.kernel, out, blocks=2, threads=32, target="cpu", context=m.scaled, state=1.5)
    np.testing.assert_array_equal(out, np.tile(np.arange(31, -1, -1) * 1.5, 2))
    od.cuda(m.kernel, out, blocks=2, threads=32, target="cpu", context=m.scaled, state=-2.0)
    np.testing.assert_array_equal(out, np.tile(np.arange(31, -1, -1) * -2.0, 2))


def test_local_arrays_take_keyword_shapes_and_tuples_per_thread(make_module):
    m = make_module("""
        import numpy as np
        from numba import cuda

        def kernel(out):
            t = cuda.grid(1)
            tmp = cuda.local.array(shape=(2, 3), dtype=np.int32)
            for j in range(3):
                tmp[0, j] = t + j
                tmp[1, j] = t * j
            cuda.syncthreads()                       # other threads run meanwhile: their arrays are theirs
            out[t] = tmp[0, 2] + tmp[1, 2]
    """)
    out = np.zeros(64, np.int64)
    od.cuda(m.kernel, out, blocks=2, threads=32, target="cpu")
    t = np.arange(64)
    np.testing.assert_array_equal(out, t + 2 + 2 * t)


def test_od_jit_launch_with_dynamic_shared_memory_on_the_cpu():
    kernel = od.jit(k.reverse_dynamic, target="cpu")
    a = np.arange(64.0)
    out = np.zeros_like(a)
    kernel[2, 32, 0, 32 * 8](a, out)
    expected = np.concatenate([block[::-1] for block in a.reshape(2, 32)]) + 32
    np.testing.assert_array_equal(out, expected)


def test_a_grid_sync_over_more_threads_than_can_be_resident_is_refused():
    n = 16385 * 64  # 2**20 resident threads at most
    a, b = np.zeros(n, np.int64), np.zeros(n, np.int64)
    with pytest.raises(
        cpu.CPUGridError,
        match=r"grid sync needs every block of the grid resident, and 16385 "
        r"blocks of 64 threads",
    ):
        od.cuda(k.two_phase, a, b, blocks=16385, threads=64, target="cpu")
    od.cuda(k.two_phase, a[:512], b[:512], blocks=8, threads=64, target="cpu")  # a grid that fits still runs
    assert b[0] == 64 * 3


def test_more_shared_arrays_than_the_runner_keeps_are_refused_and_64_work(make_module):
    """The runner keeps 64 shared arrays a block; a kernel with more is refused (it once freed the arrays of
    the running block, which its other threads were still using)."""

    def kernel_source(n):
        lines = [f"    s{k} = cuda.shared.array(1, numba.int64)\n    s{k}[0] = {k}" for k in range(n)]
        return (
            "import numba\nfrom numba import cuda\n\ndef kernel(out):\n"
            + "\n".join(lines)
            + "\n    cuda.syncthreads()\n    out[0] = "
            + " + ".join(f"s{k}[0]" for k in range(n))
            + "\n"
        )

    out = np.zeros(1, np.int64)
    od.cuda(make_module(kernel_source(64)).kernel, out, blocks=1, threads=2, target="cpu")
    assert out[0] == sum(range(64))
    with pytest.raises(cpu.CPUGridError, match="more than 64 shared arrays"):
        od.cuda(make_module(kernel_source(65)).kernel, out, blocks=1, threads=2, target="cpu")


# --- fiber stacks: local arrays up to CUDA's limit ---------------------------------------------------------


def _in_a_child(run) -> int:
    """``run()``'s exit code in a forked child (a crash kills the child, not the test run): 0 when it returned
    True, 1 when False, 2 on an exception, 128 + the signal's number when a signal killed it."""
    pid = os.fork()
    if pid == 0:
        signal.alarm(120)
        try:
            os._exit(0 if run() else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


_BIG_LOCAL = """
    import numba
    from numba import cuda

    def kernel(out):
        scratch = cuda.local.array({n}, numba.float64)
        t = cuda.threadIdx.x
        for j in range({n}):
            scratch[j] = j + t
        cuda.syncthreads()
        out[cuda.grid(1)] = scratch[{n} - 1] + scratch[0]
"""


def test_a_local_array_near_cudas_per_thread_limit_fits_a_fibers_stack(make_module):
    """65,000 float64 (520,000 bytes, inside CUDA's 512 KiB a thread) in a kernel that synchronizes: each fiber's
    stack is sized for the kernel's local arrays (it was 512 KiB whatever the kernel, and the process died of
    SIGSEGV)."""
    m = make_module(_BIG_LOCAL.format(n=65000))

    def run():
        out = np.zeros(2 * 8)
        od.cuda(m.kernel, out, blocks=2, threads=8, target="cpu")
        return bool((out == 64999 + 2 * np.tile(np.arange(8), 2)).all())

    assert _in_a_child(run) == 0


def test_local_arrays_of_a_kernel_and_its_callees_size_the_fiber_stacks(make_module):
    """The local arrays of callees count too (each method instance records its own, the kernel inherits them)."""
    m = make_module("""
        import numba
        from numba import cuda
        import overdub as od

        @od.function
        def fill(t: od.Integer):
            scratch = cuda.local.array(30000, numba.float64)
            for j in range(30000):
                scratch[j] = j * t
            return scratch[29999]

        def kernel(out):
            mine = cuda.local.array(30000, numba.float64)
            t = cuda.threadIdx.x
            for j in range(30000):
                mine[j] = j
            cuda.syncthreads()
            out[t] = fill(t) + mine[29999]
    """)

    def run():
        out = np.zeros(4)
        od.cuda(m.kernel, out, blocks=1, threads=4, target="cpu")
        (compiled,) = runtime.kernels.nodes()
        return cpu_runner.local_memory(compiled.needs) == 2 * 30000 * 8 and bool(
            (out == 29999 * np.arange(4) + 29999).all()
        )

    assert _in_a_child(run) == 0


def test_a_local_array_past_cudas_limit_is_a_compile_error_naming_it(make_module):
    m = make_module(_BIG_LOCAL.format(n=70000))
    with pytest.raises(od.CompileError, match=r"560000 bytes per thread at .*:6.*512 KiB"):
        od.cuda(m.kernel, np.zeros(8), blocks=1, threads=8, target="cpu")


def test_local_arrays_past_cudas_limit_together_are_a_compile_error_naming_each(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(out):
            a = cuda.local.array(40000, numba.float64)
            b = cuda.local.array(40000, numba.float64)
            t = cuda.threadIdx.x
            a[0] = t
            b[0] = t
            cuda.syncthreads()
            out[t] = a[0] + b[0]
    """)
    with pytest.raises(od.CompileError, match=r"640000 bytes of local memory per thread \(320000 bytes at .*:6"):
        od.cuda(m.kernel, np.zeros(4), blocks=1, threads=4, target="cpu")


def indices_after_a_barrier(out):
    cuda.syncthreads()
    t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
    b = cuda.blockIdx.x + cuda.gridDim.x * (cuda.blockIdx.y + cuda.gridDim.y * cuda.blockIdx.z)
    g = b * cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z + t
    out[g, 0], out[g, 1], out[g, 2] = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
    out[g, 3], out[g, 4], out[g, 5] = cuda.blockIdx.x, cuda.blockIdx.y, cuda.blockIdx.z


@pytest.mark.parametrize(
    ("blocks", "threads"), [((2, 3, 2), (3, 5, 4)), ((1, 1, 1), (7, 1, 9)), ((5, 1, 1), (64, 1, 1))]
)
def test_each_fiber_of_a_block_has_its_own_three_thread_indices(blocks, threads):
    """A kernel with a barrier runs each thread as a fiber, its indices counted through the block (x fastest)."""
    n = int(np.prod(blocks) * np.prod(threads))
    out = np.full((n, 6), -1, np.int64)
    od.cuda(indices_after_a_barrier, out, blocks=blocks, threads=threads, target="cpu")
    expected = [
        (tx, ty, tz, bx, by, bz)
        for bz in range(blocks[2])
        for by in range(blocks[1])
        for bx in range(blocks[0])
        for tz in range(threads[2])
        for ty in range(threads[1])
        for tx in range(threads[0])
    ]
    assert out.tolist() == [list(e) for e in expected]
