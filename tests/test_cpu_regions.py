"""Block regions: kernels that synchronize, cut at their barriers (overdub/targets/cpu/regions.py).

Each test runs a kernel whose threads wait for each other and checks what every thread computed, across the
shapes the cut must get right: values and local arrays live across a barrier, barriers in loops and branches,
phis swapped across a barrier, the count/and/or barriers, threads that exit or raise, frames of different sizes
one launch after another. Where a kernel must not be cut (a callee or a warp operation waits), it runs as
fibers. The kernels of tests/sync_kernels.py (test_cpu_sync.py) run as block regions too.
"""

import numpy as np
import pytest

import overdub as od
import sync_kernels as k
from overdub.call import KernelCall
from overdub.targets import cpu
from overdub.targets.cpu import regions
from overdub.targets.cpu import runner as cpu_runner

pytestmark = [
    pytest.mark.skipif(cpu_runner.SYMBOLS is None, reason="the native CPU grid runner is not built"),
    pytest.mark.usefixtures("four_workers"),
]


def mode(kernel, *args):
    """The runner's mode for ``kernel`` launched with ``args`` on the CPU target."""
    argtypes = tuple(cpu.TARGET.typeof(value) for value in args)
    return KernelCall.of(kernel, argtypes, cpu.TARGET, typed=True).compiled().launcher.mode


def test_a_kernel_with_barriers_runs_as_block_regions_and_waits_elsewhere_as_fibers():
    a = np.arange(128, dtype=np.int64)
    out = np.zeros_like(a)
    assert mode(k.rotate, a, out, 3) == "block regions"
    assert mode(k.tree_sum, a.astype(np.float64), np.zeros(2)) == "block regions"
    assert mode(k.scan_in_callee, a, out) == "block fibers"  # its callee waits: it is not cut
    assert mode(k.warp_sum, a, out) == "block fibers"
    assert mode(k.two_phase, a.astype(np.float64), np.zeros(128)) == "grid fibers"


def test_values_of_every_kind_live_across_barriers_per_thread(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(a, out):
            s = cuda.shared.array(256, numba.float64)
            t = cuda.threadIdx.x
            i = cuda.grid(1)
            x = a[i] * 2.0          # a float
            n = i * 3               # an int
            pair = (t, x)           # a tuple
            row = out[i]            # a view of the launch's array
            s[t] = x
            cuda.syncthreads()
            y = s[cuda.blockDim.x - 1 - t]
            cuda.syncthreads()
            s[t] = y + n
            cuda.syncthreads()
            row[0] = s[t] + pair[0] + pair[1]
            row[1] = n
    """)
    a = np.arange(3 * 96, dtype=np.float64)
    out = np.zeros((a.size, 2))
    od.cuda(m.kernel, a, out, blocks=3, threads=96, target="cpu")
    i = np.arange(a.size)
    t = i % 96
    mirror = 2.0 * a[(i - t) + 95 - t]
    np.testing.assert_array_equal(out[:, 0], mirror + 3 * i + t + 2.0 * a)
    np.testing.assert_array_equal(out[:, 1], 3 * i)
    assert mode(m.kernel, a, out) == "block regions"


def test_a_thread_s_local_array_keeps_its_values_across_a_barrier(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(out):
            local = cuda.local.array(8, numba.int64)
            t = cuda.threadIdx.x
            for j in range(8):
                local[j] = t * 10 + j
            cuda.syncthreads()
            total = 0
            for j in range(8):
                total += local[j]
            out[cuda.grid(1)] = total
    """)
    out = np.zeros(2 * 64, np.int64)
    od.cuda(m.kernel, out, blocks=2, threads=64, target="cpu")
    t = np.arange(out.size) % 64
    np.testing.assert_array_equal(out, 80 * t + 28)


def test_values_swapped_in_a_loop_around_a_barrier_keep_their_order(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(rounds, out):
            s = cuda.shared.array(32, numba.int64)
            t = cuda.threadIdx.x
            a, b = t, -t
            for r in range(rounds):
                a, b = b, a + r
                s[t] = a
                cuda.syncthreads()
                a += s[(t + 1) % cuda.blockDim.x]
                cuda.syncthreads()
            out[t, 0] = a
            out[t, 1] = b
    """)
    out = np.zeros((32, 2), np.int64)
    od.cuda(m.kernel, 5, out, blocks=1, threads=32, target="cpu")
    a, b = np.arange(32), -np.arange(32)
    for r in range(5):
        a, b = b, a + r
        a = a + np.roll(a, -1)
    np.testing.assert_array_equal(out, np.stack([a, b], axis=1))


def test_threads_at_different_barriers_meet_as_at_one(make_module):
    """On the GPU every ``bar.sync 0`` counts the same arrivals: threads at two different ``syncthreads`` calls
    (in the two arms of a branch) release each other, as the fibers do."""
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(out):
            s = cuda.shared.array(64, numba.int64)
            t = cuda.threadIdx.x
            s[t] = t
            if t % 2 == 0:
                cuda.syncthreads()
                v = s[63 - t] + 1000
            else:
                cuda.syncthreads()
                v = s[63 - t] + 2000
            out[t] = v
    """)
    out = np.zeros(64, np.int64)
    od.cuda(m.kernel, out, blocks=1, threads=64, target="cpu")
    t = np.arange(64)
    np.testing.assert_array_equal(out, 63 - t + np.where(t % 2 == 0, 1000, 2000))


def test_count_and_or_barriers_in_a_loop_see_each_round_s_predicates(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(out):
            t = cuda.threadIdx.x
            for r in range(4):
                p = numba.int32(t < 8 * r)
                out[r, t, 0] = cuda.syncthreads_count(p)
                out[r, t, 1] = cuda.syncthreads_and(p)
                out[r, t, 2] = cuda.syncthreads_or(p)
    """)
    out = np.zeros((4, 32, 3), np.int64)
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    for r in range(4):
        np.testing.assert_array_equal(out[r], [[8 * r, int(8 * r >= 32), int(r > 0)]] * 32)


def test_a_raising_thread_ends_alone_and_a_debug_launch_raises(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            t = cuda.threadIdx.x
            out[cuda.grid(1)] = 1
            cuda.syncthreads()
            if t == 5:
                raise ValueError("thread 5")
            cuda.syncthreads()
            out[cuda.grid(1)] = 2
    """)
    out = np.zeros(2 * 32)
    od.cuda(m.kernel, out, blocks=2, threads=32, target="cpu")  # without debug: thread 5 of each block ends
    expected = np.full(64, 2.0)
    expected[[5, 37]] = 1
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match="thread 5"):
        od.cuda(m.kernel, out, blocks=2, threads=32, target="cpu", debug=True)
    od.cuda(m.kernel, out, blocks=2, threads=32, target="cpu")  # usable afterwards


def test_a_row_loop_kernel_that_may_raise_runs_as_regions_one_thread_ending_alone(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(a, out):
            i = cuda.grid(1)
            if a[i] < 0:
                raise ValueError("negative")
            out[i] = a[i] * 2
    """)
    a = np.arange(64.0)
    a[7] = -1
    out = np.zeros_like(a)
    od.cuda(m.kernel, a, out, blocks=2, threads=32, target="cpu")
    expected = a * 2
    expected[7] = 0
    np.testing.assert_array_equal(out, expected)
    assert mode(m.kernel, a, out) == "block regions"


def test_frames_of_kernels_of_different_sizes_alternate_on_the_same_workers(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def small(out):
            s = cuda.shared.array(128, numba.int64)
            t = cuda.threadIdx.x
            s[t] = t
            cuda.syncthreads()
            out[cuda.grid(1)] = s[127 - t]

        def large(out):
            local = cuda.local.array(64, numba.int64)
            s = cuda.shared.array(128, numba.int64)
            t = cuda.threadIdx.x
            for j in range(64):
                local[j] = t + j
            s[t] = t
            cuda.syncthreads()
            out[cuda.grid(1)] = s[127 - t] + local[63]
    """)
    t = np.arange(4 * 128) % 128
    for _ in range(3):
        small_out, large_out = np.zeros(4 * 128, np.int64), np.zeros(4 * 128, np.int64)
        od.cuda(m.large, large_out, blocks=4, threads=128, target="cpu")
        od.cuda(m.small, small_out, blocks=4, threads=128, target="cpu")
        np.testing.assert_array_equal(small_out, 127 - t)
        np.testing.assert_array_equal(large_out, 127 - t + t + 63)


def test_the_frame_holds_only_what_crosses_a_barrier(make_module):
    """A value used only between two barriers stays in registers: the mirror kernel's frame is its header and
    what crosses its one barrier, not every variable it has."""
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(a, out):
            s = cuda.shared.array(64, numba.float32)
            t = cuda.threadIdx.x
            i = cuda.grid(1)
            scratch = a[i] * 3.0 + a[i] * a[i] - 1.0
            s[t] = scratch
            cuda.syncthreads()
            out[i] = s[63 - t]
    """)
    a = np.arange(128, dtype=np.float32)
    out = np.zeros_like(a)
    od.cuda(m.kernel, a, out, blocks=2, threads=64, target="cpu")
    i = np.arange(128)
    source = i - i % 64 + 63 - i % 64
    np.testing.assert_allclose(out, a[source] * 3.0 + a[source] ** 2 - 1.0)
    argtypes = tuple(cpu.TARGET.typeof(value) for value in (a, out))
    compiled = KernelCall.of(m.kernel, argtypes, cpu.TARGET, typed=True).compiled()
    frame = regions.frame_size(compiled.needs)
    # the resume word, t and i (4 + 4 + 8): not scratch, nor a's descriptor, which no code after the barrier reads,
    # nor the shared array's and out's descriptors, which every thread computes alike (recomputed after the barrier)
    assert frame == 4 + 4 + 8, frame


def test_threads_leaving_a_barrier_loop_early_count_as_arrived(make_module):
    """A tree reduction whose threads return as the tree narrows: the ones left meet at every later barrier."""
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(a, out):
            s = cuda.shared.array(128, numba.float64)
            t = cuda.threadIdx.x
            s[t] = a[cuda.grid(1)]
            cuda.syncthreads()
            step = 64
            while step > 0:
                if t >= step:
                    return
                s[t] += s[t + step]
                cuda.syncthreads()
                step //= 2
            out[cuda.blockIdx.x] = s[0]
    """)
    a = np.random.default_rng(1).random(4 * 128)
    out = np.zeros(4)
    od.cuda(m.kernel, a, out, blocks=4, threads=128, target="cpu")
    np.testing.assert_allclose(out, a.reshape(4, 128).sum(axis=1))
    assert mode(m.kernel, a, out) == "block regions"


def test_a_callee_compiled_on_its_own_reads_each_thread_s_indices_in_a_3d_block_after_a_raise(make_module):
    """The pass counts the threads' x, y and z (divided out once, at the thread it starts from: after a raise, the
    next one); a callee compiled on its own reads them where the runner's state points."""
    m = make_module("""
        from numba import cuda

        @cuda.jit(device=True)
        def where():
            return cuda.threadIdx.x + 10 * cuda.threadIdx.y + 100 * cuda.threadIdx.z + 1000 * cuda.blockIdx.x

        def kernel(out):
            t = cuda.threadIdx.x + 3 * (cuda.threadIdx.y + 4 * cuda.threadIdx.z)
            i = t + 60 * cuda.blockIdx.x
            before = where()
            cuda.syncthreads()
            if t == 7:
                raise ValueError("thread 7")
            out[i, 0] = before
            cuda.syncthreads()
            out[i, 1] = where()
    """)
    out = np.full((2 * 60, 2), -1, np.int64)
    od.cuda(m.kernel, out, blocks=2, threads=(3, 4, 5), target="cpu")
    x, y, z = np.meshgrid(np.arange(3), np.arange(4), np.arange(5), indexing="ij")
    order = np.argsort((x + 3 * (y + 4 * z)).ravel())
    where = (x + 10 * y + 100 * z).ravel()[order]
    expected = np.concatenate([where, where + 1000])
    expected[[7, 67]] = -1  # thread 7 of each block raised before it wrote
    np.testing.assert_array_equal(out[:, 0], expected)
    np.testing.assert_array_equal(out[:, 1], expected)
    assert mode(m.kernel, out) == "block regions"


def test_a_variable_holding_an_argument_on_one_path_only_is_kept_per_thread(make_module):
    """An argument's value is recomputed after a barrier, not kept in the frame; a variable that holds it on
    one path and another array (or a changed scalar) on another is kept per thread."""
    m = make_module("""
        from numba import cuda

        def kernel(a, b, out, n):
            t = cuda.threadIdx.x
            source = a
            if t % 2:
                source = b
            n = n + t
            cuda.syncthreads()
            out[cuda.grid(1)] = source[t] + n + a[0]
    """)
    a, b = np.arange(64.0), -np.arange(64.0)
    out = np.zeros(128)
    od.cuda(m.kernel, a, b, out, 5, blocks=2, threads=64, target="cpu")
    t = np.tile(np.arange(64), 2)
    np.testing.assert_array_equal(out, np.where(t % 2, -t, t) + 5 + t)
