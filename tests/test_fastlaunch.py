"""The native launch path (overdub/_fastlaunch.c), driven with a stand-in for cuLaunchKernel: it checks
validity and guards, marshals every parameter into its slot, and enqueues with the right grid."""

import ctypes
import dataclasses
import struct
import sys
import types as pytypes

import numpy as np
import pytest

fastlaunch = pytest.importorskip("overdub._fastlaunch")

from overdub.targets.cuda.abi import ArraySpec, PointerSpec, ScalarSpec  # noqa: E402  (after the skip)

LAUNCH = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    *([ctypes.c_uint] * 7),
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
)


CTX_GET_CURRENT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
KERNEL_GET_FUNCTION = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
STREAM_GET_CTX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
CTX_PUSH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
CTX_POP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
CTX_GET_ID = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulonglong))


class FakeDriver:
    """Records each launch: function, grid, block, shared memory, stream and the raw 8-byte slots. Its current
    context is ``context`` (0: none; pushed and popped as the driver's stack); a kernel's function in context c
    is kernel + c (``loads`` counts them), except in the contexts of ``foreign`` (a device of another
    architecture: no binary). A stream of ``stream_contexts`` launched in another context is refused with
    CUDA_ERROR_INVALID_HANDLE, as the driver refuses it. A context's ID is 1 unless ``ids`` says otherwise."""

    def __init__(self, nslots, result=0):
        self.calls, self.nslots, self.result = [], nslots, result
        self.context, self.loads, self.pushed = 0x10, [], []
        self.foreign, self.stream_contexts, self.ids = set(), {}, {}
        self.callbacks = (
            LAUNCH(self._launch),
            CTX_GET_CURRENT(self._ctx_get_current),
            KERNEL_GET_FUNCTION(self._kernel_get_function),
            STREAM_GET_CTX(self._stream_get_ctx),
            CTX_PUSH(self._push),
            CTX_POP(self._pop),
            CTX_GET_ID(self._ctx_get_id),
        )
        self.address = tuple(ctypes.cast(c, ctypes.c_void_p).value for c in self.callbacks)

    def _ctx_get_current(self, out):
        out[0] = self.context or None
        return 0

    def _ctx_get_id(self, context, out):
        out[0] = self.ids.get(context, 1)
        return 0

    def _kernel_get_function(self, out, kernel):
        self.loads.append(self.context)
        if self.context in self.foreign:
            return 209  # CUDA_ERROR_NO_BINARY_FOR_GPU
        out[0] = kernel + self.context
        return 0

    def _stream_get_ctx(self, stream, out):
        out[0] = self.stream_contexts.get(stream, self.context)
        return 0

    def _push(self, context):
        self.pushed.append(self.context)
        self.context = context
        return 0

    def _pop(self, out):
        out[0] = self.context
        self.context = self.pushed.pop()
        return 0

    def _launch(self, function, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        if self.stream_contexts.get(stream, self.context) != self.context:
            return 400
        slots = [ctypes.string_at(params[i], 8) for i in range(self.nslots)]
        self.calls.append((function, (gx, gy, gz), (bx, by, bz), shmem, stream, slots))
        return self.result


class Node:
    valid = True
    revalidated = 0

    def usable(self):  # the kernel's slow check: here, the globals it read did not change
        self.revalidated += 1
        return self.valid


class DeviceArray:
    """Shaped like a cupy array: the attributes the native path reads."""

    def __init__(self, dtype, shape, ptr, c=True, f=False):
        self.dtype, self.shape, self.ndim = np.dtype(dtype), shape, len(shape)
        self.size = int(np.prod(shape))
        self.strides = tuple(int(s) for s in np.empty(shape, dtype).strides)
        self.data = pytypes.SimpleNamespace(ptr=ptr)
        self._c_contiguous, self._f_contiguous = c, f


def make(specs, nslots, checks=(), node=None, result=0):
    driver = FakeDriver(nslots, result)
    launcher = fastlaunch.Launcher(node or Node(), list(checks), specs, 0xF00, driver.address, lambda s: s.handle)
    return launcher, driver


def q(value):
    return int(value).to_bytes(8, "little", signed=True)


def test_scalars_pointers_and_arrays_are_marshalled_into_numbas_parameter_slots():
    pointer = pytypes.SimpleNamespace(address=0xABC, dtype=np.dtype(np.int64), device=True)
    array = DeviceArray(np.float32, (3, 4), 0x1000)
    specs = [
        ScalarSpec("f"),
        PointerSpec(np.dtype(np.int64), True),
        ArraySpec(np.dtype(np.float32), 2, 4, "C", False),
        ScalarSpec("i"),
    ]
    launcher, driver = make(specs, 1 + 1 + 9 + 1)
    assert launcher((np.float32(1.5), pointer, array, -7), 2, (16, 4), 128, None) is True
    function, grid, block, shmem, stream, slots = driver.calls[0]
    assert (function, grid, block, shmem, stream) == (0xF00 + 0x10, (2, 1, 1), (16, 4, 1), 128, None)
    assert slots[0][:4] == np.float32(1.5).tobytes()
    assert slots[1] == q(0xABC)
    assert slots[2:11] == [q(0), q(0), q(12), q(4), q(0x1000), q(3), q(4), q(16), q(4)]
    assert slots[11][:4] == np.int32(-7).tobytes()


def test_a_failed_guard_returns_false_without_launching():
    specs = [ArraySpec(np.dtype(np.float32), 1, 4, "C", False)]
    launcher, driver = make(specs, 7)
    assert launcher((DeviceArray(np.float64, (4,), 0),), 1, 1, 0, None) is False  # dtype
    assert launcher((DeviceArray(np.float32, (2, 2), 0),), 1, 1, 0, None) is False  # rank
    assert launcher((DeviceArray(np.float32, (4,), 0, c=False),), 1, 1, 0, None) is False  # layout
    assert driver.calls == []


def test_an_invalidated_kernel_returns_false():
    node = Node()
    launcher, driver = make([], 0, node=node)
    node.valid = False
    assert launcher((), 1, 1, 0, None) is False and driver.calls == []


def test_a_moved_watched_word_asks_the_kernels_slow_check():
    tag, expected = ctypes.c_uint64(5), ctypes.c_uint64(5)
    node = Node()
    launcher, driver = make(
        [], 0, checks=[(ctypes.addressof(tag), ctypes.addressof(expected), [tag, expected])], node=node
    )
    assert launcher((), 1, 1, 0, None) is True and node.revalidated == 0
    tag.value = 6  # some global of the module changed ...
    assert launcher((), 1, 1, 0, None) is True and node.revalidated == 1  # ... but none the kernel read
    node.usable = lambda: False  # one it read did change
    assert launcher((), 1, 1, 0, None) is False
    assert len(driver.calls) == 2


def test_streams_are_passed_by_handle():
    launcher, driver = make([], 0)
    launcher((), 1, 1, 0, pytypes.SimpleNamespace(handle=0x5000))
    assert driver.calls[0][4] == 0x5000


def test_a_driver_error_raises_and_bad_dimensions_launch_nothing():
    launcher, _ = make([], 0, result=700)
    with pytest.raises(RuntimeError, match="CUresult 700"):
        launcher((), 1, 1, 0, None)
    launcher, driver = make([], 0)
    assert launcher((), 0, 1, 0, None) is False  # the slow path says what, naming the kernel
    assert launcher((), (1, 1, 1, 1), 1, 0, None) is False
    assert driver.calls == []


def test_a_python_int_matches_the_int64_or_uint64_launcher_by_its_value():
    as_int64, _ = make([ScalarSpec("q")], 1)
    as_uint64, _ = make([ScalarSpec("Q")], 1)
    assert as_int64((2**63 - 1,), 1, 1, 0, None) is True
    assert as_int64((2**63,), 1, 1, 0, None) is False
    assert as_uint64((2**63,), 1, 1, 0, None) is True
    assert as_uint64((5,), 1, 1, 0, None) is False


def test_a_launcher_with_more_slots_than_its_buffer_refuses_to_be_made():
    driver = FakeDriver(0)
    specs = [ArraySpec(np.dtype(np.float32), 3, 4, "C", False)] * 94  # 11 slots each: 1034 > 1024
    with pytest.raises(OverflowError, match="1034 parameter slots"):
        fastlaunch.Launcher(Node(), [], specs, 0xF00, driver.address, lambda s: s.handle)
    assert fastlaunch.Launcher(Node(), [], specs[:93], 0xF00, driver.address, lambda s: s.handle).nslots == 1023


def test_the_kernels_function_is_found_per_context_and_loaded_once_in_each():
    """The launcher holds a CUkernel: each context's CUfunction is asked of the driver once, then found."""
    launcher, driver = make([ScalarSpec("q")], 1)
    for context in (0x10, 0x20, 0x10, 0x20, 0x30):
        driver.context = context
        assert launcher(((7,)), 1, 1, 0, None) is True
    assert [call[0] for call in driver.calls] == [0xF00 + c for c in (0x10, 0x20, 0x10, 0x20, 0x30)]
    assert driver.loads == [0x10, 0x20, 0x30]
    driver.context = 0  # none current on this thread: the slow path makes the device's current
    assert launcher(((7,)), 1, 1, 0, None) is False and len(driver.calls) == 5


def test_an_invalid_handle_forgets_the_contexts_function_and_takes_the_slow_path():
    launcher, driver = make([ScalarSpec("q")], 1, result=400)  # CUDA_ERROR_INVALID_HANDLE
    assert launcher(((7,)), 1, 1, 0, None) is False
    driver.result = 0
    assert launcher(((7,)), 1, 1, 0, None) is True
    assert driver.loads == [0x10, 0x10]  # asked again: the context at that address is another one


def test_a_context_made_at_a_destroyed_ones_address_gets_its_own_function():
    """The driver may give a new context the address of one destroyed: its ID tells them apart, and the kernel's
    function is asked for the new one."""
    launcher, driver = make([ScalarSpec("q")], 1)
    assert launcher(((7,)), 1, 1, 0, None) is True
    driver.ids[0x10] = 2
    assert launcher(((7,)), 1, 1, 0, None) is True
    assert launcher(((7,)), 1, 1, 0, None) is True
    assert driver.loads == [0x10, 0x10]


def test_an_array_of_records_passes_the_native_guard_with_its_very_dtype_only():
    """numpy's dtype equality ignores metadata, so two structs with the same fields have equal dtypes: an
    array of records launches natively with the dtype object the kernel was made for, and any other (an
    equal one: perhaps another struct's) is left to the Python guard, which compares the structs."""
    record = np.dtype([("x", np.float32), ("n", np.int32)], metadata={"struct": "A"})
    other = np.dtype([("x", np.float32), ("n", np.int32)], metadata={"struct": "B"})
    assert record == other
    launcher, driver = make([ArraySpec(record, 1, 8, "C", True)], 7)
    assert launcher((DeviceArray(other, (4,), 0x1000),), 1, 1, 0, None) is False
    array = DeviceArray(np.float32, (4,), 0x1000)
    array.dtype = record
    assert launcher((array,), 1, 1, 0, None) is True
    assert driver.calls[0][5][2:5] == [q(4), q(8), q(0x1000)]


def test_a_stream_of_another_context_launches_in_that_context():
    """kernel[blocks, threads, stream] runs on the stream's device: the driver refuses the stream in the
    current context, and the launcher makes the stream's context current for the launch, then restores it."""
    launcher, driver = make([ScalarSpec("q")], 1)
    driver.stream_contexts[0x5000] = 0x20
    stream = pytypes.SimpleNamespace(handle=0x5000)
    assert launcher(((7,)), 1, 1, 0, stream) is True
    assert launcher(((7,)), 1, 1, 0, stream) is True
    assert [(call[0], call[4]) for call in driver.calls] == [(0xF00 + 0x20, 0x5000)] * 2
    assert driver.context == 0x10 and driver.pushed == []  # the launching thread's context is current again
    assert launcher(((7,)), 1, 1, 0, None) is True and driver.calls[-1][0] == 0xF00 + 0x10


def test_a_context_without_the_kernels_code_is_left_to_the_slow_path_and_asked_once():
    """A device of another architecture has no function for the kernel: the launcher says so (the slow path
    compiles for that device), asking the driver once; where the stream is that device's, the same."""
    launcher, driver = make([ScalarSpec("q")], 1)
    driver.foreign.add(0x20)
    driver.context = 0x20
    assert launcher(((7,)), 1, 1, 0, None) is False
    assert launcher(((7,)), 1, 1, 0, None) is False
    assert driver.loads == [0x20] and driver.calls == []
    driver.context, driver.stream_contexts[0x5000] = 0x10, 0x20
    assert launcher(((7,)), 1, 1, 0, pytypes.SimpleNamespace(handle=0x5000)) is False
    assert driver.calls == [] and driver.context == 0x10
    driver.context, driver.stream_contexts[0x6000] = 0x20, 0x10  # current: no code; the stream's device: code
    assert launcher(((7,)), 1, 1, 0, pytypes.SimpleNamespace(handle=0x6000)) is True
    assert driver.calls[-1][0] == 0xF00 + 0x10 and driver.context == 0x20


def test_an_f_ordered_array_passes_its_own_strides_and_a_c_ordered_one_strides_from_its_shape():
    specs = [ArraySpec(np.dtype(np.float32), 2, 4, "F", False), ArraySpec(np.dtype(np.float32), 2, 4, "C", False)]
    launcher, driver = make(specs, 18)
    f_array = DeviceArray(np.float32, (3, 4), 0x1000, c=False, f=True)
    f_array.strides = (4, 12)
    c_array = DeviceArray(np.float32, (3, 4), 0x2000)
    c_array.strides = None  # never read for a C-contiguous array
    assert launcher((f_array, c_array), 1, 1, 0, None) is True
    slots = driver.calls[0][5]
    assert slots[:9] == [q(0), q(0), q(12), q(4), q(0x1000), q(3), q(4), q(4), q(12)]
    assert slots[9:] == [q(0), q(0), q(12), q(4), q(0x2000), q(3), q(4), q(16), q(4)]


def test_a_struct_value_is_packed_on_its_first_launch_and_marshalled_while_its_definition_is_valid():
    import overdub as od
    from overdub import arguments
    from overdub.targets.cuda import abi

    @od.struct
    class Particle:
        x: od.float32
        n: od.int64
        alive: bool

    p = Particle(1.5, -3, True)
    assert "__overdub_cuda_slots__" not in vars(p)  # made on the host: nothing of CUDA's packed
    struct_type = Particle.__overdub_type__
    kind = arguments.kind_of(p)
    spec = abi.native_spec(kind, kind.signature(p), abi.kind_slots(kind, kind.signature(p), struct_type))
    assert spec == abi.ValueSpec(struct_type.definition, 3, abi.packer(struct_type))
    launcher, driver = make([spec, ScalarSpec("i")], 4)
    assert launcher((p, 7), 1, 1, 0, None) is True
    assert vars(p)["__overdub_cuda_slots__"] == abi.packer(struct_type)(p)  # kept for its next launches
    slots = driver.calls[0][5]
    assert slots[0][:4] == np.float32(1.5).tobytes() and slots[1] == q(-3) and slots[2][:1] == b"\x01"
    assert slots[3][:4] == np.int32(7).tobytes()
    struct_type.definition.valid = False  # the class was redefined: the slow path refuses the value
    assert launcher((p, 7), 1, 1, 0, None) is False and len(driver.calls) == 1


def test_c_and_python_agree_on_the_launch_key_the_options_and_the_spec_layout():
    """What the extension and Python share is written once, in C, and read by Python: the launch table's key
    (C's launch_key where built, the Python definition otherwise: the two agree on kernels, contexts, targets,
    arguments and state), od.cuda's keywords the lookup serves (the first of them a LaunchConfig's fields), the
    fields of each spec record, the scalar codes and the parameter buffer."""
    import dataclasses
    import inspect

    import overdub as od
    from overdub import call, launchconfig
    from overdub import launch as od_launch
    from overdub import runtime as od_runtime
    from overdub.targets.cuda import abi

    def kernel(out, x):
        pass

    ctx = od.Context("keyed", state=od.Float)
    for args in [(), (np.zeros(2), 1.5), (np.zeros(1, dtype=np.int32), 3, (1, 2.0))]:
        for context, target, state in [(None, None, None), (od.CPU, "cpu", None), (ctx, "cpu", 2.0)]:
            native = fastlaunch.launch_key(kernel, args, context, target, state)
            assert native == od_runtime._launch_key(kernel, context, target, args, state)
            assert od_runtime.launch_key(kernel, context, target, args, state) == native

    keywords = [
        p.name for p in inspect.signature(od_launch._python_cuda).parameters.values() if p.kind == p.KEYWORD_ONLY
    ]
    assert keywords[: len(fastlaunch.OPTIONS)] == list(fastlaunch.OPTIONS)  # the rest go to Python
    assert list(inspect.signature(call.launch_slow).parameters)[2:] == list(fastlaunch.OPTIONS)
    config_fields = [f.name for f in dataclasses.fields(launchconfig.LaunchConfig)]
    assert config_fields[: fastlaunch.CONFIG_OPTIONS] == list(fastlaunch.OPTIONS[: fastlaunch.CONFIG_OPTIONS])

    from overdub.targets.cpu.native import HostArraySpec

    records = (abi.ScalarSpec, abi.PointerSpec, abi.ArraySpec, abi.ValueSpec, HostArraySpec)
    assert {r.kind: tuple(f.name for f in dataclasses.fields(r)) for r in records} == fastlaunch.SPEC_FIELDS
    native_codes = {code[0] for code in abi.SLOT_CODES.values()} & set(fastlaunch.SCALAR_CODES)
    assert native_codes == set(fastlaunch.SCALAR_CODES)  # every code C converts is a slot code of Python's
    assert all(struct.calcsize(code) == size for code, size in fastlaunch.SCALAR_CODES.items())


def test_the_lookup_serves_the_launch_tables_current_list_for_each_call():
    """od.cuda's lookup caches each kernel's last key while the table is unchanged: a changed table (a launch
    function added or dropped), other argument classes, another kernel or state each find the table's own list
    for their call."""
    import overdub as od
    from overdub.runtime import runtime

    def kernel(x):
        pass

    launched = []

    def launch_function(tag):
        def launch(args, blocks, threads, shmem, stream):
            launched.append((tag, args))
            return True

        return launch

    key_int = fastlaunch.launch_key(kernel, (1,), None, "cpu", None)
    key_float = fastlaunch.launch_key(kernel, (1.0,), None, "cpu", None)
    try:
        runtime.launches[key_int] = [launch_function("a")]
        runtime.launches[key_float] = [launch_function("f")]
        od.cuda(kernel, 1, target="cpu")
        od.cuda(kernel, 1, target="cpu")
        od.cuda(kernel, 2.5, target="cpu")
        runtime.launches[key_int] = [launch_function("b")]  # the table changed: the new list
        od.cuda(kernel, 3, target="cpu")
        assert launched == [("a", (1,)), ("a", (1,)), ("f", (2.5,)), ("b", (3,))]
    finally:
        runtime.launches.pop(key_int, None)
        runtime.launches.pop(key_float, None)


# --- cupy arrays read in place (overdub/targets/cuda/arraylayout.py) ----------------------------------------------
# Stand-ins with cupy's kind of layout: a bytes subclass keeps its contents in the object itself, so its fields
# -- dtype, shape and strides vectors (begin, end), contiguity flags (C ints), data pointer's object -- lie at
# known offsets past the bytes header, as a Cython class's fields do.

BYTES_HEADER = sys.getsizeof(b"") - 1  # where a bytes object's contents start (its terminating NUL excluded)
LAYOUT = {"dtype": 0, "shape": 8, "strides": 24, "c_contiguous": 40, "f_contiguous": 44, "data": 48, "ptr": 0}


class InPlaceArray(bytes):
    pass


class InPlacePointer(bytes):
    pass


def in_place_array(dtype, shape, strides, ptr, c, f, keep: list):
    """An InPlaceArray holding the fields, what it points to kept alive in ``keep``."""
    dtype = np.dtype(dtype)
    shape_v, strides_v = (
        (ctypes.c_int64 * max(len(shape), 1))(*shape),
        (ctypes.c_int64 * max(len(strides), 1))(*strides),
    )
    pointer = InPlacePointer(struct.pack("<Q", ptr))
    begin, end = ctypes.addressof(shape_v), ctypes.addressof(shape_v) + 8 * len(shape)
    s_begin, s_end = ctypes.addressof(strides_v), ctypes.addressof(strides_v) + 8 * len(strides)
    array = InPlaceArray(
        struct.pack("<QQQQQii", id(dtype), begin, end, s_begin, s_end, c, f) + struct.pack("<Q", id(pointer))
    )
    keep += [dtype, shape_v, strides_v, pointer]
    return array, shape_v


@pytest.fixture
def in_place():
    from overdub.targets.cuda import arraylayout

    assert ctypes.string_at(id(b"xyz") + BYTES_HEADER, 3) == b"xyz", "bytes keep their contents in the object"
    fastlaunch.set_array_layout(
        InPlaceArray, InPlacePointer, tuple(BYTES_HEADER + LAYOUT[f] for f in arraylayout.FIELDS)
    )
    yield
    fastlaunch.set_array_layout(None, None, (0,) * 7)
    arraylayout._outcome.clear()  # a GPU machine's real cupy layout is found again at the next launch function


def test_an_array_of_the_layouts_class_is_read_in_place_and_its_guard_holds_there(in_place):
    keep: list = []
    specs = [ArraySpec(np.dtype(np.float32), 2, 4, "C", False), ArraySpec(np.dtype(np.float32), 2, 4, "F", False)]
    launcher, driver = make(specs, 18)
    c_array, c_shape = in_place_array(np.float32, (3, 4), (16, 4), 0x1000, 1, 0, keep)
    f_array, _ = in_place_array(np.float32, (3, 4), (4, 12), 0x2000, 0, 1, keep)
    assert launcher((c_array, f_array), 1, 1, 0, None) is True
    slots = driver.calls[-1][5]
    assert slots[:9] == [q(0), q(0), q(12), q(4), q(0x1000), q(3), q(4), q(16), q(4)]
    assert slots[9:] == [q(0), q(0), q(12), q(4), q(0x2000), q(3), q(4), q(4), q(12)]
    c_shape[0], c_shape[1] = 4, 3  # cupy's `a.shape = ...` rewrites the vector in place: read afresh
    assert launcher((c_array, f_array), 1, 1, 0, None) is True
    assert driver.calls[-1][5][5:9] == [q(4), q(3), q(12), q(4)]
    # the guard, read in place: another dtype, rank or layout takes the slow path
    for wrong in (
        in_place_array(np.float64, (3, 4), (32, 8), 0x1000, 1, 0, keep)[0],
        in_place_array(np.float32, (12,), (4,), 0x1000, 1, 1, keep)[0],
        in_place_array(np.float32, (3, 4), (4, 12), 0x1000, 0, 1, keep)[0],
    ):
        assert launcher((wrong, f_array), 1, 1, 0, None) is False
    assert launcher((c_array, c_array), 1, 1, 0, None) is False  # C-only where F is required
    assert len(driver.calls) == 2


def test_an_array_of_another_class_or_pointer_class_reads_its_attributes(in_place):
    keep: list = []
    specs = [ArraySpec(np.dtype(np.float32), 1, 4, "C", False)]
    launcher, driver = make(specs, 7)
    assert launcher((DeviceArray(np.float32, (5,), 0x3000),), 1, 1, 0, None) is True
    assert driver.calls[-1][5][4] == q(0x3000)
    odd, _ = in_place_array(np.float32, (5,), (4,), 0x4000, 1, 1, keep)
    odd = InPlaceArray(odd[:48] + struct.pack("<Q", id(keep[0])))  # its data is no InPlacePointer: not in place
    # ...so its attributes are read, and a bytes object has none: the guard fails (read in place, it would hold)
    assert launcher((odd,), 1, 1, 0, None) is False
    assert len(driver.calls) == 1


def test_the_layout_is_found_where_every_probe_holds_each_field_at_one_offset_only():
    from overdub.targets.cuda import arraylayout

    keep: list = []
    shapes = [
        ((2, 3), (12, 4), 1, 0),
        ((3, 2), (4, 12), 0, 1),
        ((2, 2), (12, 8), 0, 0),
        ((5,), (8,), 1, 1),
        ((2,), (16,), 0, 0),
        ((2, 3, 4), (24, 8, 2), 1, 0),
        ((3, 2, 4), (8, 24, 2), 0, 0),
    ]
    dtypes = [np.float32, np.float32, np.float32, np.float64, np.float64, np.int16, np.int16]
    probes = []
    for i, ((shape, strides, c, f), dtype) in enumerate(zip(shapes, dtypes)):
        array, _ = in_place_array(dtype, shape, strides, 0x10000 + 0x100 * i, c, f, keep)
        keep.append(array)
        pointer, dtype_object = keep[-2], keep[-5]
        probes.append(
            arraylayout.Probe(id(array), id(pointer), id(dtype_object), 0x10000 + 0x100 * i, shape, strides, c, f)
        )
    size, pointer_size = BYTES_HEADER + 56, BYTES_HEADER + 8
    found = arraylayout.find(probes, size, pointer_size)
    assert found == {field: BYTES_HEADER + offset for field, offset in LAYOUT.items()}
    # probes that cannot tell two fields apart (every array both C- and F-contiguous): no layout
    both = [dataclasses.replace(p, c=1, f=1) for p in probes]
    assert arraylayout.find(both, size, pointer_size) is None


def test_numpy_scalars_are_copied_from_where_their_layout_says_and_other_widths_are_converted():
    from overdub.targets.cuda import arraylayout

    values = [np.int8(-3), np.uint16(65000), np.int32(-7), np.uint64(2**63 + 5), np.float32(1.5), np.float64(-2.25)]
    values.append(np.bool_(True))
    launcher, driver = make([ScalarSpec(arraylayout.SCALAR_CODES[type(v)]) for v in values], len(values))
    try:
        fastlaunch.set_scalar_layouts(arraylayout.scalar_layouts())
        assert launcher(tuple(values), 1, 1, 0, None) is True
        assert [slot[: v.itemsize] for slot, v in zip(driver.calls[-1][5], values)] == [v.tobytes() for v in values]
        assert all(slot[v.itemsize :] == bytes(8 - v.itemsize) for slot, v in zip(driver.calls[-1][5], values))
        fastlaunch.set_scalar_layouts([(np.float32, "f", 8)])  # elsewhere in the object: the table is what is read
        single, one = make([ScalarSpec("f")], 1)
        assert single((np.float32(1.5),), 1, 1, 0, None) is True
        assert one.calls[-1][5][0][:4] != np.float32(1.5).tobytes()
        wider, wide = make([ScalarSpec("q")], 1)  # an int32 where the kernel takes an int64: converted
        fastlaunch.set_scalar_layouts(arraylayout.scalar_layouts())
        assert wider((np.int32(-7),), 1, 1, 0, None) is True
        assert wide.calls[-1][5][0] == q(-7)
    finally:
        fastlaunch.set_scalar_layouts(arraylayout.scalar_layouts())
