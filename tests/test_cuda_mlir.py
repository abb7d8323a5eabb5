"""The cuda-mlir target (numba-cuda-mlir compiling overdub kernels) without a GPU: PTX of the seed kernel,
dispatch, contexts, operators, structs and the kernel language; its refusals; the setting that makes it the
CUDA compiler. The tests both CUDA compilers share take the ``cuda_compiler`` fixture (test_cuda_codegen.py,
test_gpu.py). Skipped where numba-cuda-mlir is not installed (``pip install 'overdub[mlir]'``; CI installs it).
"""

import math
import operator
import re
import subprocess
import sys

import numba
import pytest
from numba.core import types

import overdub as od
from helpers import ROOT, SEED

pytest.importorskip("numba_cuda_mlir")

ARRAY = types.float64[::1]


def ptx(kernel, *argtypes, **options):
    return od.code_ptx(kernel, *argtypes, target="cuda-mlir", **options)


def test_a_kernel_calling_a_generic_function_gives_sm90_ptx_with_the_method_in_it(make_module):
    m = make_module(
        """
        from numba import cuda
        import overdub as od

        @od.function
        def g(x: od.Float):
            return x * 2.0

        @od.function
        def g(x: od.Integer):
            return x + 100

        def kernel(a, b):
            i = cuda.grid(1)
            if i < a.size:
                b[i] = g(a[i]) + g(3)
    """,
        prefix="mlir_dispatch",
    )
    code = ptx(m.kernel, ARRAY, ARRAY)
    assert ".target sm_90" in code and ".visible .entry" in code
    # g(a[i]) is the Float method (x * 2.0), g(3) the Integer one (103, folded): 2x + 103 in one fma
    assert "fma.rn.f64" in code and "0d4000000000000000" in code and "0d4059C00000000000" in code


def test_the_seed_kernel_compiles_and_its_redefinition_changes_the_ptx(make_module):
    m = make_module(SEED, prefix="mlir_seed")
    before = ptx(m.kernel, od.Ptr[od.int64])
    assert "vprintf" in before and "st.u64" in before  # print(1), unsafe_store(ptr, 0)
    m.run(SEED.replace("print(1)", "print(2)").split("def kernel")[0])
    after = ptx(m.kernel, od.Ptr[od.int64])
    two = re.compile(r"mov.u64\s+%rd\d+, 2;")  # the value print(2) prints
    assert after != before and two.search(after) and not two.search(before)


def test_a_context_overdubs_a_call_and_an_operator(make_module):
    m = make_module(
        """
        import math

        def kernel(a):
            a[0] = math.sin(a[0]) + 3.0
    """,
        prefix="mlir_context",
    )
    ctx = od.Context("mlir_ctx")

    @ctx.overdub(math.sin)
    def _(x: od.Float):
        return x * 5.0

    @ctx.overdub(operator.add)
    def _(x: od.Float, y: od.Float):
        return x - y

    plain, overdubbed = ptx(m.kernel, ARRAY), ptx(m.kernel, ARRAY, context=ctx)
    assert "sin" in plain and "add.f64" in plain
    assert "sin" not in overdubbed.replace("mlir_ctx", "") and "add.f64" not in overdubbed
    assert "0d4014000000000000" in overdubbed  # 5.0: the overdub's body


def test_a_struct_is_made_read_and_dispatched_on(make_module):
    m = make_module(
        """
        import overdub as od

        @od.struct
        class V:
            x: od.float64
            y: od.float32 = 2.0

        @od.function
        def norm1(v: V):
            return abs(v.x) + v.y

        def kernel(a, v):
            w = V(3, y=1.5)  # an int converted to the float64 field, a keyword
            a[0] = norm1(v) + norm1(w) + V(1.0).y  # the default
    """,
        prefix="mlir_struct",
    )
    code = ptx(m.kernel, ARRAY, m.V.__overdub_type__)
    entry = code[code.index(".entry") : code.index("ret;")]
    assert ".param .f64" in entry and ".param .f32" in entry  # the struct argument, field by field
    assert "abs.f64" in entry and "0d4012000000000000" in entry and "0d4000000000000000" in entry  # 4.5, 2.0


def test_the_kernel_language_lowers_to_special_registers_barriers_shared_memory_and_atomics(make_module):
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
                cuda.atomic.add(out, 0, sm[0] + math.sqrt(sm[1]) + cuda.libdevice.fabsf(sm[2]))
    """,
        prefix="mlir_idiom",
    )
    code = ptx(m.kernel, types.float32[:], types.float32[:])
    for needle in ("%tid.x", "%ctaid.x", "bar.sync", ".shared", "atom.global.add.f32", "sqrt", "abs.f32"):
        assert needle in code, needle


def test_round_of_a_float_rounds_halves_to_even_as_python_and_numba_cuda_do():
    def rounded(out, x):
        out[0] = round(x)

    for float_type in (types.float32, types.float64):
        code = ptx(rounded, types.int64[:], float_type)
        assert "cvt.rni.f64.f64" in code and "copysign" not in code  # not numba-cuda-mlir's half away from zero


def test_a_device_function_calling_itself_compiles(make_module):
    m = make_module(
        """
        def fact(n):
            if n <= 1:
                return 1
            return n * fact(n - 1)

        def kernel(a, n):
            a[0] = fact(n)
    """,
        prefix="mlir_recursive",
    )
    code = ptx(m.kernel, types.int64[::1], types.int64)
    assert re.search(r"\.func +\(\.param \.b64 func_retval0\) _Z\d+fact_", code) and "mul.lo.s64" in code
    m.run("def fact(n):\n    return 1 if n <= 1 else n + fact(n - 1)\n")  # redefined: recompiled, a sum now
    summed = ptx(m.kernel, types.int64[::1], types.int64)
    assert summed != code and "mul.lo.s64" not in summed.split(".func", 1)[1]


def test_what_it_cannot_compile_is_refused_naming_the_call_and_what_to_do(make_module):
    m = make_module(
        """
        import overdub as od

        def vectors(p, q):
            od.vstore(q, od.vload(p, 0, 4), 0)

        def stateful(a):
            a[0] = od.state()
    """,
        prefix="mlir_refused",
    )
    with pytest.raises(Exception, match=r"numba-cuda-mlir .* has no implementation of it: launch on target='cuda'"):
        ptx(m.vectors, od.Ptr[od.float32], od.Ptr[od.float32])
    ctx = od.Context("mlir_state", state=types.float64)
    with pytest.raises(Exception, match="does not compile launches passing state"):
        ptx(m.stateful, ARRAY, context=ctx, state=1.0)

    @od.struct
    class Pair:
        a: od.float64
        b: od.float64

    def first(out, pairs):
        out[0] = pairs[0].a

    with pytest.raises(TypeError, match=r"is an array of a struct.*launch on target='cuda'"):
        ptx(first, ARRAY, Pair.__overdub_type__[::1])


def test_the_setting_makes_it_what_target_cuda_compiles_with(monkeypatch):
    from overdub import settings, targets

    assert targets.get_target("cuda").name == "cuda"
    monkeypatch.setattr(settings.CUDA_COMPILER, "process_value", "numba-cuda-mlir")
    assert targets.get_target("cuda").name == "cuda-mlir"

    def kernel(a):
        a[0] = 1.5

    assert "_param_5" not in od.code_ptx(kernel, ARRAY)  # numba-cuda-mlir's memref ABI: 5 parameters
    monkeypatch.setenv("OVERDUB_CUDA_COMPILER", "mlir")
    with pytest.raises(ValueError, match="OVERDUB_CUDA_COMPILER is 'mlir': set it to 'numba-cuda'"):
        settings.CUDA_COMPILER.parse("mlir")


def test_each_compiler_keeps_its_own_code_in_the_caches():
    def kernel(a):
        a[0] = 2.5

    numba_cuda = od.code_ptx(kernel, ARRAY, target="cuda")
    mlir = ptx(kernel, ARRAY)
    assert "_param_6" in numba_cuda and "_param_5" not in mlir  # 7 parameters an array there, 5 here
    assert od.code_ptx(kernel, ARRAY, target="cuda") == numba_cuda and ptx(kernel, ARRAY) == mlir
    from overdub.targets import cuda, cudamlir

    assert "numba-cuda-mlir" in cudamlir.target_for((9, 0)).cache_tag
    assert cudamlir.target_for((9, 0)).cache_tag != cuda.target_for((9, 0)).cache_tag


def test_without_numba_cuda_mlir_the_target_says_what_to_install():
    code = (
        "import sys; sys.modules['numba_cuda_mlir'] = None\n"
        "import overdub as od, numba\n"
        "def k(a):\n    a[0] = 1\n"
        "try:\n    od.code_ptx(k, numba.float64[::1], target='cuda-mlir')\n"
        "except ImportError as e:\n    print(e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "pip install 'overdub[mlir]'" in result.stdout, result.stderr[-2000:]


def test_the_numba_cuda_mlir_internals_it_relies_on_are_where_it_expects_them():
    import numba_cuda_mlir.tools as tools
    from numba_cuda_mlir.mlir_lowering import MLIRLower

    assert hasattr(tools, "_cached_cc") and callable(tools.resolve_gpu_target)
    for name in ("build_user_defined_function_call", "get_registered_builder", "store_var", "get_numba_type"):
        assert callable(getattr(MLIRLower, name)), name
    from numba_cuda_mlir.numba_cuda.core import ir

    assert all(hasattr(ir, kind) for kind in ("SetItem", "StaticSetItem", "Assign", "Expr", "Global"))
    assert numba.cuda.grid is not None
