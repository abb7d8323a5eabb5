"""The CPU target gives the GPU's answers: float to integer conversions saturate (``cvt.rzi``), the ``math``
functions numba-cuda compiles compile on the CPU with CUDA's meaning, a ``raise`` in a kernel without debug
ends its thread alone, and a function the target cannot compile is an error naming it (docs/compat.md).

The tests marked ``gpu`` run the same kernels on CUDA and compare (they skip without a GPU).
"""

import math

import numba
import numpy as np
import pytest

import overdub as od
from overdub.targets.cpu import runner

NEEDS_RUNNER = pytest.mark.skipif(
    runner.SYMBOLS is None,
    reason="overdub.targets.cpu._cpugrid is not built: without it the first raise stops the launch (docs/compat.md)",
)

EXTREMES = np.array([np.inf, 1e30, -np.inf, -1e30, np.nan, 3.7, -3.7, 1000.0, 70000.0, -1.0, 2.0**63, -(2.0**63)])
WIDTHS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _gpu_conversion(value: float, width: str, float_bits: int = 64) -> int:
    """What the GPU's code gives: ``cvt.rzi`` to the width (16 bits at least), clamped to its range, then the
    width's low bits. NaN, as measured on the H200: from a float64 the conversion's sign bit alone (INT_MIN,
    or 2^(w-1) unsigned); from a float32, 0 but to a 64-bit integer."""
    dtype = np.dtype(width)
    wide = max(dtype.itemsize * 8, 16)
    low, high = (-(2 ** (wide - 1)), 2 ** (wide - 1) - 1) if dtype.kind == "i" else (0, 2**wide - 1)
    if math.isnan(value):
        result = 0 if float_bits == 32 and wide < 64 else (low if dtype.kind == "i" else 2 ** (wide - 1))
    else:
        result = int(min(max(math.trunc(value) if math.isfinite(value) else value, low), high))
    return int(np.array(result & (2 ** (dtype.itemsize * 8) - 1), np.uint64).astype(dtype))


def _conversion_kernel(make_module, width: str):
    return make_module(f"""
        import numba
        from numba import cuda

        def kernel(out, x):
            i = cuda.grid(1)
            if i < x.size:
                out[i] = numba.{width}(x[i])
    """).kernel


@pytest.mark.parametrize("width", WIDTHS)
def test_float_to_integer_conversions_saturate_as_on_the_gpu(make_module, width):
    """On the H200 ``int(inf)`` is INT64_MAX; the CPU target gave INT64_MIN (LLVM's fptosi, x86's "integer
    indefinite") for inf, 1e30, -inf and NaN alike."""
    kernel = _conversion_kernel(make_module, width)
    for x in (EXTREMES, EXTREMES.astype(np.float32)):
        out = np.zeros(x.size, width)
        od.cuda(kernel, out, x, blocks=1, threads=32, target="cpu")
        assert out.tolist() == [_gpu_conversion(float(v), width, x.dtype.itemsize * 8) for v in x], x.dtype


def test_int_round_floor_and_stores_of_extreme_floats_saturate(make_module):
    m = make_module("""
        import math
        from numba import cuda

        def kernel(out, x):
            i = cuda.grid(1)
            if i < x.size:
                out[i, 0] = int(x[i])
                out[i, 1] = round(x[i])
                out[i, 2] = math.floor(x[i])
                out[i, 3] = x[i]  # a float stored into an int64 array
    """)
    x = np.array([np.inf, 1e30, -np.inf, -1e30, np.nan, 2.5])
    out = np.zeros((x.size, 4), np.int64)
    od.cuda(m.kernel, out, x, blocks=1, threads=32, target="cpu")
    top, bottom = 2**63 - 1, -(2**63)
    assert out[:5].tolist() == [[top] * 4, [top] * 4, [bottom] * 4, [bottom] * 4, [bottom] * 4]
    assert out[5].tolist() == [2, 2, 2, 2]


def test_round_to_digits_scales_in_float64_as_numba_cuda_does_on_the_gpu(make_module):
    """``round(x, n)`` of a float32: numba-cuda scales in float64, so float32(0.3425) (0.34250000119...) rounds
    up to 0.343, where numba's CPU code, in float32, met a tie and gave 0.342; ties of the scaled value still go
    to even, and a negative ``n`` rounds to tens."""
    m = make_module("""
        def kernel(out, x, n):
            out[0] = round(x[0], n)
            out[1] = round(x[1], n)
            out[2] = round(x[2], -1)
    """)
    out = np.zeros(3, np.float32)
    od.cuda(m.kernel, out, np.array([0.3425, 0.0625, 25.0], np.float32), 3, blocks=1, threads=1, target="cpu")
    assert out.tolist() == [np.float32(0.343), np.float32(0.062), np.float32(20.0)]


def test_numba_outside_kernels_keeps_its_own_conversions():
    """The saturating conversions are the CPU target's: a plain numba function compiled outside overdub is
    compiled as numba compiles it."""

    @numba.njit
    def plain(x):
        return int(x)

    assert plain(2.7) == 2
    assert plain(-2.7) == -2


MATH_SOURCE = """
    import math
    from numba import cuda

    def kernel(out, x, y):
        i = cuda.grid(1)
        if i < x.size:
            fraction, integral = math.modf(x[i])
            out[i, 0] = math.fmod(x[i], y[i])
            out[i, 1] = math.remainder(x[i], y[i])
            out[i, 2] = fraction
            out[i, 3] = integral
"""
MATH_X = np.array([7.5, -7.5, np.inf, 1.0, 5.0, -0.5, np.nan, 2.5, -3.0])
MATH_Y = np.array([3.0, 3.0, 2.0, 0.0, 2.0, 1.0, 1.0, 1.0, 2.0])


def _c_math(x: float, y: float) -> list[float]:
    """C's (and CUDA's) answers: NaN where Python's math raises."""
    fmod = math.fmod(x, y) if math.isfinite(x) and y != 0 else math.nan
    remainder = math.remainder(x, y) if math.isfinite(x) and y != 0 else math.nan
    fraction, integral = math.modf(x)
    return [fmod, remainder, fraction, integral]


def test_fmod_remainder_and_modf_compile_on_the_cpu_with_cudas_meaning(make_module):
    """They compile for CUDA (libdevice); on the CPU they failed with a bare "Cannot determine Numba type of
    <class 'builtin_function_or_method'>"."""
    m = make_module(MATH_SOURCE)
    out = np.zeros((MATH_X.size, 4))
    od.cuda(m.kernel, out, MATH_X, MATH_Y, blocks=1, threads=32, target="cpu")
    expected = np.array([_c_math(x, y) for x, y in zip(MATH_X, MATH_Y)])
    np.testing.assert_array_equal(out, expected)
    assert np.signbit(out[:, 2]).tolist() == np.signbit(expected[:, 2]).tolist()  # modf(-3.0) is (-0.0, -3.0)


def test_float32_math_stays_float32(make_module):
    m = make_module("""
        import math
        from numba import cuda

        def kernel(out, x):
            out[0] = math.fmod(x[0], x[1])
            out[1] = math.modf(x[0])[0]
    """)
    out = np.zeros(2, np.float32)
    od.cuda(m.kernel, out, np.array([7.25, 2.0], np.float32), blocks=1, threads=1, target="cpu")
    assert out.tolist() == [1.25, 0.25]


def test_a_function_the_cpu_target_cannot_compile_is_an_error_naming_it(make_module):
    m = make_module("""
        import math
        from numba import cuda

        def kernel(out, a):
            out[0] = math.lcm(a[0], 3)
    """)
    with pytest.raises(od.CompileError, match=r"math\.lcm\(int64, .*cannot be compiled for the CPU target.*:6"):
        od.cuda(m.kernel, np.zeros(1, np.int64), np.ones(1, np.int64), blocks=1, threads=1, target="cpu")


# --- raise in a kernel -----------------------------------------------------------------------------------

RAISE_SOURCE = """
    import numba
    from numba import cuda
    import overdub as od

    @od.function
    def check(v):
        if v == 5:
            raise ValueError("five")
        return v

    def kernel(out):
        i = cuda.grid(1)
        if i < out.size:
            if i == 3:
                raise ValueError("three")
            out[i] = check(i) + 1
"""


@NEEDS_RUNNER
def test_a_raise_without_debug_ends_its_thread_alone_as_on_cuda(make_module):
    """numba-cuda without debug ignores a kernel's raise: the thread returns. The CPU target stopped the whole
    launch with the exception, leaving the threads after it undone."""
    m = make_module(RAISE_SOURCE)
    out = np.zeros(100)
    od.cuda(m.kernel, out, blocks=4, threads=32, target="cpu")
    expected = np.arange(100) + 1.0
    expected[[3, 5]] = 0  # thread 3 raised in the kernel, thread 5 in a method it calls
    np.testing.assert_array_equal(out, expected)


@NEEDS_RUNNER
def test_a_raise_in_a_kernel_that_synchronizes_ends_its_thread_alone(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            t = cuda.threadIdx.x
            cuda.syncthreads()
            if t == 5:
                raise ValueError("five")
            cuda.syncthreads()
            out[cuda.grid(1)] = 1
    """)
    out = np.zeros(64)
    od.cuda(m.kernel, out, blocks=2, threads=32, target="cpu")
    assert out.sum() == 62 and out[5] == 0 and out[37] == 0


def test_a_raise_with_debug_reaches_the_launch(make_module):
    m = make_module(RAISE_SOURCE)
    with pytest.raises(ValueError, match=r"three|five"):
        od.cuda(m.kernel, np.zeros(100), blocks=4, threads=32, target="cpu", debug=True)


# --- the same kernels on the GPU -----------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("width", WIDTHS)
def test_conversions_agree_with_the_gpu(make_module, cupy, width):
    kernel = _conversion_kernel(make_module, width)
    for x in (EXTREMES, EXTREMES.astype(np.float32)):
        cpu = np.zeros(x.size, width)
        od.cuda(kernel, cpu, x, blocks=1, threads=32, target="cpu")
        gpu = cupy.zeros(x.size, width)
        od.cuda(kernel, gpu, cupy.asarray(x), blocks=1, threads=32, target="cuda")
        assert gpu.get().tolist() == cpu.tolist(), (x.dtype, x.tolist())


@pytest.mark.gpu
def test_math_functions_agree_with_the_gpu(make_module, cupy):
    m = make_module(MATH_SOURCE)
    cpu = np.zeros((MATH_X.size, 4))
    od.cuda(m.kernel, cpu, MATH_X, MATH_Y, blocks=1, threads=32, target="cpu")
    gpu = cupy.zeros((MATH_X.size, 4))
    od.cuda(m.kernel, gpu, cupy.asarray(MATH_X), cupy.asarray(MATH_Y), blocks=1, threads=32, target="cuda")
    np.testing.assert_array_equal(gpu.get(), cpu)


@pytest.mark.gpu
def test_a_raise_without_debug_agrees_with_the_gpu(make_module, cupy):
    m = make_module(RAISE_SOURCE)
    cpu = np.zeros(100)
    od.cuda(m.kernel, cpu, blocks=4, threads=32, target="cpu")
    gpu = cupy.zeros(100)
    od.cuda(m.kernel, gpu, blocks=4, threads=32, target="cuda")
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(gpu.get(), cpu)


# --- global arrays -------------------------------------------------------------------------------------


def test_an_in_place_change_of_a_global_array_is_seen_by_the_next_launch(make_module):
    """A global numpy array is read live on the CPU target, as numba-cuda reads a global device array ("device
    array capture"); numba froze a copy into the code, so the change was silently not seen."""
    m = make_module("""
        import numpy as np
        from numba import cuda

        TABLE = np.array([[1.0, 2.0], [3.0, 4.0]])

        def kernel(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = TABLE[i // 2, i % 2] * 2.0
    """)
    out = np.zeros(4)
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    assert out.tolist() == [2.0, 4.0, 6.0, 8.0]
    m.TABLE[:] = [[10.0, 20.0], [30.0, 40.0]]
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    assert out.tolist() == [20.0, 40.0, 60.0, 80.0]
    assert od.stats()["compiles"] == 1
    m.TABLE = np.array([[5.0, 6.0], [7.0, 8.0]])  # rebinding: a new array, a recompile
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    assert out.tolist() == [10.0, 12.0, 14.0, 16.0]


def test_a_global_array_read_by_a_method_is_read_live_too(make_module):
    m = make_module("""
        import numpy as np
        import overdub as od
        from numba import cuda

        WEIGHTS = np.arange(4, dtype=np.int64)

        @od.function
        def weight(i: od.Integer):
            return WEIGHTS[i] + WEIGHTS.size

        def kernel(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = weight(i)
    """)
    out = np.zeros(4, np.int64)
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    assert out.tolist() == [4, 5, 6, 7]
    m.WEIGHTS *= 10
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    assert out.tolist() == [4, 14, 24, 34]


RECORD_TABLE = """
    import numpy as np
    from numba import cuda

    POINTS = np.array([(1, 2.5), (3, 4.5)], dtype=[("n", np.int64), ("x", np.float64)])
    SCALE = np.array([2.0, 3.0])

    def kernel(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = POINTS[i].n * POINTS[i].x * SCALE[i]
"""


def test_an_in_place_change_of_an_array_numba_freezes_recompiles_the_kernel(make_module):
    """numba freezes a global array it cannot read live (here a record array on the CPU target; every global
    numpy array on CUDA, into constant memory) into the code: its contents are an edge, checked at each launch,
    so an in-place change recompiles instead of being silently stale."""
    m = make_module(RECORD_TABLE)
    out = np.zeros(2)
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    assert out.tolist() == [5.0, 40.5]
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    assert od.stats()["compiles"] == 1  # unchanged: no recompile
    m.POINTS[1]["x"] = 10.0
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cpu")
    assert out.tolist() == [5.0, 90.0]
    assert od.stats()["compiles"] == 2
    assert "the array POINTS was changed in place" in str(od.invalidation_log()[-1])


def test_a_global_array_frozen_into_cuda_code_is_an_edge_of_the_kernel(make_module):
    from overdub.targets import cuda as cuda_target

    m = make_module(RECORD_TABLE)
    target = cuda_target.target_for((9, 0))
    assert ".visible .entry" in od.code_ptx(m.kernel, numba.float64[::1])
    edges = od.explain(m.kernel, numba.float64[::1], target=target)
    assert any("contents of the array POINTS" in edge for edge in edges), edges
    assert any("contents of the array SCALE" in edge for edge in edges), edges


@pytest.mark.gpu
def test_an_in_place_change_of_a_global_array_is_seen_on_the_gpu(make_module, cupy):
    m = make_module(RECORD_TABLE)
    out = cupy.zeros(2)
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cuda")
    assert out.get().tolist() == [5.0, 40.5]
    m.SCALE[0] = 4.0
    od.cuda(m.kernel, out, blocks=1, threads=32, target="cuda")
    assert out.get().tolist() == [10.0, 40.5]


# --- arrays held in tuples, closure cells, defaults and modules: read as a global array is -------------------


TUPLE_TABLES = """
    import collections
    import numpy as np
    import overdub as od
    from numba import cuda

    TABLES = (np.array([0.5, 0.0]), np.array([1.0]))
    NESTED = ((np.array([0.5]), 2), np.array([1.0]))
    Pair = collections.namedtuple("Pair", "scale offset")
    PAIR = Pair(np.array([2.0]), np.array([0.25]))
    RECORDS = (np.array([(1, 2.5)], dtype=[("n", np.int64), ("x", np.float64)]),)
    DEFAULT = np.array([3.0])
    WEIGHTS = (np.array([4.0]),)

    def helper(i, w=DEFAULT):
        return w[i]

    @od.function
    def weighted(i: od.Integer, w=WEIGHTS):
        return w[0][i]

    def make_reader():
        captured = (np.array([6.0]), np.array([7.0]))

        def reader(i):
            return captured[1][i]

        return reader, captured

    reader, CAPTURED = make_reader()

    def from_tuple(out):
        out[0] = TABLES[0][0]

    def from_nested(out):
        out[0] = NESTED[0][0][0]

    def from_namedtuple(out):
        out[0] = PAIR.scale[0] + PAIR[1][0]

    def from_records(out):
        out[0] = RECORDS[0][0].x

    def from_default(out):
        out[0] = helper(0)

    def from_method_default(out):
        out[0] = weighted(0)

    def from_cell(out):
        out[0] = reader(0)

    def from_module(out):
        out[0] = cfg.TABLES[1][0]
"""


def _tuple_tables(make_module):
    m = make_module(TUPLE_TABLES)
    m.cfg = make_module("import numpy as np\nTABLES = (np.array([1.0]), np.array([8.0]))\n")
    return m


def _launch(kernel) -> float:
    out = np.zeros(1)
    od.cuda(kernel, out, blocks=1, threads=1, target="cpu")
    return float(out[0])


def test_an_in_place_change_of_an_array_in_a_global_tuple_is_seen_by_the_next_launch(make_module):
    """numba froze a global tuple's arrays into the code as constants: ``TABLES[0][0] = 7.0`` was silently not
    seen. The CPU target reads each array of the tuple live, as it reads a global array."""
    m = _tuple_tables(make_module)
    assert _launch(m.from_tuple) == 0.5
    m.TABLES[0][0] = 7.0
    assert _launch(m.from_tuple) == 7.0
    assert od.stats()["compiles"] == 1


def test_an_array_in_a_nested_global_tuple_is_read_live(make_module):
    m = _tuple_tables(make_module)
    assert _launch(m.from_nested) == 0.5
    m.NESTED[0][0][0] = 9.0
    assert _launch(m.from_nested) == 9.0


def test_an_array_in_a_global_namedtuple_is_read_live(make_module):
    m = _tuple_tables(make_module)
    assert _launch(m.from_namedtuple) == 2.25
    m.PAIR.scale[0] = 5.0
    m.PAIR.offset[0] = 0.5
    assert _launch(m.from_namedtuple) == 5.5


def test_an_in_place_change_of_a_record_array_in_a_global_tuple_recompiles_the_kernel(make_module):
    """An array the CPU cannot read live (records), in a tuple: its contents are an edge, as a global's are."""
    m = _tuple_tables(make_module)
    assert _launch(m.from_records) == 2.5
    m.RECORDS[0][0]["x"] = 4.5
    assert _launch(m.from_records) == 4.5
    assert od.stats()["compiles"] == 2
    assert "the array RECORDS[0] was changed in place" in str(od.invalidation_log()[-1])


def test_an_array_default_of_a_device_function_is_read_live(make_module):
    """numba compiles a default the call leaves out in as a constant (``def helper(i, w=DEFAULT)``)."""
    m = _tuple_tables(make_module)
    assert _launch(m.from_default) == 3.0
    m.DEFAULT[0] = 30.0
    assert _launch(m.from_default) == 30.0


def test_a_tuple_of_arrays_default_of_a_method_is_read_live(make_module):
    m = _tuple_tables(make_module)
    assert _launch(m.from_method_default) == 4.0
    m.WEIGHTS[0][0] = 40.0
    assert _launch(m.from_method_default) == 40.0


def test_a_tuple_of_arrays_in_a_device_functions_closure_cell_is_read_live(make_module):
    m = _tuple_tables(make_module)
    assert _launch(m.from_cell) == 7.0
    m.CAPTURED[1][0] = 70.0
    assert _launch(m.from_cell) == 70.0


def test_a_tuple_of_arrays_read_through_a_module_attribute_is_read_live(make_module):
    m = _tuple_tables(make_module)
    assert _launch(m.from_module) == 8.0
    m.cfg.TABLES[1][0] = 80.0
    assert _launch(m.from_module) == 80.0


def test_arrays_in_global_tuples_are_edges_of_cuda_code(make_module):
    """numba-cuda copies a host array it finds in a global tuple (or namedtuple) into constant memory: its
    contents are an edge, as a global array's are."""
    from overdub.targets import cuda as cuda_target

    m = _tuple_tables(make_module)
    target = cuda_target.target_for((9, 0))
    edges = []
    for kernel in (m.from_tuple, m.from_nested, m.from_namedtuple):
        assert ".visible .entry" in od.code_ptx(kernel, numba.float64[::1])
        edges += od.explain(kernel, numba.float64[::1], target=target)
    for label in ("TABLES[0]", "NESTED[0][0]", "PAIR.scale", "PAIR.offset"):
        assert any(f"contents of the array {label}" in edge for edge in edges), (label, edges)


def test_an_in_place_change_of_an_array_a_device_function_holds_recompiles_its_cuda_code(make_module):
    """A default, a closure cell's tuple, a module attribute's tuple: frozen into the PTX, their arrays'
    contents are edges, and an in-place change recompiles."""
    m = _tuple_tables(make_module)
    changes = [
        (m.from_default, m.DEFAULT, "helper's default w"),
        (m.from_cell, m.CAPTURED[1], "make_reader.<locals>.reader.captured[1]"),
        (m.from_module, m.cfg.TABLES[1], f"{m.cfg.__name__}.TABLES[1]"),
    ]
    for kernel, array, label in changes:
        od.code_ptx(kernel, numba.float64[::1])
        compiled = od.stats()["compiles"]
        od.code_ptx(kernel, numba.float64[::1])
        assert od.stats()["compiles"] == compiled  # unchanged: the PTX compiled above
        array[0] += 1.0
        od.code_ptx(kernel, numba.float64[::1])
        assert od.stats()["compiles"] == compiled + 1, label
        assert f"the array {label} was changed in place" in str(od.invalidation_log()[-1])


def test_nan_converts_as_measured_on_the_h200(make_module):
    """The H200's answers for NaN (probed on the GPU machine, 2026-12-01): the conversion's sign bit alone from a
    float64; 0 from a float32 but to a 64-bit integer; 0 for 8-bit integers."""
    measured = {
        ("int8", 64): 0, ("int16", 64): -32768, ("int32", 64): -(2**31), ("int64", 64): -(2**63),
        ("uint8", 64): 0, ("uint16", 64): 32768, ("uint32", 64): 2**31, ("uint64", 64): 2**63,
        ("int8", 32): 0, ("int16", 32): 0, ("int32", 32): 0, ("int64", 32): -(2**63),
        ("uint8", 32): 0, ("uint16", 32): 0, ("uint32", 32): 0, ("uint64", 32): 2**63,
    }  # fmt: skip
    for width in WIDTHS:
        kernel = _conversion_kernel(make_module, width)
        for float_type in (np.float64, np.float32):
            out = np.zeros(1, width)
            od.cuda(kernel, out, np.array([np.nan], float_type), blocks=1, threads=1, target="cpu")
            assert out[0] == measured[width, np.dtype(float_type).itemsize * 8], (width, float_type)


OUT_OF_RANGE_CONSTANTS = """
    import numba
    from numba import cuda

    def kernel(out):
        out[0] = int(1e30)
        out[1] = int(-1e30)
        out[2] = numba.int32(1e30)
        out[3] = numba.uint16(float("nan"))
"""


def test_an_out_of_range_constant_converts_as_the_gpus_instruction_does(make_module):
    """``int(1e30)`` of a literal: NVVM folded LLVM's ``fptosi`` of it as poison -- the stores dropped or a
    garbage value (the fuzzer, on the H200) -- where the GPU's ``cvt.rzi`` saturates; the CPU's conversion
    folds to the saturated value. On CUDA the conversion is the instruction itself."""
    m = make_module(OUT_OF_RANGE_CONSTANTS)
    out = np.zeros(4, np.int64)
    od.cuda(m.kernel, out, target="cpu")
    assert out.tolist() == [2**63 - 1, -(2**63), 2**31 - 1, 32768]
    ptx = od.code_ptx(m.kernel, numba.int64[::1])
    stores = [line for line in ptx.splitlines() if "st.global" in line]
    assert len(stores) == 4, ptx
    assert "cvt.rzi.s64.f64" in ptx and "cvt.rzi.s32.f64" in ptx


@pytest.mark.gpu
def test_out_of_range_constants_agree_with_the_gpu(make_module, cupy):
    m = make_module(OUT_OF_RANGE_CONSTANTS)
    out = cupy.zeros(4, np.int64)
    od.cuda(m.kernel, out, target="cuda")
    assert out.get().tolist() == [2**63 - 1, -(2**63), 2**31 - 1, 32768]
