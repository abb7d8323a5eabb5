"""Operators as calls, seen in the generated code: the code numba generates for built-in types is the same
whether or not operators are rerouted through overdub's dispatch (LLVM IR and PTX on the CUDA target, LLVM
IR on the CPU target), and methods added to operators compile to PTX without a GPU.
"""

import operator
import re

import numpy as np
import pytest
from numba import cuda
from numba.core import types

import overdub as od
from helpers import counting_reads
from overdub import compiler, settings
from overdub.call import KernelCall
from overdub.targets import get_target


def idioms(out, x, t, a2):
    """Operators on built-in types in the idioms numba treats specially: static tuple indices, x ** 2, +=
    on immutable values, `in` on a tuple, 2-d indices, shapes, shared and local arrays."""
    i = cuda.grid(1)
    if i < x.shape[0] and i < out.size:
        s = cuda.shared.array(16, np.float64)
        loc = cuda.local.array((2, 2), np.float64)
        loc[0, 1] = x[i]
        v = x[i] ** 2 + t[0] * t[1] - abs(x[i])
        v += 1.0
        v -= t[2]
        w = -v
        if not (v < 0.5) and i in (1, 2, 3):
            w *= 2
        k = i
        k //= 2
        k = k % 3 + (k << 1)
        s[i % 16] = w
        out[i] = s[i % 16] + a2[i, 0] + loc[0, 1] + x.shape[0] * k
        for j in range(i + 1):
            out[i] += x[j] / (j + 1)


ARGTYPES = (
    types.float64[::1],
    types.float64[::1],
    types.Tuple((types.float64, types.int64, types.float64)),
    types.float64[:, ::1],
)


def normalized(code: str) -> str:
    """Code with numba's per-compile unique numbers (function versions, shared-array ids) taken out."""
    code = re.sub(r"B\d+v\d+B", "BvB", code)
    code = re.sub(r"_cudapy_smem_\d+", "smem", code)
    code = re.sub(r"\$\d+", "$N", code)
    return re.sub(r"_v\d+_", "_v_", code)


def instructions(code: str) -> str:
    """LLVM IR with every local name, block label and comment taken out: the instructions, their types and
    constants (a kernel inlined into the CPU grid loop gets block labels from a process-wide counter)."""
    code = normalized(code)
    code = re.sub(r"\s*;.*$", "", code, flags=re.M)  # with the padding before it, which the label's length sets
    code = re.sub(r'^\s*("[^"]*"|[-\w.$]+):', "label:", code, flags=re.M)
    return re.sub(r'%("[^"]*"|[-\w.$]+)', "%v", code)


@pytest.fixture
def reroute(monkeypatch):
    """Compile with operators rerouted ("always") or left to numba ("never"), from a fresh cache."""

    def set_mode(mode):
        compiler.reset()
        monkeypatch.setattr(settings.REROUTE, "process_value", mode)

    return set_mode


def test_rerouted_operators_give_the_same_nvvm_ir_and_ptx_for_built_in_types(reroute):
    reroute("never")
    llvm, ptx = od.code_llvm(idioms, *ARGTYPES), od.code_ptx(idioms, *ARGTYPES)
    reroute("always")
    assert normalized(od.code_llvm(idioms, *ARGTYPES)) == normalized(llvm)
    assert any(
        edge.startswith("add(float64, float64) -> no method")
        for edge in od.explain(idioms, *ARGTYPES, target="cuda", negative=True)
    )  # it was rerouted
    assert normalized(od.code_ptx(idioms, *ARGTYPES)) == normalized(ptx)


def _cpu_llvm(kernel, argtypes):
    compiled = KernelCall.of(kernel, argtypes, get_target("cpu"), typed=True).compiled()
    launcher = compiled.launcher  # the runner's grid body, or the serial grid loop where it is not built
    code = launcher.body if hasattr(launcher, "body") else launcher.grid_loop
    return "\n".join(code.inspect_llvm().values())


def test_rerouted_operators_give_the_same_llvm_ir_on_the_cpu_target(reroute):
    from test_methods import idioms as cpu_idioms  # the idioms without shared memory, which the CPU refuses

    reroute("never")
    before = _cpu_llvm(cpu_idioms, ARGTYPES)
    reroute("always")
    after = _cpu_llvm(cpu_idioms, ARGTYPES)
    assert instructions(after) == instructions(before)


def test_operators_reach_no_table_while_every_table_of_them_is_empty(reroute):
    reroute("when-extended")

    def kernel(out, x):
        out[0] = x[0] >> x[1]  # no test adds a method or overdub to >>

    od.cuda(kernel, np.zeros(1, dtype=np.int64), np.array([8, 1]), target="cpu")
    edges = od.explain(kernel, np.zeros(1, dtype=np.int64), np.array([8, 1]), target="cpu", negative=True)
    assert any(edge.startswith("rshift has no methods") for edge in edges)
    assert not any(edge.startswith("rshift(") for edge in edges)


def test_a_method_on_operator_add_for_pointers_compiles_to_ptx_without_a_gpu(make_module, cuda_compiler):
    m = make_module(
        """
        import operator
        import overdub as od

        @od.method(operator.add)
        def offset(p: od.Ptr[od.float32], q: od.Ptr[od.float32]):
            return od.unsafe_load(p, 0) + od.unsafe_load(q, 0)

        def kernel(out, p, q):
            od.unsafe_store(out, p + q, 0)
    """,
        prefix="ptr_add_ptx",
    )
    P = od.Ptr[od.float32]
    ptx = od.code_ptx(m.kernel, P, P, P)
    assert ".visible .entry" in ptx and "add.f32" in ptx


def test_a_context_overdub_of_getitem_shows_in_the_ptx(cuda_compiler):
    ctx = od.Context("ptx_getitem")

    @ctx.overdub(operator.getitem)
    def _(a: od.Array[od.float32, 1], i: od.Integer):
        return a[i] * np.float32(3.0)

    def kernel(out, x):
        out[0] = x[0]

    plain = od.code_ptx(kernel, types.float32[::1], types.float32[::1])
    overdubbed = od.code_ptx(kernel, types.float32[::1], types.float32[::1], context=ctx)
    assert "mul.f32" in overdubbed and "mul.f32" not in plain


def test_struct_dunders_compile_to_ptx_without_a_gpu(make_module, cuda_compiler):
    from test_methods import DUAL

    m = make_module(DUAL, prefix="dual_ptx")
    ptx = od.code_ptx(m.kernel, types.float64[::1], types.float64)
    assert ".visible .entry" in ptx and "cos" in ptx


def test_an_operator_overdub_using_the_launch_state_compiles_to_ptx():
    counting = counting_reads("ptx_counting_reads", od.float32)

    def kernel(out, x):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i]

    ptx = od.code_ptx(kernel, types.float32[::1], types.float32[::1], context=counting, state=types.int64[::1])
    assert "atom.global.add" in ptx or "red.global.add" in ptx
