"""The CPU grid loop runs only the threads a kernel's bounds guard admits (overdub/targets/cpu/guard.py): every
kernel here compares its result with what running every thread gives -- the threads skipped must be exactly
those that would have done nothing."""

import operator

import numpy as np
import pytest
from numba import cuda

import overdub as od
from helpers import counting_reads
from overdub import rewrite
from overdub.targets import cpu
from overdub.targets.cpu import guard as cpu_guard


def bounds(kernel, *args, context=None):
    """The bounds the walk reads off ``kernel`` launched with ``args`` (values, typed as a launch types them)."""
    chain = (context or od.Context("plain")).chain(cpu.TARGET)
    argtypes = tuple(cpu.TARGET.typeof(arg) for arg in args)
    return cpu_guard.x_bounds(rewrite.rewrite(kernel, chain), argtypes)


@pytest.fixture(params=[1, 3], ids=["1 worker", "3 workers"])
def workers(request):
    saved = cpu.TARGET.workers
    cpu.TARGET.workers = request.param
    yield request.param
    cpu.TARGET.workers = saved


VECTOR, INTS, MATRIX = np.zeros(4, np.float32), np.zeros(4, np.int64), np.zeros((4, 4))


# --- what the walk finds ---------------------------------------------------------------------------------


def saxpy(a, x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]


def early_exit(a, n, lo):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= n or lo > i:
        return
    a[i] += 1


def stencil(a, b):
    x, y = cuda.grid(2)
    if x >= 1 and y >= 1 and y < a.shape[0] - 1 and x < a.shape[1] - 1:
        b[y, x] = a[y, x - 1] + a[y, x + 1] - 2 * a[y, x]


def test_the_walk_reads_the_bounds_of_the_usual_guards():
    assert bounds(saxpy, np.float32(2), VECTOR, VECTOR) == (("<", "a1.size"),)
    assert bounds(early_exit, INTS, 5, 1) == (("<", "a1"), (">=", "a2"))
    assert bounds(stencil, MATRIX, MATRIX) == ((">=", "1"), ("<", "(a0.shape[1] - 1)"))


def count_first(a, count, n):
    cuda.atomic.add(count, 0, 1)  # every thread does this: none may be skipped
    i = cuda.grid(1)
    if i < n:
        a[i] += 1


def count_after(a, count, n):
    i = cuda.grid(1)
    if i < n:
        a[i] += 1
    cuda.atomic.add(count, 0, 1)


def else_branch(a, count, n):
    i = cuda.grid(1)
    if i < n:
        a[i] += 1
    else:
        cuda.atomic.add(count, 0, 1)


def y_only(a, n):
    x, y = cuda.grid(2)
    if y < n:
        a[y, x] = 1


def test_a_guard_with_anything_before_beside_or_after_it_bounds_nothing():
    assert bounds(count_first, INTS, INTS, 5) == ()
    assert bounds(count_after, INTS, INTS, 5) == ()
    assert bounds(else_branch, INTS, INTS, 5) == ()
    assert bounds(y_only, MATRIX, 5) == ()


@pytest.mark.parametrize("kernel", [count_first, count_after, else_branch])
def test_threads_with_something_to_do_past_the_guard_all_run(kernel, workers):
    a, count = np.zeros(100, np.int64), np.zeros(1, np.int64)
    od.cuda(kernel, a, count, 70, blocks=4, threads=32, target="cpu")
    assert (a[:70] == 1).all() and (a[70:] == 0).all()
    expected = {count_first: 128, count_after: 128, else_branch: 128 - 70}[kernel]
    assert count[0] == expected


# --- the threads that run are exactly the admitted ones -------------------------------------------------


def test_saxpy_and_the_early_exit_form_touch_exactly_the_admitted_elements(workers):
    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, np.float32)
    od.cuda(saxpy, np.float32(2), x, y, blocks=5, threads=256, target="cpu")  # 1280 threads for 1000 elements
    np.testing.assert_array_equal(y, 2 * np.arange(1000, dtype=np.float32) + 1)
    a = np.zeros(300, np.int64)
    od.cuda(early_exit, a, 250, 17, blocks=3, threads=128, target="cpu")
    assert (a[17:250] == 1).all() and (a[:17] == 0).all() and (a[250:] == 0).all()


@pytest.mark.parametrize("n", [-5, 0, 63, 64, 999, 10**6], ids=lambda n: f"n={n}")
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32, np.uint64, np.float64])
def test_every_comparison_and_type_of_bound_admits_the_threads_numba_s_comparison_admits(n, dtype):
    if n < 0 and np.dtype(dtype).kind == "u":
        pytest.skip("no negative unsigned bound")

    def kernel(a, bound):
        i = cuda.grid(1)
        if i <= bound and bound - 1 < i + 3:  # x <= bound, and a term that is no bound of x
            a[i] += 1
        if i > bound:
            a[i] += 2

    bound = dtype(n)
    a = np.zeros(256, np.int64)
    od.cuda(kernel, a, bound, blocks=2, threads=128, target="cpu")
    i = np.arange(256)
    expected = ((i <= n) & (n - 1 < i + 3)).astype(np.int64) + 2 * (i > n)
    np.testing.assert_array_equal(a, expected)


def test_a_fractional_bound_and_the_top_of_the_integers_are_exact():
    def below(a, bound):
        i = cuda.grid(1)
        if i < bound:
            a[i] = 1

    def at_most(a, bound):
        i = cuda.grid(1)
        if i <= bound:
            a[i] = 1

    def above(a, bound):
        i = cuda.grid(1)
        if i > bound:
            a[i] = 1

    for kernel, bound, expected in (
        (below, 10.5, 11),
        (at_most, np.int64(2**63 - 1), 64),
        (above, np.int64(2**63 - 1), 0),
        (at_most, np.uint64(2**64 - 1), 64),
    ):
        a = np.zeros(64, np.int64)
        od.cuda(kernel, a, bound, blocks=2, threads=32, target="cpu")
        assert a.sum() == expected, (kernel.__name__, bound)


def test_two_dimensional_grids_whose_chunks_cross_rows_of_blocks_run_every_admitted_thread(workers):
    def indices(out, n, m):
        x, y = cuda.grid(2)
        if x < n and y < m:
            out[y, x, 0] = cuda.threadIdx.x
            out[y, x, 1] = cuda.threadIdx.y
            out[y, x, 2] = cuda.blockIdx.x
            out[y, x, 3] = cuda.blockIdx.y

    n, m = 103, 45
    out = np.full((m, n, 4), -1, np.int64)
    od.cuda(indices, out, n, m, blocks=(7, 5), threads=(16, 10), target="cpu")
    y, x = np.mgrid[:m, :n]
    np.testing.assert_array_equal(out, np.stack([x % 16, y % 10, x // 16, y // 10], axis=-1))
    np.testing.assert_array_equal(bounds(indices, out, n, m), (("<", "a1"),))


def test_three_dimensional_blocks_and_grids_see_their_own_indices(workers):
    def everything(out):
        tx, ty, tz = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
        bx, by, bz = cuda.blockIdx.x, cuda.blockIdx.y, cuda.blockIdx.z
        x, y, z = cuda.grid(3)
        out[z, y, x] = tx + 10 * ty + 100 * tz + 1000 * bx + 10000 * by + 100000 * bz

    out = np.zeros((6, 8, 9), np.int64)
    od.cuda(everything, out, blocks=(3, 2, 3), threads=(3, 4, 2), target="cpu")
    z, y, x = np.mgrid[:6, :8, :9]
    expected = x % 3 + 10 * (y % 4) + 100 * (z % 2) + 1000 * (x // 3) + 10000 * (y // 4) + 100000 * (z // 2)
    np.testing.assert_array_equal(out, expected)


# --- what the walk must not trust -----------------------------------------------------------------------


def test_a_context_overdubbing_cuda_grid_or_a_comparison_is_obeyed():
    shifted = od.Context("shifted")

    @shifted.overdub(cuda.grid)
    def _grid(n: od.Integer):
        return cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x + 10

    def kernel(a, n):
        i = cuda.grid(1)
        if i < n:
            a[i - 10] = 1

    assert bounds(kernel, INTS, 40, context=shifted) == ()
    a = np.zeros(64, np.int64)
    od.cuda(kernel, a, 40, blocks=2, threads=32, context=shifted, target="cpu")
    assert a.sum() == 30

    flipped = od.Context("flipped")

    @flipped.overdub(operator.lt)
    def _lt(a: od.Integer, b: od.Integer):
        return a >= b

    assert bounds(kernel, INTS, 40, context=flipped) == ()
    a = np.zeros(64, np.int64)
    od.cuda(kernel, a, 40, blocks=2, threads=32, context=flipped, target="cpu")
    assert a[30:54].sum() == 24 and a.sum() == 24


def test_a_hook_observing_calls_sees_every_thread():
    counted = od.Context("counted", state=od.Array[od.int64, 1])

    @counted.prehook(cuda.grid)
    def _count(n):
        cuda.atomic.add(od.state(), 0, 1)

    def kernel(a, n):
        i = cuda.grid(1)
        if i < n:
            a[i] = 1

    a, calls = np.zeros(64, np.int64), np.zeros(1, np.int64)
    od.cuda(kernel, a, 40, blocks=2, threads=32, context=counted, state=calls, target="cpu")
    assert a.sum() == 40 and calls[0] == 64  # cuda.grid's call, in every one of the 64 threads


N = 50


def global_bound(a):
    i = cuda.grid(1)
    if i < N:
        a[i] = 1


def test_rebinding_the_global_a_bound_reads_moves_the_bound():
    global N
    a = np.zeros(128, np.int64)
    od.cuda(global_bound, a, blocks=2, threads=64, target="cpu")
    assert a.sum() == 50
    N = 100
    try:
        a[:] = 0
        od.cuda(global_bound, a, blocks=2, threads=64, target="cpu")
        assert a.sum() == 100
    finally:
        N = 50


def test_a_checked_kernel_still_runs_every_thread_and_names_the_bad_index():
    def reads_first(a, n):
        i = cuda.grid(1)
        v = a[i]  # out of range for the threads past the data, before the guard
        if i < n:
            a[i] = v + 1

    a = np.zeros(40, np.int64)
    with pytest.raises(IndexError, match="index 40"):
        od.cuda(reads_first, a, 40, blocks=2, threads=32, debug=True, target="cpu")


@od.struct
class Version:
    major: od.int64


@od.method(operator.lt)
def _older(a: Version, b: Version):
    return a.major < b.major


def test_a_comparison_method_for_a_user_type_leaves_the_guards_on_integers_alone():
    def kernel(out, versions, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = versions[i] < versions[0]

    versions = od.struct_array(Version, 5, target="cpu")
    assert bounds(kernel, INTS, versions, 5) == (("<", "a2"),)
    versions["major"] = [3, 1, 4, 1, 5]
    out = np.full(8, 7, np.int64)
    od.cuda(kernel, out, versions, 5, blocks=1, threads=8, target="cpu")
    assert out.tolist() == [0, 1, 0, 1, 0, 7, 7, 7]


def test_a_read_a_context_overdubs_before_the_guard_runs_in_every_thread():
    counting = counting_reads("counting", od.int64)

    def kernel(a, out, n):
        i = cuda.grid(1)
        v = a[i % n]  # read by every thread, the skipped ones too
        if i < n:
            out[i] = v

    a, out, reads = np.arange(40, dtype=np.int64), np.zeros(40, np.int64), np.zeros(1, np.int64)
    od.cuda(kernel, a, out, 40, blocks=2, threads=32, context=counting, state=reads, target="cpu")
    assert out.tolist() == list(range(40)) and reads[0] == 64


def grid_stride(a, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        a[i] += 1
        i += step


@pytest.mark.parametrize("n", [50, 1000])
def test_a_grid_stride_loop_covers_every_element_whether_the_grid_is_larger_or_smaller(n, workers):
    assert bounds(grid_stride, INTS, 5) == (("<", "a1"),)
    a = np.zeros(1000, np.int64)
    od.cuda(grid_stride, a, n, blocks=3, threads=32, target="cpu")
    assert (a[:n] == 1).all() and (a[n:] == 0).all()


def make_kernel(scale):
    def kernel(out, n):
        i = cuda.grid(1)
        if i < n - scale:
            out[i] = scale

    return kernel


def test_closures_made_by_a_factory_each_bound_by_their_own_captured_value():
    for scale in (3, 10, 3):
        out = np.zeros(64, np.int64)
        od.cuda(make_kernel(scale), out, 40, blocks=2, threads=32, target="cpu")
        assert out.tolist() == [scale] * (40 - scale) + [0] * (24 + scale), scale


def test_a_kernel_with_launch_state_is_bounded_by_its_own_arguments():
    scaled = od.Context("scaled_guard", state=od.float64)

    def kernel(out, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = od.state() * i

    out = np.zeros(64)
    od.cuda(kernel, out, 40, blocks=2, threads=32, context=scaled, state=0.5, target="cpu")
    np.testing.assert_array_equal(out, np.where(np.arange(64) < 40, 0.5 * np.arange(64), 0))
    out[:] = 0
    od.cuda(kernel, out, 20, blocks=2, threads=32, context=scaled, state=2.0, target="cpu")
    np.testing.assert_array_equal(out, np.where(np.arange(64) < 20, 2.0 * np.arange(64), 0))


@od.function
def where_am_i(scale: od.Integer):
    return cuda.threadIdx.x + scale * cuda.blockIdx.x


def test_kernels_and_callees_reading_the_thread_and_block_x_index_apart_see_their_own(workers):
    def kernel(out, n):
        i = cuda.grid(1)
        if i < n:
            out[i, 0] = where_am_i(1000)
            out[i, 1] = cuda.laneid
            out[i, 2] = i

    n = 64 * 32 - 5
    out = np.zeros((n, 3), np.int64)
    od.cuda(kernel, out, n, blocks=64, threads=32, target="cpu")
    i = np.arange(n)
    np.testing.assert_array_equal(out, np.stack([i % 32 + 1000 * (i // 32), i % 32, i], axis=1))


def global_index(out, n):
    x, y, z = cuda.grid(3)
    if x < n:
        out[z, y, x] = x + 1


def every_index(out):
    x, y, z = cuda.grid(3)
    if x < out.shape[2] and y < out.shape[1] and z < out.shape[0]:
        out[z, y, x] = (
            cuda.threadIdx.x
            + 7 * cuda.blockIdx.x
            + 100 * cuda.threadIdx.y
            + 1000 * cuda.blockIdx.y
            + 10000 * cuda.threadIdx.z
            + 100000 * cuda.blockIdx.z
        )


@pytest.mark.parametrize("seed", range(6))
def test_launch_shapes_drawn_at_random_run_each_thread_once_with_its_own_indices(seed, workers):
    rng = np.random.default_rng(seed)
    threads = tuple(int(t) for t in rng.integers(1, [40, 6, 4]))
    blocks = tuple(int(b) for b in rng.integers(1, [9, 5, 3]))
    shape = (blocks[2] * threads[2], blocks[1] * threads[1], blocks[0] * threads[0])
    n = int(rng.integers(0, shape[2] + 3))
    out = np.zeros(shape, np.int64)
    od.cuda(global_index, out, n, blocks=blocks, threads=threads, target="cpu")
    z, y, x = np.indices(shape)
    np.testing.assert_array_equal(out, np.where(x < n, x + 1, 0))
    out[:] = -1
    od.cuda(every_index, out, blocks=blocks, threads=threads, target="cpu")
    (tx, bx), (ty, by), (tz, bz) = ((axis % t, axis // t) for axis, t in zip((x, y, z), threads))
    np.testing.assert_array_equal(out, tx + 7 * bx + 100 * ty + 1000 * by + 10000 * tz + 100000 * bz)


# --- only numba's own operations may come before the guard (issue 19) ------------------------------------
# Every kernel below does something observable before its guard -- a method, a dunder, an overdub or a hook
# that counts its calls in the launch state -- so every thread must run it: each is compared with the same
# launch run with every thread (debug=True), and with the count a plain loop over the threads gives.

counted = od.Context("counted_effects", state=od.Array[od.int64, 1])


@od.struct
class Tally:
    v: od.int64

    def __sub__(self, other: "Tally"):
        cuda.atomic.add(od.state(), 0, 1)
        return Tally(self.v - other.v)

    def __neg__(self):
        cuda.atomic.add(od.state(), 0, 1)
        return Tally(-self.v)

    def __radd__(self, other: od.Integer):
        cuda.atomic.add(od.state(), 0, 1)
        return Tally(other + self.v)

    def __getitem__(self, k: od.Integer):
        cuda.atomic.add(od.state(), 0, 1)
        return self.v + k

    def __lt__(self, other: "Tally"):
        cuda.atomic.add(od.state(), 0, 1)
        return self.v < other.v


@od.method(operator.add)
def _tally_add(a: Tally, b: Tally):
    cuda.atomic.add(od.state(), 0, 1)
    return Tally(a.v + b.v)


@od.method(abs)
def _tally_abs(a: Tally):
    cuda.atomic.add(od.state(), 0, 1)
    return Tally(abs(a.v))


def add_first(out, s, n):
    i = cuda.grid(1)
    t = s + s
    if i >= n:
        return
    out[i] = t.v


def abs_first(out, s, n):
    i = cuda.grid(1)
    t = abs(s)
    if i >= n:
        return
    out[i] = t.v


def dunder_first(out, s, n):
    i = cuda.grid(1)
    t = s - s
    if i >= n:
        return
    out[i] = t.v


def unary_dunder_first(out, s, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = (-s).v  # after the guard: the admitted threads only


def neg_first(out, s, n):
    i = cuda.grid(1)
    t = -s
    if i < n:
        out[i] = t.v


def reflected_first(out, s, n):
    i = cuda.grid(1)
    t = 1 + s
    if i < n:
        out[i] = t.v


def getitem_first(out, s, n):
    i = cuda.grid(1)
    v = s[2]
    if i < n:
        out[i] = v


def inplace_first(out, s, n):
    i = cuda.grid(1)
    t = s
    t += s  # no __iadd__: Python's fallback, the method of +
    if i < n:
        out[i] = t.v


def comparison_in_the_guard(out, s, n):
    i = cuda.grid(1)
    if s < s or i >= n:  # every thread compares the Tallies
        return
    out[i] = 1


def walrus_guard(out, s, n):
    # numba 0.68 compiles no walrus inside a condition (``if (i := cuda.grid(1)) < n``), on Python 3.11
    i = (j := cuda.grid(1))
    t = (u := abs(s))
    if j >= n:
        return
    out[i] = t.v + u.v


def two_dimensional(out, s, n):
    x, y = cuda.grid(2)
    t = s + s
    if x >= n or y >= out.shape[0]:
        return
    out[y, x] = t.v


def run_counting(kernel, out, *args, blocks, threads, context=counted):
    """(the count and ``out`` as the launch leaves them, the same with every thread run)."""
    results = []
    for debug in (False, True):
        count, result = np.zeros(1, np.int64), out.copy()
        od.cuda(
            kernel,
            result,
            *args,
            blocks=blocks,
            threads=threads,
            context=context,
            state=count,
            target="cpu",
            debug=debug,
        )
        results.append((int(count[0]), result))
    return results


@pytest.mark.parametrize(
    "kernel, per_thread",
    [
        (add_first, 1),
        (abs_first, 1),
        (dunder_first, 1),
        (neg_first, 1),
        (reflected_first, 1),
        (getitem_first, 1),
        (inplace_first, 1),
        (comparison_in_the_guard, 1),
        (walrus_guard, 1),
    ],
    ids=lambda k: getattr(k, "__name__", None),
)
def test_a_user_method_or_dunder_before_the_guard_runs_in_every_thread(kernel, per_thread, workers):
    (count, out), (every, out_every) = run_counting(kernel, np.zeros(16, np.int64), Tally(3), 4, blocks=1, threads=16)
    assert count == every == 16 * per_thread
    np.testing.assert_array_equal(out, out_every)
    assert bounds(kernel, out, Tally(3), 4, context=counted) == ()


def test_a_user_method_after_the_guard_leaves_the_guard_in_place():
    (count, out), (every, out_every) = run_counting(
        unary_dunder_first, np.zeros(16, np.int64), Tally(3), 4, blocks=1, threads=16
    )
    assert count == every == 4 and out.tolist() == out_every.tolist() == [-3] * 4 + [0] * 12
    assert bounds(unary_dunder_first, out, Tally(3), 4, context=counted) == (("<", "a2"),)


def test_a_user_method_before_a_two_dimensional_guard_runs_in_every_thread(workers):
    (count, out), (every, out_every) = run_counting(
        two_dimensional, np.zeros((5, 16), np.int64), Tally(3), 4, blocks=(2, 2), threads=(8, 4)
    )
    assert count == every == 16 * 8
    np.testing.assert_array_equal(out, out_every)
    assert (out[:, :4] == 6).all() and (out[:, 4:] == 0).all()


def test_methods_for_a_user_type_leave_a_guard_on_numbers_in_place():
    def kernel(out, s, n):
        i = cuda.grid(1)
        if i < n + 1 and -i <= 0 and abs(i) < s.v:  # +, -, abs and < have methods, none for numbers
            out[i] = s.v - n

    out = np.zeros(16, np.int64)
    assert bounds(kernel, out, Tally(9), 4) == (("<", "(a2 + 1)"),)
    od.cuda(kernel, out, Tally(9), 4, blocks=1, threads=16, target="cpu")
    assert out.tolist() == [5] * 5 + [0] * 11


# --- a bound is compiled as the kernel compiles it --------------------------------------------------------


def defaulted(out, n=5):
    i = cuda.grid(1)
    if i < n:
        out[i] = 1


def test_a_defaulted_parameter_not_passed_bounds_by_its_default():
    out = np.zeros(16, np.int64)
    od.cuda(defaulted, out, blocks=1, threads=16, target="cpu")
    assert out.tolist() == [1] * 5 + [0] * 11
    assert bounds(defaulted, out) == (("<", "5"),)
    out[:] = 0
    od.cuda(defaulted, out, 9, blocks=1, threads=16, target="cpu")
    assert out.tolist() == [1] * 9 + [0] * 7
    out[:] = 0
    od.jit(defaulted, target="cpu")[1, 16](out)
    assert out.tolist() == [1] * 5 + [0] * 11


def test_a_defaulted_parameter_that_is_no_integer_bounds_nothing_but_the_kernel_still_compares():
    def kernel(out, bound=4.5, scale=None):
        i = cuda.grid(1)
        if i < bound:
            out[i] = 1

    out = np.zeros(16, np.int64)
    assert bounds(kernel, out) == ()
    od.cuda(kernel, out, blocks=1, threads=16, target="cpu")
    assert out.tolist() == [1] * 5 + [0] * 11


@od.struct
class Offset:
    v: od.int64


@od.method(operator.add)
def _offset_add(a: od.Integer, b: Offset):
    return a + b.v


@od.method(max)
def _offset_max(a: od.Integer, b: Offset):
    return max(a, b.v)


def test_a_bound_using_a_user_method_compiles_and_admits_what_the_kernel_admits():
    def through_add(out, m, s):
        i = cuda.grid(1)
        if i < m + s:
            out[i] = 1

    def through_max(out, m, s):
        i = cuda.grid(1)
        if i < max(m, s):
            out[i] = 1

    for kernel, expected in ((through_add, 7), (through_max, 4)):
        out = np.zeros(16, np.int64)
        od.cuda(kernel, out, 3, Offset(4), blocks=1, threads=16, target="cpu")
        assert out.sum() == expected, kernel.__name__
        assert bounds(kernel, out, 3, Offset(4)) == ()


def test_a_bound_reading_a_struct_field_is_kept():
    def kernel(out, s):
        i = cuda.grid(1)
        if i < s.v:
            out[i] = 1

    out = np.zeros(16, np.int64)
    assert bounds(kernel, out, Offset(6)) == (("<", "a1.v"),)
    od.cuda(kernel, out, Offset(6), blocks=1, threads=16, target="cpu")
    assert out.tolist() == [1] * 6 + [0] * 10


# --- overdubs and hooks, now and defined later ---------------------------------------------------------------


def plain_guard(out, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = 1


def test_a_context_overdub_of_a_comparison_with_an_effect_runs_in_every_thread():
    ctx = od.Context("counted_lt", parent=counted)

    @ctx.overdub(operator.ge)
    def _ge(a: od.Integer, b: od.Integer):
        cuda.atomic.add(od.state(), 0, 1)
        return a >= b

    (count, out), (every, out_every) = run_counting(
        plain_guard, np.zeros(16, np.int64), 4, blocks=1, threads=16, context=ctx
    )
    assert count == every == 16 and out.tolist() == out_every.tolist() == [1] * 4 + [0] * 12


def test_an_overdub_for_numbers_defined_later_recompiles_the_kernel_without_the_guard():
    ctx = od.Context("later_ge", parent=counted)

    @ctx.overdub(operator.ge)
    def _tally_ge(a: Tally, b: Tally):  # the table is not empty, but takes no numbers: the guard stays
        return a.v >= b.v

    (count, out), _ = run_counting(plain_guard, np.zeros(16, np.int64), 4, blocks=1, threads=16, context=ctx)
    assert count == 0 and out.tolist() == [1] * 4 + [0] * 12
    assert bounds(plain_guard, out, 4, context=ctx) == (("<", "a1"),)

    @ctx.overdub(operator.ge)
    def _ge(a: od.Integer, b: od.Integer):
        cuda.atomic.add(od.state(), 0, 1)
        return a - b >= 0

    (count, out), (every, _) = run_counting(plain_guard, np.zeros(16, np.int64), 4, blocks=1, threads=16, context=ctx)
    assert count == every == 16 and out.tolist() == [1] * 4 + [0] * 12


def test_hooks_on_a_call_in_the_bound_on_an_operator_or_on_every_call_see_every_thread():
    for hooked in (max, operator.add, od.Any):
        ctx = od.Context(f"hooked_{getattr(hooked, '__name__', 'any')}", parent=counted)

        @ctx.prehook(hooked)
        def _count(*args):
            cuda.atomic.add(od.state(), 0, 1)

        def kernel(out, n):
            i = cuda.grid(1)
            if i < max(n, 0) + 0:
                out[i] = 1

        (count, out), (every, out_every) = run_counting(
            kernel, np.zeros(16, np.int64), 4, blocks=1, threads=16, context=ctx
        )
        assert count == every and out.tolist() == out_every.tolist() == [1] * 4 + [0] * 12
        assert count >= 16 or hooked is operator.add  # hooks observe calls written as calls, not operators


def test_an_in_place_operator_on_an_array_before_the_guard_is_a_store_every_thread_makes():
    def kernel(out, total, n):
        i = cuda.grid(1)
        t = total
        t += 1  # numba adds 1 to every element of the array, in place
        if i >= n:
            return
        out[i] = 1

    for debug in (False, True):
        out, total = np.zeros(16, np.int64), np.zeros(1, np.int64)
        od.cuda(kernel, out, total, 4, blocks=1, threads=16, target="cpu", debug=debug)
        assert total[0] == 16 and out.sum() == 4, debug
    assert bounds(kernel, out, total, 4) == ()


def test_an_effect_between_two_guards_runs_in_every_thread_the_first_admits(workers):
    def kernel(out, s, n, m):
        x, y = cuda.grid(2)
        if x >= n:
            return
        t = s + s  # the threads with x < n run it
        if y >= m:
            return
        out[y, x] = t.v

    (count, out), (every, out_every) = run_counting(
        kernel, np.zeros((8, 16), np.int64), Tally(2), 5, 3, blocks=(2, 2), threads=(8, 4)
    )
    assert count == every == 5 * 8
    np.testing.assert_array_equal(out, out_every)
    assert bounds(kernel, out, Tally(2), 5, 3, context=counted) == (("<", "a2"),)
