"""The CUDA kernel idiom on the CPU target (overdub/targets/cpu.py): grid, block and thread indices in 1, 2
and 3 dimensions (callees read the calling thread's), atomics, local arrays, ``print`` once per thread; the math
intrinsics (``cuda.fma``, the bit intrinsics, ``cuda.libdevice``) and float16 (``cuda.fp16``) with the GPU's
answers, or refused by name. Barriers, shared memory and warp operations: tests/test_cpu_sync.py.
"""

import math
import struct

import numpy as np
import pytest
from numba import cuda

import overdub as od
from helpers import WRITES_ONE, last_json, run, run_python
from overdub.targets import cpu

# --- grid indexing --------------------------------------------------------------------------------------


def test_grid_1d_indexes_every_thread_of_every_block(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            i = cuda.grid(1)
            if i < out.shape[0]:
                out[i] = i + 1
    """)
    assert run(m.kernel, n=13, blocks=3, threads=4, target="cpu") == list(range(1, 13)) + [0]


def test_thread_and_block_indices_match_the_grid_index(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            i = cuda.grid(1)
            out[i] = cuda.blockIdx.x * 100 + cuda.threadIdx.x
    """)
    assert run(m.kernel, n=12, blocks=3, threads=4, target="cpu") == [b * 100 + t for b in range(3) for t in range(4)]


def test_callees_read_the_same_thread_indices_as_the_kernel(make_module):
    m = make_module("""
        import overdub as od
        from numba import cuda

        @od.function
        def my_index():
            return cuda.grid(1)

        def block_base():
            return cuda.blockIdx.x * cuda.blockDim.x

        def kernel(out):
            i = my_index()
            out[i] = (block_base() + cuda.threadIdx.x) * 100 + cuda.grid(1)
    """)
    assert run(m.kernel, n=12, blocks=3, threads=4, target="cpu") == [i * 101 for i in range(12)]


def test_grid_dimensions_are_visible_to_every_thread(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            if cuda.grid(1) == 0:
                out[0] = cuda.gridsize(1)
                out[1] = cuda.blockDim.x
                out[2] = cuda.gridDim.x
    """)
    assert run(m.kernel, n=3, blocks=3, threads=5, target="cpu") == [15, 5, 3]


def test_grid_2d_covers_a_2d_array(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            x, y = cuda.grid(2)
            if x < out.shape[0] and y < out.shape[1]:
                out[x, y] = x * 100 + y
    """)
    out = np.full((4, 6), -1, dtype=np.int64)
    od.cuda(m.kernel, out, blocks=(2, 3), threads=(2, 2), target="cpu")
    assert out.tolist() == [[x * 100 + y for y in range(6)] for x in range(4)]


def test_grid_3d_covers_a_3d_grid(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            x, y, z = cuda.grid(3)
            nx, ny, nz = cuda.gridsize(3)
            out[(z * ny + y) * nx + x] = z * 100 + y * 10 + x
    """)
    expected = [z * 100 + y * 10 + x for z in range(4) for y in range(3) for x in range(2)]
    assert run(m.kernel, n=24, blocks=(2, 1, 2), threads=(1, 3, 2), target="cpu") == expected


def test_callees_read_the_grid_state_of_the_calling_thread(make_module):
    m = make_module("""
        import overdub as od
        from numba import cuda

        def index():
            return cuda.grid(1)

        @od.function
        def position(scale: od.Integer):
            return cuda.blockIdx.x * scale + cuda.threadIdx.x

        def kernel(out):
            out[index()] = position(100)
    """)
    assert run(m.kernel, n=12, blocks=3, threads=4, target="cpu") == [b * 100 + t for b in range(3) for t in range(4)]
    assert run(m.kernel, n=12, blocks=2, threads=6, target="cpu") == [b * 100 + t for b in range(2) for t in range(6)]


# --- atomics and local arrays ---------------------------------------------------------------------------


def test_atomic_add_accumulates_over_the_grid(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            cuda.atomic.add(out, 0, 1)
            cuda.atomic.add(out, 1, cuda.grid(1))
    """)
    assert run(m.kernel, n=2, blocks=5, threads=7, target="cpu") == [35, sum(range(35))]


FLOAT_EXTREMES = """
    from numba import cuda

    def kernel(out, v):
        i = cuda.grid(1)
        if i < v.size:
            cuda.atomic.max(out, 0, v[i])
            cuda.atomic.min(out, 1, v[i])
            cuda.atomic.nanmax(out, 2, v[i])
            cuda.atomic.nanmin(out, 3, v[i])
            cuda.atomic.max(out, 4, v[i])
            cuda.atomic.nanmax(out, 5, v[i])
"""


@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_atomic_max_and_min_follow_numba_cudas_nan_rules(make_module, dtype, workers):
    """They failed to compile ("Intrinsic called with incompatible signature"), and nanmax/nanmin were missing.
    numba-cuda's max/min skip a NaN value and keep a NaN element; nanmax/nanmin skip a NaN value and replace
    a NaN element."""
    cpu.TARGET.workers = workers
    m = make_module(FLOAT_EXTREMES)
    v = np.random.default_rng(7).normal(size=20_000).astype(dtype)
    v[::97] = np.nan
    out = np.array([-np.inf, np.inf, -np.inf, np.inf, np.nan, np.nan], dtype)
    od.cuda(m.kernel, out, v, blocks=-(-v.size // 64), threads=64, target="cpu")
    top, bottom = np.nanmax(v), np.nanmin(v)
    np.testing.assert_array_equal(out, np.array([top, bottom, top, bottom, np.nan, top], dtype))


def test_float_atomic_max_returns_the_old_value(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out, a):
            out[0] = cuda.atomic.max(a, 0, 5.0)
            out[1] = cuda.atomic.max(a, 0, 2.0)
            out[2] = cuda.atomic.nanmin(a, 1, 1.0)
    """)
    a = np.array([3.0, np.nan])
    out = np.zeros(3)
    od.cuda(m.kernel, out, a, blocks=1, threads=1, target="cpu")
    np.testing.assert_array_equal(out, [3.0, 5.0, np.nan])
    assert a.tolist() == [5.0, 1.0]


def test_a_kernel_factory_may_capture_an_atomic(make_module):
    """A closure capturing ``cuda.atomic.add`` raised "NameError: name 'op' is not defined"."""
    m = make_module("""
        from numba import cuda

        def make(op):
            def kernel(a):
                op(a, 0, cuda.grid(1))
            return kernel

        adds, maxes = make(cuda.atomic.add), make(cuda.atomic.max)
    """)
    assert run(m.adds, blocks=2, threads=8, target="cpu") == [sum(range(16))]
    assert run(m.maxes, blocks=2, threads=8, target="cpu") == [15]


def test_local_array_works_per_thread(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(out):
            scratch = cuda.local.array(4, numba.int64)
            for k in range(4):
                scratch[k] = cuda.grid(1) + k
            out[cuda.grid(1)] = scratch[0] + scratch[3]
    """)
    assert run(m.kernel, n=4, threads=4, target="cpu") == [2 * i + 3 for i in range(4)]


# --- math intrinsics, libdevice and float16 -------------------------------------------------------------


def test_fma_and_the_bit_intrinsics_give_the_gpus_answers(make_module):
    """``cuda.fma`` was an unknown attribute on the CPU target; so were cbrt, popc, clz, brev, ffs, selp, the
    fences and nanosleep."""
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(f, i, u, x):
            f[0] = cuda.fma(x[0], x[1], x[2])
            f[1] = cuda.cbrt(x[3])
            i[0] = cuda.popc(numba.int64(-1))
            i[1] = cuda.clz(numba.int32(1))
            i[2] = cuda.ffs(numba.int32(8))
            i[3] = cuda.ffs(numba.int64(0))
            i[4] = cuda.selp(x[0] > 1.0, numba.int64(7), numba.int64(9))
            u[0] = cuda.brev(numba.uint32(1))
            u[1] = cuda.brev(numba.uint64(1))
            cuda.threadfence()
            cuda.threadfence_block()
            cuda.nanosleep(100)
    """)
    x = np.array([1 + 2.0**-30, 1 - 2.0**-30, -1.0, 27.0])
    f, i, u = np.zeros(2), np.zeros(5, np.int64), np.zeros(2, np.uint64)
    od.cuda(m.kernel, f, i, u, x, blocks=1, threads=1, target="cpu")
    assert f[0] == -(2.0**-60)  # one rounding: x0 * x1 + x2 is 0.0 in two
    assert f[1] == pytest.approx(3.0, rel=1e-15)  # the C library's cbrt, as accurate as libdevice's
    assert i.tolist() == [64, 31, 4, 0, 7]
    assert u.tolist() == [2**31, 2**63]


LIBDEVICE = """
    import numba
    from numba import cuda
    from numba.cuda import libdevice

    def kernel(f, i, x):
        f[0] = libdevice.exp(x[0])
        f[1] = libdevice.expf(numba.float32(x[0]))
        s, c = libdevice.sincos(x[0])
        f[2] = s
        f[3] = c
        mantissa, exponent = libdevice.frexp(x[1])
        f[4] = mantissa
        i[0] = exponent
        f[5] = libdevice.fma_rn(x[2], x[3], -1.0)
        f[6] = libdevice.saturatef(numba.float32(x[4]))
        i[1] = libdevice.float2int_rn(numba.float32(2.5))
        i[2] = libdevice.double2int_rd(-1.5)
        i[3] = libdevice.double2ll_rz(x[5])
        i[4] = libdevice.popcll(-1)
        i[5] = libdevice.brev(1)
        i[6] = libdevice.byte_perm(0x33221100, 0x77665544, 0x4172)
        i[7] = libdevice.umulhi(-1, 2)
        i[8] = libdevice.mul64hi(-(2**62), 4)
        i[9] = libdevice.isnand(x[4])
        i[10] = libdevice.signbitd(-0.0)
        i[11] = libdevice.double_as_longlong(1.0)
        i[12] = libdevice.ffs(0x50)
        i[13] = libdevice.sad(3, 10, 100)
        i[14] = libdevice.llrint(x[5])
        i[15] = libdevice.hadd(-7, 2)
"""


def test_libdevice_functions_give_the_gpus_answers(make_module):
    """They compiled as the Python placeholders they are: typed ``none`` (``setitem(array, int64, none)``)."""
    m = make_module(LIBDEVICE)
    x = np.array([0.75, 48.0, 1 + 2.0**-30, 1 - 2.0**-30, np.nan, np.inf])
    f, i = np.zeros(7), np.zeros(16, np.int64)
    od.cuda(m.kernel, f, i, x, blocks=1, threads=1, target="cpu")
    assert f[0] == math.exp(0.75) and f[1] == pytest.approx(math.exp(0.75), rel=1e-7)
    assert f[2:4].tolist() == [math.sin(0.75), math.cos(0.75)]
    assert f[4:].tolist() == [0.75, -(2.0**-60), 0.0]
    assert i[0] == 6
    assert i[1:].tolist() == [
        2,  # to nearest, ties to even
        -2,
        2**63 - 1,  # saturating, as cvt does
        64,
        -(2**31),  # bit 0 reversed into the sign bit of an int32
        0x44117722,  # bytes 2, 7, 1, 4 of 0x7766554433221100, lowest first
        1,  # the high word of 0xffffffff * 2, unsigned
        -1,  # the high word of -2**64, signed
        1,
        1,
        struct.unpack("<q", struct.pack("<d", 1.0))[0],
        5,
        107,
        2**63 - 1,
        -3,  # (-7 + 2) >> 1, rounded down
    ]


def test_a_libdevice_function_the_cpu_cannot_run_is_refused_naming_it_and_the_line(make_module):
    m = make_module("""
        from numba import cuda
        from numba.cuda import libdevice

        def kernel(out, x):
            out[0] = libdevice.fadd_rz(x[0], x[1])
    """)
    with pytest.raises(od.CompileError, match=r"cuda\.libdevice\.fadd_rz cannot run on the CPU target: .*:6.*'cuda'"):
        od.cuda(m.kernel, np.zeros(1, np.float32), np.ones(2, np.float32), blocks=1, threads=1, target="cpu")


def test_float16_computes_in_half_precision_as_on_the_gpu(make_module):
    """A float16 array failed with a bare ``NotImplementedError: float16``. Each operation rounds to half, as
    numba-cuda's float16 arithmetic does: 2048 + 1 is 2048 (the spacing there is 2), twice."""
    m = make_module("""
        import math
        from numba import cuda
        from numba.cuda import fp16

        def kernel(out, h):
            out[0] = (h[0] + h[1]) + h[1]
            t = h[0]
            t += h[1]
            t += h[1]
            out[1] = t
            out[2] = fp16.hadd(fp16.hadd(h[0], h[1]), h[1])
            out[3] = math.sqrt(h[2]) * h[3]
            out[4] = fp16.hfma(h[2], h[3], h[1])
            out[5] = fp16.hmax(h[4], h[1])
            out[6] = -h[2] / h[3]
            out[7] = math.floor(h[3])
            out[8] = fp16.heq(h[4], h[4])
    """)
    h = np.array([2048, 1, 2.5, 3.0, np.nan], np.float16)
    out = np.zeros(9, np.float16)
    od.cuda(m.kernel, out, h, blocks=1, threads=1, target="cpu")
    expected = [2048, 2048, 2048, np.sqrt(h[2]) * h[3], np.float16(8.5), 1, -h[2] / h[3], 3, 0]
    np.testing.assert_array_equal(out, np.array(expected, np.float16))


def test_a_float16_scalar_argument_and_an_integers_bit_count_run_as_on_the_gpu(make_module):
    """A ``np.float16`` scalar argument crashed the CPU target with a bare AssertionError from numba's
    unboxing; ``i.bit_count()`` (numba-cuda's popc) was an unknown attribute."""
    m = make_module("""
        from numba import cuda
        from numba.cuda import fp16

        def kernel(out, bits, a, b, c):
            out[0] = fp16.hadd(a, b)
            bits[0] = c.bit_count()
    """)
    out, bits = np.zeros(1, np.float16), np.zeros(1, np.int32)
    od.cuda(
        m.kernel, out, bits, np.float16(3.1415926), np.float16(3.0), np.uint8(0xF7), blocks=1, threads=1, target="cpu"
    )
    assert out[0] == np.float16(3.1415926) + np.float16(3.0) and bits[0] == 7


def test_numba_cudas_vector_types_are_made_and_read_in_cpu_kernels(make_module):
    """``cuda.float64x4(...)``, an alias (``cuda.short2``), and a vector made of smaller vectors and numbers in
    any mix, each component cast to the element type (an unknown attribute of the namespace before)."""
    m = make_module("""
        from numba import cuda

        def kernel(out):
            v = cuda.float64x4(1.0, 3.0, 5.0, 7.0)
            s = cuda.short2(10, 11)
            mixed = cuda.float32x4(cuda.float32x2(1.5, 2), s)
            out[0], out[1], out[2], out[3] = v.x, v.y, v.z, v.w
            out[4], out[5] = s.x, s.y
            out[6], out[7] = mixed.y, mixed.x + mixed.w
    """)
    out = np.zeros(8)
    od.cuda(m.kernel, out, blocks=1, threads=1, target="cpu")
    assert out.tolist() == [1.0, 3.0, 5.0, 7.0, 10.0, 11.0, 2.0, 12.5]


ALLOCATING = """
import json, sys
import numpy as np
import overdub as od
from overdub import cuda

@cuda.jit(device=True)
def doubled_sum(a):
    b = a * 2.0  # a new array, in a callee
    return b.sum()

@cuda.jit
def kernel(out):
    a = out.copy()  # a new array, in the kernel
    out[0] = a.sum() + a[1] + doubled_sum(a)

out = np.arange(4.0)
kernel[1, 1](out)
print(json.dumps({"out": out.tolist(), "stats": od.stats()}))
"""


def test_a_kernel_or_callee_allocating_an_array_compiles_with_numbas_runtime_and_loads_from_the_disk(tmp_path):
    """``a.copy()`` in a kernel was "NRT required but not enabled"; compiled with numba's runtime (only such
    kernels), stored, and loaded in another process with the runtime's symbols (an LLVM abort before)."""
    script = tmp_path / "allocating.py"
    script.write_text(ALLOCATING)
    env = {"OVERDUB_CACHE_DIR": tmp_path / "cache", "OVERDUB_CACHE": None, "OVERDUB_TARGET": "cpu"}
    first, second = (last_json(run_python(script, env=env)) for _ in range(2))
    assert first["out"] == second["out"] == [19.0, 1.0, 2.0, 3.0]  # 6 + 1 + 12
    assert (first["stats"]["compiles"], second["stats"]["disk_hits"], second["stats"]["compiles"]) == (1, 1, 0)


def test_under_numbas_cuda_simulator_importing_overdub_says_it_cannot_run_there():
    """``import overdub`` failed with "module 'numba.cuda' has no attribute 'grid'"."""
    done = run_python("-c", "import overdub", env={"NUMBA_ENABLE_CUDASIM": "1"}, check=False)
    assert done.returncode != 0
    assert "ImportError: overdub does not run under numba's CUDA simulator" in done.stderr
    assert "target='cpu'" in done.stderr


# --- unsupported on the CPU -----------------------------------------------------------------------------


def test_print_in_a_kernel_writes_to_stdout_at_the_end_of_the_launch(make_module, capfd):
    m = make_module("""
        def kernel(x, y, flag):
            print(x, y, flag, "done")
    """)
    capfd.readouterr()
    od.cuda(m.kernel, 3, 2.5, True, target="cpu")
    assert capfd.readouterr().out == "3 2.500000 True done\n"  # numba-cuda's %f


def test_print_shows_tuples_and_the_thread_index_as_python_and_numba_cuda_do(make_module, capfd):
    m = make_module("""
        from numba import cuda

        def kernel(x):
            print("t", (x, 2.5), (x,), ((1, 2), True), cuda.threadIdx)
    """)
    capfd.readouterr()
    od.cuda(m.kernel, 3, blocks=1, threads=1, target="cpu")
    assert capfd.readouterr().out == "t (3, 2.500000) (3,) ((1, 2), True) (0, 0, 0)\n"


def test_print_runs_once_per_thread(make_module, capfd):
    m = make_module("""
        from numba import cuda

        def kernel():
            print(cuda.grid(1))
    """)
    capfd.readouterr()
    od.cuda(m.kernel, blocks=2, threads=2, target="cpu")
    # each thread prints once; blocks may run on two workers at once, so in either order (as on a GPU)
    assert sorted(capfd.readouterr().out.splitlines(), key=int) == ["0", "1", "2", "3"]


def test_a_kernel_that_does_not_print_prints_nothing(make_module, capfd):
    m = make_module(WRITES_ONE)
    capfd.readouterr()
    run(m.kernel, target="cpu")
    assert capfd.readouterr() == ("", "")


def test_a_small_grid_runs_on_as_few_workers_as_were_measured_fastest():
    """A short launch on every worker probes fewer (halving while each is faster than the one before), then
    the fastest measured serves; a long one is work and stays on every worker; a count that turns slower
    than another's measurement gives way to it; all is measured again after RECHECK launches."""
    from numba import cuda

    from overdub.targets.cpu.workers import PROBE_NS, RECHECK, Workers

    def launch(policy, blocks, every, ns_by_count):
        used = policy.use(blocks, every)
        policy.ran(blocks, used, ns_by_count[used])
        return used

    waiting = {16: PROBE_NS // 2, 8: PROBE_NS // 4, 4: PROBE_NS // 8, 2: PROBE_NS // 6, 1: PROBE_NS // 3}
    policy = Workers()
    assert [launch(policy, 10, 16, waiting) for _ in range(5)] == [16, 8, 4, 2, 4]  # 2 was slower than 4
    assert all(launch(policy, 10, 16, waiting) == 4 for _ in range(10))  # the fastest stays
    alone = {8: PROBE_NS // 10, 4: PROBE_NS // 12, 2: PROBE_NS // 14, 1: PROBE_NS // 20}
    assert [launch(policy, 4, 8, alone) for _ in range(5)] == [8, 4, 2, 1, 1]  # on the launching thread
    work = {8: PROBE_NS * 5, 1: PROBE_NS * 40}
    assert [launch(policy, 4096, 8, work) for _ in range(3)] == [8, 8, 8]  # long: work, which stays parallel
    slowing = Workers()
    assert [launch(slowing, 16, 2, {2: PROBE_NS // 2, 1: PROBE_NS // 4}) for _ in range(3)] == [2, 1, 1]
    slowing.ran(16, 1, PROBE_NS)  # the launching thread alone turned slower than every worker was
    assert slowing.use(16, 2) == 2
    for _ in range(RECHECK):  # measured again after RECHECK launches
        slowing.use(16, 2)
    assert slowing._sizes[16].times == {} and slowing._sizes[16].choice == 2
    a, out = np.arange(1024.0), np.zeros(1024)

    def double(a, out):
        i = cuda.grid(1)
        if i < a.size:
            out[i] = 2 * a[i]

    for _ in range(4):  # whichever way each launch runs, the same result
        od.cuda(double, a, out, blocks=4, threads=256, target="cpu")
        assert (out == 2 * a).all()


def test_once_probing_is_done_one_launch_in_sample_is_timed_and_a_faster_count_still_takes_over():
    """Probing times every launch; then only one launch in SAMPLE is (``timing``), and a sampled launch of
    the count in use that turned slower than another count's measurement hands over to it."""
    from overdub.targets.cpu.workers import PROBE_NS, RECHECK, SAMPLE, Workers

    assert RECHECK % SAMPLE == 0
    policy, told = Workers(), []

    def launch(ns_by_count):
        used = policy.use(8, 2)
        if policy.timing:
            told.append(used)
            policy.ran(8, used, ns_by_count[used])
        return used

    fast_alone = {2: PROBE_NS // 2, 1: PROBE_NS // 4}
    assert [launch(fast_alone) for _ in range(3)] == [2, 1, 1] and told == [2, 1]  # probed, then sampled
    told.clear()
    assert all(launch(fast_alone) == 1 for _ in range(4 * SAMPLE))
    assert told == [1] * 4  # one launch in SAMPLE timed
    slow_alone = {2: PROBE_NS // 2, 1: PROBE_NS}  # the launching thread alone turned slower than every worker
    used = [launch(slow_alone) for _ in range(SAMPLE + 1)]
    assert used[-1] == 2 and used.count(1) <= SAMPLE  # the next sampled launch handed over to every worker


def test_a_first_launch_on_every_worker_that_was_long_is_timed_again_before_it_counts_as_work():
    """Waking sleeping workers can take longer than PROBE_NS (idle cores of a virtual machine): a long first
    launch on every worker is followed by a second, and only where that one is long too is the grid work."""
    from overdub.targets.cpu.workers import PROBE_NS, Workers

    def launches(ns_sequence):
        policy, used = Workers(), []
        for ns in ns_sequence:
            used.append(policy.use(8, 2))
            assert policy.timing
            policy.ran(8, used[-1], ns[used[-1]] if isinstance(ns, dict) else ns)
        return used, policy

    waking, waiting = {2: 3 * PROBE_NS}, {2: PROBE_NS // 20, 1: PROBE_NS // 100}
    used, policy = launches([waking, waiting, waiting])
    assert used == [2, 2, 1] and policy.use(8, 2) == 1  # the second was short: probed, the thread alone
    used, policy = launches([3 * PROBE_NS, 2 * PROBE_NS])
    assert used == [2, 2] and policy.use(8, 2) == 2 and not policy.timing  # long twice: work, every worker


# --- grid-stride loops ---------------------------------------------------------------------------------------


def grid_stride(x, out):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = 2 * x[i]


@pytest.mark.parametrize(("blocks", "threads"), [(1, 1), (3, 32), (8, 256)])
def test_a_grid_stride_loop_runs_in_the_row_loop_and_visits_every_element(blocks, threads):
    """``range(start, n, cuda.gridsize(1))`` could raise (a zero step) as far as numba's code says; the CPU
    target knows extents are at least 1, so the kernel stays in the row loop (not one fiber a thread, 25x
    slower) and every element is written once whatever the grid."""
    from overdub.call import KernelCall

    x = np.arange(1000, dtype=np.float64)
    out = np.zeros_like(x)
    od.cuda(grid_stride, x, out, blocks=blocks, threads=threads, target="cpu")
    np.testing.assert_array_equal(out, 2 * x)
    argtypes = tuple(cpu.TARGET.typeof(value) for value in (x, out))
    launcher = KernelCall.of(grid_stride, argtypes, cpu.TARGET, typed=True).compiled().launcher
    assert getattr(launcher, "mode", "serial") in ("grid loop", "serial")


def ranges_walked(bounds, counts, sums):
    for k in range(bounds.shape[0]):
        n = 0
        total = 0
        for i in range(bounds[k, 0], bounds[k, 1], bounds[k, 2]):
            n += 1
            total += i
        counts[k] = n
        sums[k] = total


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_a_range_walks_as_pythons_whether_it_runs_once_or_divides(dtype):
    """``iter(range)`` on the CPU target checks for one iteration before dividing (overdub/targets/cpu/
    ranges.py): once, several times, not at all, backwards, at the edges of one step; and a zero step raises
    numba's ValueError in a checked launch (an unchecked one ends the thread, as on the GPU), after which the
    kernel still runs."""
    triples = [(0, 10, 3), (0, 10, 10), (0, 10, 11), (9, 10, 5), (10, 10, 1), (10, 0, 1), (10, 0, -3), (10, 0, -10)]
    triples += [(10, 0, -11), (-5, 5, 2), (5, -5, -2), (0, 1, 1), (3, 4, 1_000_000), (-7, -1, 6), (-7, -1, 7)]
    bounds = np.array(triples, dtype=dtype)
    counts, sums = np.zeros(len(triples), dtype=np.int64), np.zeros(len(triples), dtype=np.int64)
    od.cuda(ranges_walked, bounds, counts, sums, target="cpu")
    assert counts.tolist() == [len(range(*t)) for t in triples]
    assert sums.tolist() == [sum(range(*t)) for t in triples]
    with pytest.raises(ValueError, match="range\\(\\) arg 3 must not be zero"):
        od.cuda(ranges_walked, np.array([(0, 5, 0)], dtype=dtype), counts[:1], sums[:1], target="cpu", debug=True)
    od.cuda(ranges_walked, bounds, counts, sums, target="cpu")
    assert counts.tolist() == [len(range(*t)) for t in triples]
