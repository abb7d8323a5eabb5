"""od.jit: numba-cuda's decorator forms and launch syntax, every launch an overdub launch."""

import pickle
import sys

import numba
import numpy as np
import pytest
from numba import cuda

import overdub as od
from helpers import compiles, method_f, writes_seven


def test_a_kernel_launches_with_numba_cudas_grid_syntax_and_sees_redefinitions(make_module):
    m = make_module("""
        import overdub as od
        from numba import cuda

        @od.function
        def f(x: od.Integer):
            return x + 1

        @od.jit(target="cpu")
        def kernel(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = f(i)
    """)
    out = np.zeros(10, dtype=np.int64)
    m.kernel[3, 4](out)
    assert out.tolist() == list(range(1, 11))
    m.run(method_f("2 * x"))
    m.kernel[np.int64(3), 4, 0, 0](out)
    assert out.tolist() == [2 * i for i in range(10)]


def test_a_configured_kernel_launches_through_the_native_lookup_and_its_definition_serves_the_rest():
    """``kernel[b, t]`` is the extension's front where it is built: a launch the table holds runs without a
    Python frame of the configuration; a first launch and a keyword go to the Python definition it fronts."""
    fastlaunch = pytest.importorskip("overdub._fastlaunch")

    @od.jit(target="cpu")
    def fill(out, value):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = value

    configured = fill[2, 4]
    assert type(configured) is fastlaunch.Configured and fill[2, 4] is configured
    out = np.zeros(8)
    configured(out, 1.0)  # compiles, through the definition
    frames: list[str] = []
    sys.setprofile(lambda frame, event, arg: frames.append(frame.f_code.co_qualname) if event == "call" else None)
    try:
        configured(out, 2.0)
    finally:
        sys.setprofile(None)
    assert out.tolist() == [2.0] * 8
    assert not any(name.startswith("_Configured") for name in frames), frames
    with pytest.raises(TypeError, match="keyword"):
        configured(out, value=3.0)
    assert repr(configured) == repr(configured.configured)
    cloudpickle = pytest.importorskip("cloudpickle")  # as Dask ships it: another process launches it
    again = cloudpickle.loads(cloudpickle.dumps(configured))
    assert type(again) is fastlaunch.Configured
    again(out, 4.0)
    assert out.tolist() == [4.0] * 8
    with pytest.raises(AttributeError, match="blocks"):  # the front reads a LaunchConfig's fields by name
        fastlaunch.Configured(configured.configured, fill, object(), None, None)


def test_forall_covers_every_task():
    fill = od.jit(writes_seven, target="cpu")
    out = np.zeros(1000, dtype=np.int64)
    fill.forall(out.size)(out)
    assert (out == 7).all()


def test_calling_a_kernel_without_a_grid_says_how_to_launch_it():
    @od.jit
    def kernel(out):
        out[0] = 1

    with pytest.raises(ValueError, match=r"launch configuration was not specified.*kernel\[blocks, threads\]"):
        kernel(np.zeros(1))  # numba-cuda's error class and message, then how


def test_a_signature_compiles_eagerly_and_inspect_asm_gives_ptx():
    before = compiles()

    @od.jit("void(float64[::1], float64)", target="cpu")
    def axpy(out, a):
        out[0] = a * 2.0

    assert compiles() == before + 1
    ptx = axpy.inspect_asm("void(float64[::1], float64)")
    assert ".visible .entry" in ptx


def test_device_functions_are_generic_functions_with_a_method_per_signature():
    @od.jit("int64(int64)", device=True)
    def g(x):
        return x + 1

    @od.jit("float64(float64)", device=True)
    def g(x):  # noqa: F811  (a second method)
        return x * 0.5

    assert isinstance(g, od.GenericFunction) and len(od.methods(g)) == 2

    @od.jit(target="cpu")
    def kernel(out):
        out[0] = g(3) + g(3.0)

    out = np.zeros(1)
    kernel[1, 1](out)
    assert out[0] == 5.5


def test_a_kernel_launches_in_a_context():
    def helper(x):
        return x

    ctx = od.Context("jit ctx")

    @ctx.overdub(helper)
    def _(x):
        return 42

    @od.jit(target="cpu")
    def kernel(out):
        out[0] = helper(0)

    out = np.zeros(1, dtype=np.int64)
    kernel[1, 1](out)
    assert out[0] == 0
    kernel.in_context(ctx)[1, 1](out)
    assert out[0] == 42


def test_unknown_options_are_refused():
    with pytest.raises(TypeError, match="unexpected options"):
        od.jit(speed="max")
    assert numba  # numba's own options are accepted:
    od.jit(fastmath=True, lineinfo=True, opt=True)


def test_od_cuda_launches_an_od_jit_kernel():
    @od.jit
    def kernel(out):
        out[0] = 5

    out = np.zeros(1, dtype=np.int64)
    od.cuda(kernel, out, target="cpu")
    assert out[0] == 5


def test_specialize_and_overloads_as_numba_cuda_has_them():
    @od.jit(target="cpu")
    def kernel(out):
        out[0] = 1

    out = np.zeros(1, dtype=np.int64)
    kernel.specialize(out)[1, 1](out)
    assert out[0] == 1 and list(kernel.overloads) == [(numba.typeof(out),)]


def test_an_explicit_signature_converts_scalar_arguments_as_numba_cuda_does():
    @od.jit("void(int32[:], int32)", target="cpu")
    def store_int(out, x):
        out[0] = x

    @od.jit("void(float32[:], float32)", target="cpu")
    def store(out, x):
        out[0] = x

    out = np.zeros(1, dtype=np.float32)
    store[1, 1](out, 0.1)
    assert out[0] == np.float32(0.1)
    wide = np.zeros(1, dtype=np.int32)
    store_int[1, 1](wide, 2**31 + 5)  # wraps to int32, as the signature says
    assert wide[0] == np.int32(np.int64(2**31 + 5).astype(np.int32))


@pytest.mark.parametrize(
    "signatures, value, stored",
    [
        # an exact match beats a conversion, wherever it is listed (a float32 would store 16777216.0)
        (["void(float64[:], float32)", "void(float64[:], int64)"], 16777217, 16777217.0),
        (["void(float64[:], int32)", "void(float64[:], float64)"], 2.5, 2.5),  # not truncated to 2
        # of two conversions, the safe one (int64 to float64) beats the unsafe one (int64 to int32)
        (["void(float64[:], int32)", "void(float64[:], float64)"], 3, 3.0),
    ],
)
def test_several_signatures_choose_as_numba_chooses_exact_first_then_the_safest(signatures, value, stored):
    @od.jit(signatures, target="cpu")
    def store(out, x):
        out[0] = x

    out = np.zeros(1)
    store[1, 1](out, value)
    assert out[0] == stored


def test_the_signature_chosen_for_a_launch_is_kept_by_what_the_values_classes_dtypes_and_ranks_say():
    """A launch in a loop does not choose again: the plan is keyed by each value's class, dtype and rank (an
    int's whether it fits an int64) -- in C where the extension is built, the same keys as the Python loop's --
    and a value without a dtype (a tuple) chooses at each launch."""
    from overdub import dropin

    class NoRank:
        dtype = np.dtype("f8")

    values = (1, 2**63, -(2**63), -(2**63) - 1, True, 1.5, 2j, np.float64(1), np.int32(3), np.zeros(3),
              np.zeros((2, 2), np.int8), np.zeros(3).view(np.recarray))  # fmt: skip
    key = dropin._plan_key(values)
    assert key == dropin._plan_key_python(values)
    assert key[:7] == (True, False, True, False, bool, float, complex)
    assert key[9] == (np.ndarray, np.dtype("f8"), 1) and key[11][0] is np.recarray
    assert dropin._plan_key((np.zeros(2), NoRank())) is dropin._plan_key_python((np.zeros(2), (1, 2))) is None

    @od.jit(["void(float64[:], float64)", "void(float64[:], int64)"], target="cpu")
    def store(out, x):
        out[0] = x

    out = np.zeros(1)
    for value in (3, 2.5, 3):
        store[1, 1](out, value)  # each exact: an int64, a float64
        assert out[0] == value
    assert len(store._plans) == 2


def test_signatures_that_fit_equally_or_not_at_all_are_numba_cudas_type_errors():
    @od.jit(["void(float64[:], float32)", "void(float64[:], int16)"], target="cpu")
    def store(out, x):
        out[0] = x

    with pytest.raises(TypeError, match="Ambiguous overloading") as raised:
        store[1, 1](np.zeros(1), 2**40)  # int64 to float32 and to int16: both unsafe
    assert str(raised.value).startswith("Ambiguous overloading for <function ")  # numba's words, which tests match
    assert str(raised.value).endswith(
        "(Array(float64, 1, 'C', False, aligned=True), int64):\n"
        "(Array(float64, 1, 'A', False, aligned=True), float32) -> none\n"
        "(Array(float64, 1, 'A', False, aligned=True), int16) -> none"
    )
    with pytest.raises(TypeError, match="No matching definition for argument type"):
        store[1, 1](np.zeros(1, dtype=np.int32), 1.0)  # no signature takes an int32 array


def test_a_numpy_scalar_fits_a_scalar_of_a_signature_and_any_layout_fits_an_a_layout_array():
    """``np.uint32(3)`` has an ``__array_interface__`` but is no array; ``uint32[:, :]`` and ``float64[:]`` are
    numba's any-layout arrays, which a C-contiguous array fits -- a kernel's signature and a device function's
    method alike."""

    @od.jit("void(uint32[:, :], uint32)", target="cpu")
    def store(out, x):
        out[0, 1] = x

    @od.jit("float64(float64[:], int64)", device=True)
    def second(a, i):
        return a[i]

    @od.jit(target="cpu")
    def read(out, a):
        out[0] = second(a, 1)

    grid = np.zeros((2, 2), dtype=np.uint32)
    store[1, 1](grid, np.uint32(3))
    out = np.zeros(1)
    read[1, 1](out, np.arange(3.0))
    assert grid[0, 1] == 3 and out[0] == 1.0
    assert od.issubtype(numba.types.float64[::1], numba.types.float64[:])
    assert not od.issubtype(numba.types.float64[:], numba.types.float64[::1])
    assert not od.issubtype(numba.types.Array(numba.float64, 1, "C", readonly=True), numba.types.float64[:])


def test_a_device_functions_signatures_are_one_generic_functions_methods_that_convert_as_numba_converts():
    """``od.jit([...], device=True)``: a method per signature of one generic function; a call no signature takes
    converts its arguments to the best-rated one, as numba-cuda's device functions do (exact, then the fewest
    unsafe, safe, promoting conversions; the first of equals)."""

    def add(x, y):
        return x + y

    add_device = od.jit(["(int64, int64)", "(float64, float64)"], device=True)(add)

    @od.jit(target="cpu")
    def kernel(r, x, y):
        r[0] = add_device(x, y)

    assert [m.sig for m in od.methods(add_device)] == [(numba.int64,) * 2, (numba.float64,) * 2]
    ints, floats = np.zeros(1, dtype=np.int64), np.zeros(1)
    kernel[1, 1](ints, 1, 2)
    kernel[1, 1](floats, 1, 2**-25)  # (int64, float64): to (float64, float64), not (int64, int64)
    assert ints[0] == 3 and floats[0] == 1.0000000298023224
    narrow = od.jit(["(int64, int64)"], device=True)(add)

    @od.jit(target="cpu")
    def unsafe(r, x, y):
        r[0] = narrow(x, y)

    unsafe[1, 1](ints, 1.5, 2.5)  # an unsafe conversion, as numba-cuda casts it
    assert ints[0] == 3


def test_a_call_no_signature_takes_is_numba_cudas_typing_error_and_a_method_error_in_every_process():
    """numba-cuda raises its TypingError for complex arguments to a device function whose signatures take
    ints and floats; the kernel's compile ends with a MethodError (the candidates, the call's line) that is
    also numba's TypingError, pickles as both, and leaves the kernel launchable with other arguments."""
    from numba.core.errors import TypingError

    add_device = od.jit(["(int64, int64)", "(float64, float64)"], device=True)(lambda x, y: x + y)

    @od.jit(target="cpu")
    def kernel(r, x, y):
        r[0] = add_device(x, y)

    with pytest.raises(TypingError) as caught:
        kernel[1, 1](np.zeros(1, dtype=np.complex128), 1j, 1j)
    error = caught.value
    assert isinstance(error, od.MethodError) and error.argtypes == (numba.complex128,) * 2
    assert "test_jit.py" in error.call_site and len(error.candidates) == 2
    arrived = pickle.loads(pickle.dumps(error))
    assert isinstance(arrived, TypingError) and isinstance(arrived, od.MethodError) and str(arrived) == str(error)
    floats = np.zeros(1)
    kernel[1, 1](floats, 1.5, 2.5)
    assert floats[0] == 4.0


def test_a_better_converting_signature_defined_later_recompiles_the_calls_that_converted():
    @od.jit("(float32,)", device=True)
    def shifted(x):
        return x + 0.5

    @od.jit(target="cpu")
    def kernel(out, v):
        out[0] = shifted(v[0])

    out, v = np.zeros(1), np.full(1, 2**24 + 1, dtype=np.int32)
    kernel[1, 1](out, v)  # int32 to float32 (unsafe, the only one): 2**24 + 1 rounds to 2**24
    assert out[0] == 2**24 + 0.5

    @od.jit("(float64,)", device=True)
    def shifted(x):  # noqa: F811  (a second method: int32 to float64 is safe, so it is chosen now)
        return x + 0.5

    kernel[1, 1](out, v)
    assert out[0] == 2**24 + 1.5


@pytest.mark.parametrize("signature", [None, "void(intp[:])"])
def test_a_kernel_made_in_a_function_and_its_configured_launch_pickle_by_value_as_numba_cudas(signature):
    """numba-cuda pickles its kernels by value: a kernel of a def plain pickle cannot name (made in a function)
    pickles, and ``kernel[5, 8]`` pickles with its ``griddim`` and ``blockdim`` (both failed: "Can't pickle
    local object")."""

    @od.jit(device=True)
    def inner(a):
        return a + 1

    def body(arr):
        if cuda.grid(1) == 0:
            arr[0] = inner(arr[0])

    kernel = od.jit(target="cpu")(body) if signature is None else od.jit(signature, target="cpu")(body)
    arr = np.array([100])
    again = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(kernel))))
    again[1, 1](arr)
    configured = pickle.loads(pickle.dumps(again[5, 8]))
    assert (configured.griddim, configured.blockdim, configured.stream, configured.sharedmem) == (
        (5, 1, 1),
        (8, 1, 1),
        0,
        0,
    )
    configured(arr)
    assert arr[0] == 102


def test_a_device_function_without_a_signature_takes_any_arguments_whatever_its_annotations_say():
    """numba-cuda ignores a device function's annotations; libraries annotate with their own types (sgkit's
    ``Union[np.ndarray, da.Array]``, warprnnt-numba's ``torch.Tensor``) or Python's (``a: float`` given an int).
    Each failed at decoration ("not an overdub type") or at the call (MethodError); ``@od.function`` is what
    reads annotations."""

    class Tensor:  # a library's own array class, as an annotation only
        pass

    @od.jit(device=True)
    def first_sum(x: np.ndarray, y: np.ndarray | list, unused: Tensor) -> float:
        return x[0] + y[0]

    @od.jit(device=True)
    def twice(a: float):
        return a * 2

    @od.jit(target="cpu")
    def kernel(out, n, a):
        out[0] = twice(n) + first_sum(a, a, a)

    out = np.zeros(1)
    kernel[1, 1](out, 3, np.ones(2))
    assert out[0] == 8.0 and [m.sig for m in od.methods(twice)] == [(od.Any,)]


def test_a_tuple_of_types_is_one_signature():
    @od.jit((numba.types.float64[::1], numba.types.float64), target="cpu")
    def store(out, x):
        out[0] = x

    assert len(store.signatures) == 1
    out = np.zeros(1)
    store[1, 1](out, 2)
    assert out[0] == 2.0


def test_a_callee_given_a_constant_it_needs_at_compile_time_compiles_with_its_value():
    @cuda.jit(device=True)
    def fill(out, n):
        tmp = cuda.local.array(n, numba.int64)
        for i in range(n):
            tmp[i] = i
        out[0] = tmp[n - 1]

    @od.jit(target="cpu")
    def kernel(out):
        fill(out, 5)

    out = np.zeros(1, dtype=np.int64)
    kernel[1, 1](out)
    assert out[0] == 4


def test_overloads_carry_the_typed_ir_as_numba_cudas_do():
    from numba import types as numba_types

    @od.jit("void(float64[::1])", target="cuda")
    def fill(out):
        local = cuda.local.array(2, numba_types.int32)
        local[0] = 3
        out[0] = local[0]

    (overload,) = fill.overloads.values()
    assert overload.argument_types == (numba_types.float64[::1],)
    assert overload._type_annotation.typemap["local"].dtype == numba_types.int32


def test_numba_cudas_warnings_with_its_classes_where_its_configuration_has_them(monkeypatch):
    """Programs filter numba-cuda's warnings by class: a grid of fewer than 128 blocks on the GPU, debug with
    opt, debug with lineinfo. (A host array copied for a launch warns too: tests/test_gpu.py.)"""
    import warnings

    from numba.cuda.core import config
    from numba.cuda.core.errors import NumbaInvalidConfigWarning, NumbaPerformanceWarning

    def body():
        pass

    kernel = od.jit(target="cuda")(body)
    with pytest.warns(NumbaPerformanceWarning, match=r"Grid size 4 will likely result in GPU under-utilization"):
        kernel[(2, 2), 32]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel[128, 32]  # enough blocks
        od.jit(target="cpu")(body)[1, 1]  # the CPU target has no occupancy to speak of
        monkeypatch.setattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS", 0)
        kernel[3, 32]
        od.jit(debug=True, opt=False)(body)
    with pytest.warns(NumbaInvalidConfigWarning, match="debug=True with opt=True is not supported"):
        od.jit(debug=True)(body)
    with pytest.warns(NumbaInvalidConfigWarning, match="debug and lineinfo are mutually exclusive"):
        od.jit(debug=True, lineinfo=True, opt=False)(body)
    monkeypatch.setattr(config, "CUDA_DEBUGINFO_DEFAULT", 1)  # numba-cuda's defaults, read as it reads them
    with pytest.warns(NumbaInvalidConfigWarning, match="debug=True with opt=True is not supported"):
        od.jit()
    monkeypatch.setattr(config, "OPT", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        od.jit(debug=True)


def test_resource_queries_name_the_target_that_has_none():
    @od.jit("void(float32[::1])", target="cpu")
    def kernel(x):
        x[0] = 1.0

    with pytest.raises(NotImplementedError, match="regs_per_thread is what a kernel's code uses of a GPU"):
        kernel.get_regs_per_thread()


def test_a_device_function_launched_as_a_kernel_is_numba_cudas_runtime_error_and_opt_may_be_an_int():
    @od.jit(device=True)
    def helper():
        pass

    with pytest.raises(RuntimeError, match=r"Cannot compile a device function as a kernel: .*helper"):
        helper[1, 1]()
    assert od.jit(opt=0)(lambda out: None).options.opt is False  # numba-cuda's opt=0


def test_a_launch_in_a_loop_chooses_its_signature_once_per_argument_classes(monkeypatch):
    """numba-cuda's signature choice for explicit signatures is made once for the classes, dtypes and ranks of
    a launch's values (it cost stumpy's gpu_stump 2x numba-cuda's time, chosen again at each of its launches);
    a value of another class, or an int past int64, chooses again."""
    from overdub import dropin

    chosen = []
    original = dropin.chosen_signature
    monkeypatch.setattr(dropin, "chosen_signature", lambda *a: chosen.append(a[0]) or original(*a))

    @od.jit(["void(float64[:], float64)", "void(float64[:], int64)"], target="cpu")
    def store(out, x):
        out[0] = x

    out = np.zeros(1)
    for value in (1, 2, 3):
        store[1, 1](out, value)
    assert out[0] == 3.0 and len(chosen) == 1
    store[1, 1](out, 2.5)
    assert out[0] == 2.5 and len(chosen) == 2  # a float: the float64 signature
    store[1, 1](out, 2**62 + 1)
    assert out[0] == float(2**62 + 1) and len(chosen) == 2  # an int in int64's range: the same choice
    store[1, 1](out, np.int32(7))
    store[1, 1](out, np.int32(9))
    assert out[0] == 9.0 and len(chosen) == 3  # int32: promoted to int64 (better than float64), once
    with pytest.raises(TypeError, match="No matching definition"):
        store[1, 1](np.zeros((1, 1)), 1.0)  # a 2-d array: none fits, every time
    with pytest.raises(TypeError, match="No matching definition"):
        store[1, 1](np.zeros((1, 1)), 1.0)


def test_each_od_jit_of_a_def_lists_the_overloads_made_since_it_as_a_new_numba_dispatcher_does():
    """numba-cuda's test_minmax jits one def in each test and inspects "the" overload: overdub listed every
    kernel of the def, an earlier test's first (a float32 kernel where the test looked for max.f64)."""

    def biggest(out, a, b):
        out[0] = max(a[0], b[0])

    first = od.jit(target="cpu")(biggest)
    out, f4 = np.zeros(1), np.ones(1, np.float32)
    first[1, 1](out, f4, f4)
    second = od.jit(target="cpu")(biggest)
    second[1, 1](out, np.ones(1), np.ones(1))
    assert numba.float32 in [t[1].dtype for t in first.signatures]
    assert [t[1].dtype for t in second.signatures] == [numba.float64]
    assert list(second.inspect_asm()) == second.signatures and "max.f64" in second.inspect_asm()[second.signatures[0]]


def test_a_kernel_lists_the_overload_its_launch_ran_where_another_od_jit_of_the_def_made_it():
    """numba-cuda's test_optimization jits one def eagerly, then lazily, launches the lazy one and inspects its
    one overload: the kernel its launch ran, found made by the eager one (it listed none)."""

    def set_one(x):
        x[0] = 1

    od.jit("void(float64[::1])", target="cpu")(set_one)
    lazy = od.jit(target="cpu")(set_one)
    lazy[1, 1](np.zeros(1))
    assert list(lazy.overloads) == [(numba.float64[::1],)] and len(lazy.inspect_asm()) == 1
    assert list(od.jit(target="cpu")(set_one).overloads) == []  # never launched: none


def test_a_one_signature_kernel_takes_an_integer_array_of_the_other_sign_as_numba_cuda_does():
    """numba-cuda launches a kernel compiled for one signature with an array's memory as it is: numba-cuda's
    test_atomics passes uint32 arrays to void(int32[:, :]), test_warp_ops int32 ones to uint32 signatures."""

    @od.jit("void(int32[:])", target="cpu")
    def decrement(a):
        a[0] -= 1

    a = np.array([0, 5], dtype=np.uint32)
    decrement[1, 1](a)
    assert a.tolist() == [2**32 - 1, 5]  # the bits of int32 -1, in the array given
    with pytest.raises(TypeError, match="No matching definition"):
        decrement[1, 1](np.zeros(2, np.uint64))  # another width: no
    with pytest.raises(TypeError, match="No matching definition"):
        decrement[1, 1](np.zeros(2, np.float32))  # not an integer: no

    @od.jit(["void(int32[:])", "void(float64[:])"], target="cpu")
    def either(a):
        a[0] -= 1

    with pytest.raises(TypeError, match="No matching definition"):  # several signatures: numba's own matching
        either[1, 1](np.zeros(2, np.uint32))


def test_a_kernel_jitted_again_is_a_kernel_of_its_def():
    @od.jit(target="cpu")
    def fill(res):
        res[0] = 666

    again = od.jit(target="cpu")(fill)
    assert again.py_func is fill.py_func
    out = np.zeros(1)
    again.py_func(out)
    again[1, 1](out)
    assert out[0] == 666


def test_specialize_makes_one_kernel_per_types_and_a_specialized_kernel_refuses_another():
    @od.jit(target="cpu")
    def f(x):
        x[0] = 1

    assert f.specializations == {}
    f32 = f.specialize(numba.float32[::1])
    assert f.specialize(numba.float32[::1]) is f32 and len(f.specializations) == 1
    assert f.specialize(np.zeros(1, np.int32)) is not f32 and len(f.specializations) == 2
    x = np.zeros(1, np.float32)
    f32[1, 1](x)
    assert x[0] == 1
    for specialized in (f32, od.jit("void(float32[::1])", target="cpu")(f.py_func)):
        with pytest.raises(RuntimeError, match="Dispatcher already specialized"):
            specialized.specialize(numba.float32[::1])
    od.jit(["void(float32[::1])"], target="cpu")(f.py_func).specialize(numba.int32[::1])  # a list: not specialized


def test_a_device_functions_code_inspected_as_numba_cudas_device_dispatcher_shows_it(make_module):
    m = make_module("""
        import overdub as od

        @od.jit(device=True)
        def foo(x, y):
            return x + y
    """)
    args = (numba.int32, numba.int32)
    name = m.foo.compile_device(args).fndesc.mangled_name
    assert "foo" in name and name in m.foo.inspect_llvm(args) and name in m.foo.inspect_asm(args)
    assert m.foo.compile_device(args).fndesc.mangled_name == name  # compiled once while nothing changes
    with pytest.raises(RuntimeError, match="Cannot inspect SASS of a device function"):
        m.foo.inspect_sass(args)
    m.run("@od.jit(device=True)\ndef foo(x, y):\n    return x * y\n")  # redefined: its code is the new one
    assert "mul.lo.s64" in m.foo.inspect_asm(args) or "mul.wide.s32" in m.foo.inspect_asm(args)


def test_numbas_dumps_print_for_each_od_jit_of_a_def_as_for_each_numba_cuda_dispatcher(monkeypatch, capfd):
    """With numba's dumps asked for (NUMBA_DUMP_IR=1, or numba-cuda's override_config of it), an od.jit kernel
    compiles its own code -- not the kernel an earlier od.jit of its def made, nor the disk cache's -- as each
    numba-cuda dispatcher does, so the dump prints; its next launch compiles nothing; without the dumps an
    od.jit of the same def again compiles nothing."""
    from numba.core import config

    def shifted(a, out):
        i = cuda.grid(1)
        if i < a.size:
            out[i] = a[i] + 1.5

    a, out = np.arange(8.0), np.zeros(8)
    od.jit(target="cpu")(shifted)[1, 8](a, out)
    before = compiles()
    od.jit(target="cpu")(shifted)[1, 8](a, out)
    assert compiles() == before
    capfd.readouterr()
    monkeypatch.setattr(config, "DUMP_IR", 1)
    for eager in (False, True):
        kernel = od.jit("void(float64[::1], float64[::1])", target="cpu")(shifted) if eager else od.jit(shifted)
        for _ in range(2):
            kernel[1, 8](a, out)
        dumped = capfd.readouterr().out  # (on the CPU target, of the grid loop the kernel is inlined in)
        assert "IR DUMP: " in dumped and "const(float, 1.5)" in dumped and (out == a + 1.5).all()
        assert compiles() == before + 1 + eager


# --- the launch configuration while a launch compiles (overdub.cuda.launchconfig, numba-cuda's) ---------------


def test_a_launch_that_compiles_shows_its_configuration_to_compile_for_args_as_numba_cuda_does():
    from overdub.cuda import launchconfig

    @od.jit(target="cpu")
    def f(x):
        x[0] = 1

    seen = {}
    original = f._compile_for_args

    def wrapped(*args, **kws):
        seen["config"] = launchconfig.current_launch_config()
        return original(*args, **kws)

    f._compile_for_args = wrapped
    arr = np.zeros(1, dtype=np.int32)
    assert launchconfig.current_launch_config() is None
    f[2, 3](arr)
    config = seen["config"]
    assert config.dispatcher is f and config.griddim == (2, 1, 1) and config.blockdim == (3, 1, 1)
    assert config.args[0] is arr and arr[0] == 1
    assert launchconfig.current_launch_config() is None
    with pytest.raises(RuntimeError, match="No launch config set for this thread"):
        launchconfig.ensure_current_launch_config()
    del f._compile_for_args
    with launchconfig.capture_compile_config(f) as capture:
        f[1, 1](np.zeros(2))  # another job: it compiles
    assert capture["config"].blockdim == (1, 1, 1) and "_compile_for_args" not in f.__dict__
    assert f._compile_for_args.__func__ is original.__func__ and f._compile_for_args.__self__ is f


def test_code_that_depends_on_its_launch_configuration_compiles_again_for_each_and_is_the_kernels_own():
    """A rewrite pass reading the launch's configuration (as cuda.coop's do) marks the kernel sensitive: each
    configuration it is launched with compiles its own code, which no other launch runs (od.cuda of the def
    compiles its own) and the disk cache does not keep."""
    from numba.core.rewrites import Rewrite, register_rewrite

    from overdub.cuda import launchconfig

    log = []

    @od.jit(target="cpu")
    def sensitive(x):
        if cuda.grid(1) == 0:
            x[0] = x[0] + 1

    @register_rewrite("after-inference")
    class ReadsTheBlock(Rewrite):
        def __init__(self, state):
            super().__init__(state)
            self.logged, self.block = False, None

        def match(self, func_ir, block, typemap, calltypes):
            config = launchconfig.current_launch_config()
            if self.logged or config is None or config.dispatcher is not sensitive:
                return False
            self.block = block
            return True

        def apply(self):
            config = launchconfig.ensure_current_launch_config()
            log.append(config.blockdim)
            config.dispatcher.mark_launch_config_sensitive()
            self.logged = True
            return self.block

    x = np.zeros(1, dtype=np.int64)
    sensitive[1, 32](x)
    compiled = compiles()
    sensitive[1, 32](x)  # the code its first launch compiled serves the same configuration
    assert compiles() == compiled
    sensitive[1, 64](x)
    assert [dims[0] for dims in dict.fromkeys(log)] == [32, 64]  # (on the CPU target, each function compiled)
    compiled, logged = compiles(), len(log)
    sensitive[1, 64](x)
    assert compiles() == compiled and len(log) == logged and x[0] == 4  # its code for 64 threads, kept
    overloads = list(sensitive.overloads.values())
    assert overloads and all(overload.launch_config_sensitive for overload in overloads)
    od.cuda(sensitive.py_func, x, blocks=1, threads=16, target="cpu")  # the def's own kernel, not the od.jit's
    assert compiles() == compiled + 1 and len(log) == logged and x[0] == 5


BLOCK_MARK = 0  # what the rewrite below replaces with the block size a launch compiles for


def test_threads_launching_one_sensitive_kernel_with_different_configurations_each_run_code_for_their_own():
    """Four threads launch one launch-configuration-sensitive kernel at once, each with its own block size, which
    a rewrite bakes into the code: the configuration is each thread's own while its launch compiles, so every
    launch writes its own block size, and each configuration compiles once."""
    import threading

    from numba.core import ir
    from numba.core.rewrites import Rewrite, register_rewrite

    from overdub.cuda import launchconfig

    @od.jit(target="cpu")
    def baked(x):
        if cuda.grid(1) == 0:
            x[0] = BLOCK_MARK

    @register_rewrite("before-inference")
    class BakeTheBlock(Rewrite):
        def match(self, func_ir, block, typemap, calltypes):
            config = launchconfig.current_launch_config()
            if config is None or config.dispatcher is not baked:
                return False
            self.block, self.size = block, config.blockdim[0]
            self.marks = [
                stmt
                for stmt in block.body
                if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Global) and stmt.value.name == "BLOCK_MARK"
            ]
            return bool(self.marks)

        def apply(self):
            launchconfig.ensure_current_launch_config().dispatcher.mark_launch_config_sensitive()
            for stmt in self.marks:
                stmt.value = ir.Const(self.size, stmt.value.loc)
            return self.block

    wrong: list = []
    start = threading.Barrier(4)

    def launches(size: int) -> None:
        start.wait()
        for _ in range(10):
            x = np.zeros(1, dtype=np.int64)
            baked[1, size](x)
            if x[0] != size:
                wrong.append((size, int(x[0])))

    before = compiles()
    threads = [threading.Thread(target=launches, args=(size,)) for size in (32, 64, 96, 128)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == [] and compiles() - before == 4


def test_a_kernel_marked_sensitive_before_its_compile_lists_that_compile_as_its_configurations_overload():
    """numba-cuda's test_dispatcher_mark_launch_config_sensitive: a wrapped ``_compile_for_args`` marks the kernel
    before calling the original, so the compile after the marking is its code for this configuration -- listed
    in ``overloads`` and said to be configuration sensitive."""
    from overdub.cuda import launchconfig

    @od.jit(target="cpu")
    def f(x):
        x[0] = 1

    original = f._compile_for_args

    def wrapped(*args, **kws):
        launchconfig.ensure_current_launch_config().dispatcher.mark_launch_config_sensitive()
        return original(*args, **kws)

    f._compile_for_args = wrapped
    arr = np.zeros(1, dtype=np.int32)
    f[1, 1](arr)
    assert arr[0] == 1
    overloads = list(f.overloads.values())
    assert len(overloads) == 1 and overloads[0].launch_config_sensitive


def test_a_configured_launch_shows_no_arguments_and_each_threads_compile_sees_its_own():
    """numba-cuda's test_launch_config_args_are_thread_local: ``kernel[1, 1]`` made before ``_compile_for_args``
    is wrapped, launched from two threads at once; each compile sees its own thread's argument, and the
    configured launch's ``args`` is None."""
    import threading

    from overdub.cuda import launchconfig

    @od.jit(target="cpu")
    def f(x):
        x[0] = 1

    configured = f[1, 1]
    barrier, seen, errors = threading.Barrier(2), [], []
    original = f._compile_for_args

    def wrapped(*args, **kws):
        config = launchconfig.ensure_current_launch_config()
        barrier.wait(timeout=5)
        seen.append(id(config.args[0]))
        return original(*args, **kws)

    f._compile_for_args = wrapped
    arrays = [np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32)]

    def launch(arr):
        try:
            configured(arr)
        except BaseException as error:  # the test reports it
            errors.append(error)

    threads = [threading.Thread(target=launch, args=(arr,)) for arr in arrays]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert errors == [] and set(seen) == {id(arr) for arr in arrays} and configured.args is None
    assert all(arr[0] == 1 for arr in arrays)
