"""CUDA code generation without a GPU: kernels calling generic device methods compile to sm_90 PTX; dispatch
errors name the call site's real ``file.py:LINE`` on the CUDA path as on the CPU target.

Kernels are built with the ``make_module`` fixture of conftest.py (source written to a real file).
"""

import math
import re

import numba
import numpy as np
import pytest
from numba.core import types

import overdub as od
from helpers import CALLS_F_OF_X, NUMBA_CALLEES, SEED, WRITES_ONE, method_f


def test_seed_kernel_ptx_targets_sm90_and_calls_vprintf(make_module, cuda_compiler):
    m = make_module(SEED, prefix="seed_ptx")
    ptx = od.code_ptx(m.kernel, od.Ptr[od.int64], cc=(9, 0))
    assert ".target sm_90" in ptx
    assert "vprintf" in ptx
    assert ".visible .entry" in ptx


def test_print_of_a_tuple_and_of_a_dim3_compiles_to_one_vprintf(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(x):
            print((x, 2.5), cuda.threadIdx, cuda.blockDim.x)
    """)
    ptx = od.code_ptx(m.kernel, types.int64)
    assert "vprintf" in ptx and "(%lld, %f) (%d, %d, %d) %lld\n" in _strings(ptx)


def test_a_bfloat16_prints_as_a_float_as_numba_cuda_prints_it(make_module):
    m = make_module("""
        from numba import cuda

        def kernel():
            a = cuda.bfloat16(0.9375)
            print(a, a, a)
    """)
    ptx = od.code_ptx(m.kernel)
    assert "%f %f %f\n" in _strings(ptx) and "cvt.f64.f32" in ptx


def test_an_array_of_ml_dtypes_bfloat16_holds_numba_cudas_bfloat16(make_module):
    """A cupy (or any ``__cuda_array_interface__``) array of ml_dtypes' bfloat16 -- whose interface's typestr
    is a plain ``<V2`` -- is typed by its dtype as numba-cuda types it, and the kernel compiles."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from overdub import arguments
    from overdub.targets import get_target

    class Bfloat16Array:
        def __init__(self):
            self.dtype = np.dtype(ml_dtypes.bfloat16)
            self.__cuda_array_interface__ = {"shape": (5,), "typestr": "<V2", "strides": None, "data": (0x1000, False)}

    get_target("cuda")  # the CUDA target knows ml_dtypes' bfloat16 once both are imported
    described = arguments.Argument.of_kind(Bfloat16Array(), arguments.kind_of(Bfloat16Array()))
    bf16 = described.type.dtype
    assert str(bf16) == "__nv_bfloat16" and described.type.layout == "C"
    m = make_module("""
        import ml_dtypes
        from numba import cuda

        def kernel(a, b, out):
            i = cuda.grid(1)
            if i < a.size:
                out[i] = 2 * a[i] + 4 * b[i] + ml_dtypes.bfloat16(3.0)
    """)
    array = types.Array(bf16, 1, "C")
    assert ".entry" in od.code_ptx(m.kernel, array, types.int64[::1], array)
    from overdub.targets.cuda import abi  # the launch's parameter slots: the array's itemsize, 2 (the H200 run
    # found numba's as_dtype refusing numba-cuda's bfloat16 there, at the launch)

    assert [slot.constant for slot in abi._array_slots(array)][:4] == [0, 0, None, 2]


def test_printing_more_values_than_vprintf_takes_prints_the_format_and_warns_as_numba_cuda(make_module):
    m = make_module("def kernel(x):\n    print(" + ", ".join(["x"] * 33) + ")\n")
    with pytest.warns(numba.core.errors.NumbaWarning, match="cannot print more than 32 items"):
        ptx = od.code_ptx(m.kernel, types.int64)
    assert "%%lld" in _strings(ptx)


def _strings(ptx: str) -> str:
    """The text of the PTX's global byte-array constants (the format strings), decoded."""
    found = []
    for body in re.findall(r"\.b8 \S+\[\d+\] = \{([\d, ]+)\}", ptx):
        found.append(bytes(int(b) for b in body.split(",")).decode(errors="replace"))
    return "\n".join(found)


def test_seed_kernel_ptx_changes_after_redefinition(make_module, cuda_compiler):
    m = make_module(SEED, prefix="seed_ptx_redefined")
    before = od.code_ptx(m.kernel, od.Ptr[od.int64])
    m.run(SEED.replace("print(1)", "print(2)").split("def kernel")[0])
    after = od.code_ptx(m.kernel, od.Ptr[od.int64])
    assert before != after


def test_generic_device_method_dispatches_on_argument_type_in_ptx(make_module, cuda_compiler):
    m = make_module(
        """
        from numba import cuda

        import overdub as od

        @od.function
        def scale(x: od.Float):
            return x * 2.5

        @od.function
        def scale(x: od.Integer):
            return x << 3

        def kernel(out, x):
            out[cuda.grid(1)] = scale(x)
    """,
        prefix="dispatch_ptx",
    )
    f32 = od.code_ptx(m.kernel, types.float32[:], od.float32)
    i64 = od.code_ptx(m.kernel, types.int64[:], od.int64)
    assert f32 != i64
    assert "mul.f32" in f32 or "mul.rn.f32" in f32
    assert "shl.b64" in i64


def test_cuda_idiom_lowers_to_special_registers_barriers_shared_memory_and_atomics(make_module, cuda_compiler):
    m = make_module(
        """
        import math

        import numba
        from numba import cuda

        def kernel(a, out):
            sm = cuda.shared.array(32, numba.float32)
            t = cuda.threadIdx.x
            sm[t] = a[cuda.grid(1)]
            cuda.syncthreads()
            if t == 0:
                cuda.atomic.add(out, 0, sm[0] + math.sqrt(sm[1]))
    """,
        prefix="idiom_ptx",
    )
    ptx = od.code_ptx(m.kernel, types.float32[:], types.float32[:])
    for needle in ("%tid.x", "%ctaid.x", "bar.sync", ".shared", "atom.global.add.f32", "sqrt"):
        assert needle in ptx, needle


def test_context_overdub_changes_the_generated_code(make_module, cuda_compiler):
    m = make_module(
        """
        import math

        def kernel(out, x):
            out[0] = math.sin(x)
    """,
        prefix="context_ptx",
    )
    ctx = od.Context("fast_sin")

    @ctx.overdub(math.sin)
    def _(x: od.Float):
        return x

    plain = od.code_ptx(m.kernel, types.float64[:], od.float64)
    overdubbed = od.code_ptx(m.kernel, types.float64[:], od.float64, context=ctx)
    assert "sin" in plain
    assert "sin" not in overdubbed.replace("fast_sin", "")


def test_code_llvm_shows_the_nvvm_ir(make_module):
    m = make_module(
        """
        def kernel(p, v):
            p[0] = v
    """,
        prefix="llvm_ir",
    )
    llvm = od.code_llvm(m.kernel, od.Ptr[od.float32], od.float32)
    assert "store float" in llvm


def test_vector_loads_and_stores_are_128_bit_transactions(make_module):
    m = make_module(
        """
        from numba import cuda

        import overdub as od

        def kernel(x, y, n4):
            i = cuda.grid(1)
            if i < n4:
                xs = od.vload(x, i, 4)
                od.vstore(y, (xs[3], xs[2], xs[1], xs[0]), i)
    """,
        prefix="vector_ptx",
    )
    ptx = od.code_ptx(m.kernel, od.Ptr[od.float32], od.Ptr[od.float32], od.int64)
    assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx


def test_a_method_error_on_the_cuda_path_names_the_real_file_and_line(make_module):
    m = make_module(method_f("x") + CALLS_F_OF_X, prefix="cuda_method_error")
    with pytest.raises(od.MethodError) as info:
        od.code_ptx(m.kernel, types.float64[:], od.float64)
    message = str(info.value)
    assert "no method matching f(float64)" in message and "<string>" not in message
    assert f"called at {m.filename}:{m.line_of('out[0] = f(x)')}" in message
    assert f"f(x: Integer) at {m.filename}:{m.line_of('@od.function')}" in message


# --- what numba-cuda implements itself is delegated to it; numba dispatchers are compiled as callees ------

ARRAY = types.float64[::1]


DELEGATED = {
    "libdevice": ("def kernel(out, x):\n    out[0] = libdevice.sin(x)\n", (ARRAY, types.float64), "sin"),
    "fp16": ("def kernel(out, x):\n    out[0] = fp16.hsin(x)\n", (types.float16[::1], types.float16), "sin"),
    "grid group": (
        "def kernel(out):\n    g = cuda.cg.this_grid()\n    out[cuda.grid(1)] = 1\n    g.sync()\n",
        (ARRAY,),
        "cudaCGGetIntrinsicHandle",
    ),
    "warp shuffle": (
        "def kernel(out):\n    out[cuda.threadIdx.x] = cuda.shfl_down_sync(0xffffffff, cuda.threadIdx.x, 1)\n",
        (types.int32[::1],),
        "shfl.sync.down",
    ),
    "cache-hinted load": ("def kernel(out):\n    out[0] = cuda.ldcg(out, 1)\n", (ARRAY,), "ld.global.cg"),
}


@pytest.mark.parametrize("name", sorted(DELEGATED))
def test_numba_cuda_intrinsics_libdevice_fp16_and_grid_groups_compile_to_ptx_without_a_gpu(make_module, name):
    source, argtypes, expect = DELEGATED[name]
    m = make_module("from numba import cuda\nfrom numba.cuda import fp16, libdevice\n\n" + source)
    ptx = od.code_ptx(m.kernel, *argtypes)
    assert ".visible .entry" in ptx and expect in ptx


CALLS_NUMBA_CALLEES = NUMBA_CALLEES + "\n\ndef kernel(out, x):\n    out[0] = twice(x) + plus_one(x)\n"


def test_njit_and_cuda_device_function_callees_compile_to_ptx_without_a_gpu(make_module, cuda_compiler):
    m = make_module(CALLS_NUMBA_CALLEES)
    ptx = od.code_ptx(m.kernel, ARRAY, types.float64)
    assert ".visible .entry" in ptx
    edges = od.explain(m.kernel, ARRAY, types.float64, target="cuda")
    assert any("twice" in e for e in edges) and any("plus_one" in e for e in edges)


def test_a_redefined_njit_callee_is_an_edge(make_module, cuda_compiler):
    m = make_module(CALLS_NUMBA_CALLEES)
    before = od.code_ptx(m.kernel, ARRAY, types.float64)
    m.run("""
        @numba.njit
        def twice(x):
            return 3.5 * x
    """)
    assert od.code_ptx(m.kernel, ARRAY, types.float64) != before


def test_njit_and_cuda_device_function_callees_run_on_the_cpu_target(make_module):
    import numpy as np

    m = make_module(CALLS_NUMBA_CALLEES)
    out = np.zeros(1)
    od.cuda(m.kernel, out, 3.0, target="cpu")
    assert out[0] == 10.0


def test_a_context_can_overdub_a_function_numba_cuda_implements(make_module, cuda_compiler):
    m = make_module("""
        import overdub as od
        from numba.cuda import libdevice

        approx = od.Context("approx")

        @approx.overdub(libdevice.sin)
        def _(x):
            return x

        def kernel(out, x):
            out[0] = libdevice.sin(x)
    """)
    assert "sin" in od.code_ptx(m.kernel, ARRAY, types.float64).lower()
    assert "sin.approx" not in od.code_ptx(m.kernel, ARRAY, types.float64, context=m.approx) and od.code_ptx(
        m.kernel, ARRAY, types.float64, context=m.approx
    ) != od.code_ptx(m.kernel, ARRAY, types.float64)


def test_the_numba_internals_overdub_relies_on_are_where_it_expects_them():
    from numba.cuda import dispatcher
    from numba.cuda.descriptor import cuda_target

    assert callable(dispatcher.get_current_device)  # patched while compiling without a GPU
    assert callable(cuda_target.typing_context._lookup_global)


def test_od_cuda_launches_a_numba_cuda_jit_kernel_through_overdub(make_module):
    import numpy as np

    m = make_module(method_f("1"), "from numba import cuda\n\n\n@cuda.jit\ndef kernel(out):\n    out[0] = f(0)\n")
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out, target="cpu")
    assert out[0] == 1
    m.run(method_f("2"))
    od.cuda(m.kernel, out, target="cpu")
    assert out[0] == 2


def test_a_kernel_that_synchronizes_its_grid_gets_a_cooperative_launcher(make_module):
    m = make_module("from numba import cuda\n\n" + DELEGATED["grid group"][0])
    from overdub.compiler import cached_kernel
    from overdub.job import CompileJob
    from overdub.targets import cuda as cuda_target

    target = cuda_target.target_for((9, 0))
    compiled = cached_kernel(CompileJob.of(m.kernel, (ARRAY,), target.base.chain(target)))
    assert compiled.launcher.cooperative and compiled.launcher.library.needs_cudadevrt
    plain = make_module(WRITES_ONE)
    assert not cached_kernel(CompileJob.of(plain.kernel, (ARRAY,), target.base.chain(target))).launcher.cooperative


def test_a_kernel_launched_without_its_defaulted_parameter_compiles_for_cuda(make_module):
    """numba-cuda has no omitted arguments ("Signature mismatch: 1 argument types given, but function takes 2",
    found by the differential fuzzer on the GPU): the call passes the default's value, on both targets."""
    m = make_module("""
        from numba import cuda

        def kernel(out, n=5):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = n * 10 + i
    """)
    assert ".visible .entry" in od.code_ptx(m.kernel, types.int64[::1])
    out = np.zeros(3, np.int64)
    od.cuda(m.kernel, out, threads=4, target="cpu")
    assert out.tolist() == [50, 51, 52]
    od.cuda(m.kernel, out, 7, threads=4, target="cpu")
    assert out.tolist() == [70, 71, 72]


def test_a_kernel_run_on_the_cpu_target_first_still_compiles_for_cuda(make_module):
    """The disk cache's scan of attribute reads (bridge.note_attribute_templates) asks numba again after a
    compile; for a numba module's attribute (``cuda.warpsize``) on the CUDA target that must not fail."""
    m = make_module(
        """
        from numba import cuda

        def kernel(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = cuda.warpsize + i
    """
    )
    out = np.zeros(4, dtype=np.int64)
    od.cuda(m.kernel, out, blocks=1, threads=4, target="cpu")
    assert out.tolist() == [32, 33, 34, 35]
    assert ".visible .entry" in od.code_ptx(m.kernel, numba.int64[:])


def test_round_compiles_for_cuda_in_overdub_and_in_numba_cuda_alike():
    """overdub's CPU ``round`` (numba's builtin registry, shared with numba-cuda) leaves the CUDA target
    numba-cuda's: NVVM refused the IR of numba's (numba-cuda's test_round_* failed under overdub and under a
    plain ``cuda.jit`` once overdub was imported)."""
    from numba import cuda

    def rounded(out, x):
        out[0] = round(x)

    def rounded_to(out, x, digits):
        out[0] = round(x, digits)

    for float_type in (types.float32, types.float64):
        assert "cvt.rni.s64" in od.code_ptx(rounded, types.int64[:], float_type)  # __nv_llrint, inlined
        od.code_ptx(rounded_to, float_type[:], float_type, types.int32)
        assert "cvt.rni.s64" in cuda.compile_ptx(rounded, (types.int64[:], float_type), cc=(9, 0))[0]
    out = np.zeros(1, dtype=np.int64)
    for x, expected in ((2.5, 2), (-1.5, -2), (3.7, 4)):
        od.cuda(rounded, out, x, target="cpu")
        assert out[0] == expected


def test_carray_and_farray_view_a_pointer_on_both_targets():
    """numba-cuda's carray/farray of the pointer a CPointer signature gives (numba-cuda's test_array
    test_carray/test_farray failed: its inlined overload takes numba's pointer type only)."""
    from numba.cuda.np.numpy_support import carray, farray

    def views(ptr, out):
        a = carray(ptr, (2, 3))
        b = farray(ptr, (2, 3), dtype=np.float32)
        c = carray(ptr, 6)
        out[0], out[1], out[2] = a[1, 0], b[1, 0], c[5]
        out[3] = a.strides[0] + 100 * b.strides[1]
        a[0, 0] += 1.5

    x, out = np.arange(6, dtype=np.float32), np.zeros(4, dtype=np.float32)
    od.cuda(views, od.pointer(x), out, target="cpu")
    assert out.tolist() == [3.0, 1.0, 5.0, 812.0] and x[0] == 1.5
    kernel = od.jit(types.void(types.CPointer(types.float32), types.float32[:]), target="cpu")(views)
    kernel[1, 1](x.ctypes.data, out)  # an address, as numba-cuda takes one for a CPointer
    assert x[0] == 3.0
    assert ".visible .entry" in od.code_ptx(views, od.Ptr[od.float32], types.float32[:])
    with pytest.raises(Exception, match="carray"):
        od.code_ptx(views, types.float32[:], types.float32[:])  # not a pointer: refused, naming the call


def test_a_closure_capturing_a_host_array_compiles_for_cuda_with_the_array_a_constant():
    """A closure kernel's captured data are launch arguments (one compiled kernel per captured types), but a
    host array is no argument a CUDA kernel reads: the closure compiles with it a constant, as numba-cuda
    freezes one (numba-cuda's test_array_copy and test_ssa capture one), its contents an edge of the kernel."""

    def make(values):
        def kernel(out):
            for i in range(len(out)):
                out[i] = values[i] * 2

        return kernel

    ptx = od.code_ptx(make(np.array([1.5, 2.5])), numba.types.float64[::1])
    assert ".visible .entry" in ptx and ".const" in ptx  # numba-cuda's constant memory holds the array
