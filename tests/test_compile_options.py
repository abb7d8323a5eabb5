"""Compile options (numba-cuda's ``cuda.jit`` options): each changes the code, each configured target is its
own cache, and ``debug`` makes checked kernels whose errors name the array, the index, the thread, the block
and the kernel line instead of corrupting memory."""

import os

import numpy as np
import pytest
from numba import cuda
from numba import types as numba_types
from numba.core.extending import overload

import overdub as od
from helpers import compiles, run_python
from overdub.bridge import signatures
from overdub.targets import CompileOptions, get_target

SOURCE = """
from numba import cuda

def double(a, b):
    i = cuda.grid(1)
    b[i] = a[i] * 2          # no `if i < n` guard
"""


def test_a_checked_kernel_names_the_array_index_thread_block_and_line(make_module):
    m = make_module(SOURCE, prefix="checked")
    a, b = np.arange(10.0), np.zeros(10)
    with pytest.raises(IndexError) as info:
        od.cuda(m.double, a, b, blocks=2, threads=8, target="cpu", debug=True)
    message = str(info.value)
    line = m.line_of("b[i] = a[i] * 2")
    assert "index 10 is out of bounds for axis 0 with size 10 of array 'a'" in message
    assert "thread (2, 0, 0) of block (1, 0, 0)" in message
    assert f"{m.filename}:{line}" in message


def test_a_checked_store_names_the_array_it_stores_into(make_module):
    m = make_module(
        """
        from numba import cuda
        def fill(out, n):
            i = cuda.grid(1)
            out[i + n] = 1.0
    """,
        prefix="checked_store",
    )
    with pytest.raises(
        IndexError,
        match=r"index 4 is out of bounds .* of array 'out', in thread \(1, 0, 0\) "
        r"of block \(0, 0, 0\)",
    ):
        od.cuda(m.fill, np.zeros(4), 3, threads=4, target="cpu", debug=True)


def test_a_checked_kernel_runs_correct_launches_and_is_cached_apart_from_the_unchecked_one(make_module):
    m = make_module(SOURCE, prefix="checked_ok")
    a, b = np.arange(16.0), np.zeros(16)
    before = compiles()
    od.cuda(m.double, a, b, blocks=2, threads=8, target="cpu")
    od.cuda(m.double, a, b, blocks=2, threads=8, target="cpu", debug=True)
    od.cuda(m.double, a, b, blocks=2, threads=8, target="cpu", debug=True)
    od.cuda(m.double, a, b, blocks=2, threads=8, target="cpu")
    assert compiles() - before == 2
    assert np.array_equal(b, a * 2)


def test_a_checked_kernel_checks_its_callees(make_module):
    m = make_module(
        """
        import overdub as od
        from numba import cuda

        @od.function
        def get(a, i):
            return a[i + 1]

        def shifted(a, b):
            i = cuda.grid(1)
            b[i] = get(a, i)
    """,
        prefix="checked_callee",
    )
    with pytest.raises(IndexError) as info:
        od.cuda(m.shifted, np.zeros(4), np.zeros(4), threads=4, target="cpu", debug=True)
    assert "index 4" in str(info.value) and "thread (3, 0, 0)" in str(info.value)
    assert f"{m.filename}:{m.line_of('return a[i + 1]')}" in str(info.value)


def test_od_jit_debug_makes_a_checked_kernel(make_module):
    m = make_module(SOURCE, prefix="checked_jit")
    kernel = od.jit(debug=True, target="cpu")(m.double)
    with pytest.raises(IndexError, match="array 'a'"):
        kernel[1, 12](np.zeros(10), np.zeros(12))


def test_overdub_debug_in_the_environment_checks_every_launch(tmp_path):
    script = tmp_path / "envdebug.py"
    script.write_text(
        SOURCE
        + """
import numpy as np, overdub as od
try:
    od.cuda(double, np.zeros(3), np.zeros(8), threads=8, target="cpu")
except IndexError as e:
    print("checked:", e)
"""
    )
    out = run_python(script, env={"OVERDUB_DEBUG": "1"})
    assert "checked: index 3 is out of bounds" in out.stdout, out.stderr


def test_unknown_launch_keywords_are_refused_by_name():
    def kernel(a):
        pass

    with pytest.raises(TypeError, match="bogus"):
        od.cuda(kernel, np.zeros(1), target="cpu", bogus=1)


def test_compile_options_are_checked():
    with pytest.raises(TypeError, match="max_registers"):
        CompileOptions.of(max_registers=-1)
    with pytest.raises(TypeError, match="unknown compile options"):
        CompileOptions.of(fast=True)
    with pytest.raises(ValueError, match="Got 4 launch bounds"):  # numba-cuda's error and message
        od.jit(launch_bounds=(1, 2, 3, 4))(lambda a: None)
    with pytest.raises(TypeError, match="launch_bounds must be a positive int"):
        od.jit(launch_bounds=(128, 0))(lambda a: None)
    carveouts = {"MaxL1": 0, "maxshared": 100, "default": -1, 50: 50, -1: -1}
    assert {k: CompileOptions.of(shared_memory_carveout=k).shared_memory_carveout for k in carveouts} == carveouts
    for wrong, message in ((150, "must be between -1 and 100"), (-2, "between -1"), ("MaxL2", "Invalid carveout")):
        with pytest.raises(ValueError, match=message):
            od.jit(shared_memory_carveout=wrong)(lambda a: None)


def test_a_configured_target_is_one_object_per_options_value_and_keeps_the_targets_meaning_of_names():
    cpu = get_target("cpu", debug=False)
    fast = cpu.configured(CompileOptions(fastmath=True))
    assert fast is cpu.configured(CompileOptions(fastmath=True)) and fast is not cpu
    assert fast.configured(CompileOptions()) is cpu
    assert fast.root.forwarded(print) is cpu.root.forwarded(print) is not None
    assert fast.label == "cpu (fastmath)"


def test_od_jit_extensions_prepare_the_arguments_and_write_back():
    class Boxed:
        def __init__(self, n):
            self.data = np.zeros(n)

    written = []

    class Unbox:
        def prepare_args(self, ty, val, stream=0, retr=None):
            if isinstance(val, Boxed):
                retr.append(lambda: written.append(val.data.copy()))
                return ty, val.data
            return ty, val

    @od.jit(extensions=[Unbox()], target="cpu")
    def fill(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = i

    box = Boxed(4)
    fill[1, 4](box)
    assert list(box.data) == [0, 1, 2, 3] and len(written) == 1


# --- the CUDA target's options, in the PTX (no GPU needed) -----------------------------------------------


def _axpy(out, a, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] / y[i]


_AXPY_SIG = "void(float32[::1], float32, float32[::1], float32[::1])"
_AXPY_TYPES = signatures.signature_argtypes(_AXPY_SIG)


def _ptx(**options):
    return od.code_ptx(_axpy, *_AXPY_TYPES, **options)


def test_fastmath_gives_approximate_division_in_the_ptx():
    assert "div.rn.f32" in _ptx() and "div.rn.f32" not in _ptx(fastmath=True)
    assert "div.approx" in _ptx(fastmath=True) or "div.full" in _ptx(fastmath=True)


def test_launch_bounds_and_lineinfo_reach_the_ptx():
    assert ".maxntid 128" in _ptx(launch_bounds=128)
    assert ".loc" in _ptx(lineinfo=True) and ".loc" not in _ptx()


def test_debug_on_cuda_records_kernel_exceptions_for_the_host():
    ptx = _ptx(debug=True)
    assert "__errcode__" in ptx and "__errcode__" not in _ptx()


def test_od_jit_inspect_asm_compiles_with_the_kernels_options():
    kernel = od.jit("void(float32[::1], float32, float32[::1], float32[::1])", fastmath=True, launch_bounds=64)(_axpy)
    ptx = kernel.inspect_asm("void(float32[::1], float32, float32[::1], float32[::1])")
    assert ".maxntid 64" in ptx and "div.rn.f32" not in ptx


@pytest.mark.parametrize(
    "blocks, threads", [(1, 1025), (1, (32, 32, 2)), (1, (1, 1, 65)), (1, 2**20), ((1, 65536), 1), (2**31, 1)]
)
def test_launches_beyond_cudas_limits_are_refused_on_the_cpu_target_as_on_the_gpu(blocks, threads):
    def kernel(a):
        pass

    with pytest.raises(ValueError, match=r"exceeds CUDA.s limits|tuple of 1-3 positive integers"):
        od.cuda(kernel, np.zeros(1), blocks=blocks, threads=threads, target="cpu")


def test_launches_at_cudas_limits_run_on_the_cpu_target():
    def count(a):
        cuda.atomic.add(a, 0, 1)

    a = np.zeros(1, dtype=np.int64)
    od.cuda(count, a, blocks=(2, 1, 1), threads=(8, 8, 16), target="cpu")
    assert a[0] == 2 * 1024


def test_code_typed_and_inspect_types_show_the_types_after_dispatch(capsys):
    text = od.code_typed(_axpy, *_AXPY_TYPES)
    assert "float32" in text and "out[i] = a * x[i] / y[i]" in text
    kernel = od.jit(_AXPY_SIG)(_axpy)
    kernel.inspect_types()
    printed = capsys.readouterr().out
    assert printed.startswith("_axpy (") and "out[i] = a * x[i] / y[i]" in printed


def test_a_numba_typing_error_in_a_kernel_is_both_a_compile_error_and_numbas_typing_error():
    import pickle

    from numba.core.errors import TypingError

    def broken(a):
        a[0] = not_defined_anywhere + 1  # noqa: F821

    with pytest.raises(TypingError) as info:
        od.cuda(broken, np.zeros(1), target="cpu")
    assert isinstance(info.value, od.CompileError) and "not_defined_anywhere" in str(info.value)
    again = pickle.loads(pickle.dumps(info.value))
    assert isinstance(again, TypingError) and isinstance(again, od.CompileError)


def _scaled(x, factor=2.0):
    """A placeholder numba implements by @overload (below), called with a keyword in a kernel."""
    raise NotImplementedError


@overload(_scaled)
def _scaled_overload(x, factor=2.0):
    return lambda x, factor=2.0: x * factor


def test_keyword_arguments_and_defaults_reach_callables_numba_implements():
    def kernel(out):
        out[0] = _scaled(3.0, factor=5.0)
        out[1] = _scaled(3.0)
        out[2] = _scaled(factor=0.5, x=3.0)

    out = np.zeros(3)
    od.cuda(kernel, out, target="cpu")
    assert out.tolist() == [15.0, 6.0, 1.5]
    assert "ret;" in od.code_ptx(kernel, numba_types.float64[::1])


def test_a_kernel_reshaping_an_array_links_numba_cudas_reshape_helpers():
    from overdub.targets import cuda as cuda_target

    def flat(out, a):
        b = a.reshape(4)
        out[0] = b[3]

    target = cuda_target.target_for((9, 0))
    two_d = numba_types.float64[:, ::1]
    cres = target._kernel_code(flat, (numba_types.float64[::1], two_d))
    assert cuda_target._RESHAPE_SOURCE in cres.library._linking_files
    assert os.path.exists(cuda_target._RESHAPE_SOURCE)


def test_a_kernel_making_arrays_links_numba_cudas_device_nrt_where_it_is_enabled(monkeypatch):
    """numba-cuda's ``config.CUDA_ENABLE_NRT``: array methods and numpy functions that allocate call its device
    NRT, which is linked with the kernel (it was not: nvJitLink failed on an undefined NRT_incref)."""
    from numba.cuda import config
    from numba.cuda.memory_management.nrt import NRT_LIBRARY

    from overdub.targets import cuda as cuda_target

    def copies(out, a):
        b = a.copy()
        out[0] = b[1] + a.sum()

    def plain(out, a):
        out[0] = a[1]

    target, vector = cuda_target.target_for((9, 0)), numba_types.float64[::1]
    monkeypatch.setattr(config, "CUDA_ENABLE_NRT", True)
    assert NRT_LIBRARY in target._kernel_code(copies, (vector, vector)).library._linking_files
    assert NRT_LIBRARY not in target._kernel_code(plain, (vector, vector)).library._linking_files


@pytest.mark.gpu
def test_a_kernel_making_arrays_runs_with_numba_cudas_device_nrt_on_the_gpu(monkeypatch):
    from numba.cuda import config

    monkeypatch.setattr(config, "CUDA_ENABLE_NRT", True)

    def kernel(out, a):
        b = a.copy()
        b[0] = 10.0
        out[0] = b.sum() + np.mean(a)

    a = cuda.to_device(np.arange(4.0))
    out = cuda.to_device(np.zeros(1))
    od.cuda(kernel, out, a)
    assert out.copy_to_host()[0] == 10.0 + 1 + 2 + 3 + 1.5


def test_compile_options_on_a_device_function_warn_that_they_apply_to_kernels():
    with pytest.warns(UserWarning, match=r"compile options \['fastmath'\] apply to whole kernels"):

        @od.jit(device=True, fastmath=True)
        def helper(x):
            return x + 1

    assert helper(1) == 2


def test_default_compile_options_on_a_device_function_do_not_warn():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @od.jit(device=True, opt=True, debug=False)
        def helper(x):
            return x + 1
