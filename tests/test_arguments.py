"""Argument kinds: each kind types its values as numba does, and a launch function's guards accept exactly the
values that have the type its kernel was compiled for."""

import enum

import numba
import numpy as np
import pytest
from numba.cuda.typing.typeof import Purpose
from numba.cuda.typing.typeof import typeof as cuda_typeof

import overdub as od
from helpers import compiles
from overdub import arguments
from overdub.targets import cuda as cuda_target
from overdub.targets import get_target
from overdub.targets.cuda import abi


class Interface:
    """A minimal ``__cuda_array_interface__`` object (as torch or another library exports)."""

    def __init__(self, shape, typestr="<f4", strides=None, readonly=False):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "data": (0x1000, readonly),
            "version": 3,
        }


def guards_accept(value, like):
    """Do the guards of a launch function made for ``like`` accept ``value``?"""
    described = arguments.Argument.of_kind(like, arguments.kind_of(like))
    conditions, consts = arguments.signature_guards(["a0"], [described])
    return all(eval(condition, dict(consts, a0=value)) for condition in conditions)


NUMPY_VALUES = [
    np.zeros(4),
    np.zeros((3, 4)),
    np.zeros((3, 4), order="F"),
    np.zeros((4, 6))[:, ::2],
    np.zeros(4, dtype=np.int8),
    np.zeros(()),
    np.arange(3).reshape(1, 3),
]


@pytest.mark.parametrize(
    "value",
    NUMPY_VALUES
    + [
        1,
        -1,
        2**63,
        True,
        1.5,
        2j,
        np.float32(1),
        np.int8(3),
        np.bool_(True),
        np.complex64(1),
        (1, 2),
        (1, 2.5, (np.int8(1),)),
        (np.zeros(2), 3),
        (),
    ],
)
def test_each_host_value_is_typed_as_numba_types_it(value):
    assert get_target("cpu").typeof(value) == numba.typeof(value)


def test_a_read_only_numpy_array_is_typed_read_only():
    array = np.zeros(3)
    array.flags.writeable = False
    assert get_target("cpu").typeof(array) == numba.typeof(array)
    assert get_target("cpu").typeof(array).mutable is False


@pytest.mark.parametrize(
    "interface",
    [
        Interface((4,)),
        Interface((3, 4)),
        Interface((3, 4), readonly=True),
        Interface((4,), strides=(8,)),
        Interface((2, 3), "<i8", (48, 16)),
    ],
)
def test_an_interface_object_is_typed_as_numba_cuda_types_it(interface):
    assert cuda_target.target_for((9, 0)).typeof(interface) == cuda_typeof(interface, Purpose.argument)


def test_a_fortran_ordered_interface_object_is_typed_fortran_ordered():
    # numba-cuda compares byte strides with the element's bit width here and says "A"; F is exact and faster
    ty = cuda_target.target_for((9, 0)).typeof(Interface((3, 4), strides=(4, 12)))
    assert (ty.layout, ty.ndim, ty.dtype) == ("F", 2, numba.float32)


def test_a_launch_function_for_a_writable_array_rejects_a_read_only_one():
    writable, readonly = np.zeros(3), np.zeros(3)
    readonly.flags.writeable = False
    assert guards_accept(np.ones(3), like=writable)
    assert not guards_accept(readonly, like=writable)
    assert not guards_accept(Interface((3,), readonly=True), like=Interface((3,)))
    assert guards_accept(Interface((5,)), like=Interface((3,)))


@pytest.mark.parametrize(
    "value, like",
    [
        (np.zeros(3, dtype=np.float32), np.zeros(3)),  # dtype
        (np.zeros((3, 1)), np.zeros(3)),  # rank
        (np.zeros((4, 4))[:, ::2], np.zeros((4, 2))),  # layout
        (np.zeros((2, 3), order="F"), np.zeros((2, 3))),
        (Interface((3,), "<f8"), Interface((3,))),
        (Interface((4, 6), strides=(96, 8)), Interface((4, 6))),
        (2**63, 1),
        (1, 2**63),  # int64 / uint64
        (od.pointer(np.zeros(2, dtype=np.int32)), od.pointer(np.zeros(2))),
        ((1, 2.0), (1, 2)),
        ((1, 2, 3), (1, 2)),
        ((np.zeros(2, dtype=np.float32),), (np.zeros(2),)),
        ((1, object()), (1, 2)),
    ],
)
def test_guards_reject_a_value_of_another_type(value, like):
    assert not guards_accept(value, like)


def test_a_read_only_array_after_a_writable_one_compiles_its_own_kernel(make_module):
    m = make_module("""
        def kernel(out, a):
            out[0] = a[1]
    """)
    out, readonly = np.zeros(1), np.arange(3.0)
    readonly.flags.writeable = False
    od.cuda(m.kernel, out, np.arange(3.0))
    before = compiles()
    od.cuda(m.kernel, out, readonly)
    assert compiles() == before + 1 and out[0] == 1.0
    od.cuda(m.kernel, out, np.arange(3.0) * 2)
    assert compiles() == before + 1 and out[0] == 2.0


def test_a_device_array_is_rejected_by_the_cpu_target_and_a_host_array_by_the_cuda_target():
    with pytest.raises(TypeError, match="lives in GPU memory"):
        get_target("cpu").typeof(Interface((3,)))
    with pytest.raises(TypeError, match="lives in host memory"):
        cuda_target.target_for((9, 0)).typeof(np.zeros(3))


def test_a_kernel_with_more_parameter_slots_than_the_native_buffer_takes_the_python_path():
    pointers = [od.Pointer(0x1000 + 8 * i, np.float64, device=True) for i in range(abi.MAX_SLOTS + 1)]
    described = tuple(map(cuda_target.target_for((9, 0)).argument, pointers))
    launcher = cuda_target.CUDALauncher(library=None, argtypes=tuple(a.type for a in described))

    class Kernel:  # the validity checks a native launcher reads
        guard = type("Guard", (), {"native_checks": staticmethod(lambda: [])})()

    slots = [abi.slots_of(a) for a in described]
    assert launcher._native(Kernel(), described, slots) is None


class FakeCupy:
    """The attributes of a cupy array that its kind reads."""

    def __init__(self, shape, order="C", dtype=np.float32):
        host = np.zeros(shape, dtype=dtype, order=order)
        self.dtype, self.ndim, self.shape, self.strides, self.size = (
            host.dtype,
            host.ndim,
            host.shape,
            host.strides,
            host.size,
        )
        self._c_contiguous, self._f_contiguous = host.flags.c_contiguous, host.flags.f_contiguous
        self.data = type("MemoryPointer", (), {"ptr": 0x2000})()


def test_a_cupy_array_is_typed_by_its_flags_and_passed_as_numbas_exploded_array():
    kind = arguments.CupyArray(FakeCupy)
    assert kind.typeof(FakeCupy((3, 4))) == numba.types.Array(numba.float32, 2, "C")
    assert kind.typeof(FakeCupy((3, 4), order="F")) == numba.types.Array(numba.float32, 2, "F")
    c_array = FakeCupy((3, 4))
    signature = kind.signature(c_array)
    slots = abi.kind_slots(kind, signature, kind.typeof(c_array))
    assert abi.slot_format(slots) == "<" + "q" * 9
    values = abi.slot_values(slots, "a", namespace := {})
    assert eval(f"({', '.join(values)},)", dict(namespace, a=c_array)) == (0, 0, 12, 4, 0x2000, 3, 4, 16, 4)
    assert abi.native_spec(kind, signature, slots) == abi.ArraySpec(np.dtype(np.float32), 2, 4, "C", False)
    conditions = kind.guards("a0", signature, consts := {})
    accepts = lambda value: all(eval(c, dict(consts, a0=value)) for c in conditions)  # noqa: E731
    assert accepts(FakeCupy((5, 2)))
    assert not accepts(FakeCupy((3, 4), order="F")) and not accepts(FakeCupy((3, 4), dtype=np.float64))


RECORD = np.dtype([("x", np.float32), ("n", np.int64)], align=True)


def test_a_structured_numpy_array_is_a_record_array_on_the_cpu_target(make_module):
    m = make_module("""
        def kernel(out, points):
            out[0] = points[1].x * points[1].n
    """)
    points = np.zeros(2, dtype=RECORD)
    points[1] = (1.5, 4)
    out = np.zeros(1)
    od.cuda(m.kernel, out, points, target="cpu")
    assert out[0] == 6.0


def test_a_record_interface_object_keeps_its_fields_and_compiles_to_ptx():
    interface = Interface((2,), RECORD.str)
    interface.__cuda_array_interface__["descr"] = RECORD.descr
    ty = cuda_target.target_for((9, 0)).typeof(interface)
    assert isinstance(ty.dtype, numba.types.Record) and [f for f, _ in ty.dtype.members] == ["x", "n"]
    slots = abi.kind_slots(arguments.DeviceArray(), None, ty)
    assert abi.slot_format(slots) == "<" + "q" * 7
    assert abi.slot_values(slots, "a", namespace := {}) == ["*interface_fields(a, 16)"]
    assert namespace == {"interface_fields": abi.interface_fields}

    def kernel(out, points):
        out[0] = points[1].x

    assert ".visible .entry" in od.code_ptx(kernel, numba.types.float32[::1], ty)


def test_a_record_on_the_device_is_passed_by_address_as_its_record_type():
    record = np.zeros(1, dtype=RECORD)[0]
    on_device = arguments.RecordOnDevice(0x3000, record.dtype, None)
    ty = cuda_target.target_for((9, 0)).typeof(on_device)
    assert ty == numba.from_dtype(RECORD)
    slots = abi.kind_slots(arguments.kind_of(on_device), None, ty)
    assert (abi.slot_format(slots), abi.slot_values(slots, "v", {})) == ("<Q", ["v.address"])
    with pytest.raises(cuda_target.HostMemoryError, match="record"):
        cuda_target.target_for((9, 0)).typeof(record)


def test_a_record_scalar_argument_works_on_the_cpu_target(make_module):
    m = make_module("""
        def kernel(out, point):
            out[0] = point.x * point.n
            point.x = 10.0
    """)
    points = np.zeros(1, dtype=RECORD)
    points[0] = (1.5, 4)
    out = np.zeros(1)
    od.cuda(m.kernel, out, points[0], target="cpu")
    assert out[0] == 6.0 and points[0]["x"] == 10.0


def test_a_tuple_is_passed_as_its_elements_slots_one_after_another():
    value = (3, np.float32(2.0), (1, 2.5))
    kind = arguments.kind_of(value)
    ty = kind.typeof(value)
    assert str(ty) == "Tuple(int64, float32, Tuple(int64, float64))"
    slots = abi.kind_slots(kind, kind.signature(value), ty)
    assert abi.slot_format(slots) == "<qf4xqd"
    assert abi.slot_values(slots, "v", {}) == ["v[0]", "v[1]", "v[2][0]", "v[2][1]"]
    assert arguments.kind_of((1, object())) is None


def test_tuple_arguments_launch_and_a_new_element_type_compiles_anew(make_module):
    m = make_module(
        """
        def area(out, shape, offset):
            out[0] = shape[0] * shape[1] + offset[0]
    """,
        prefix="tuples",
    )
    out = np.zeros(1)
    before = compiles()
    od.cuda(m.area, out, (3, 4), (0.5,), target="cpu")
    od.cuda(m.area, out, (3, 5), (0.25,), target="cpu")
    assert out[0] == 15.25 and compiles() - before == 1
    od.cuda(m.area, out, (3, 5), (1,), target="cpu")
    assert out[0] == 16 and compiles() - before == 2


def test_a_masked_array_has_no_argument_kind_and_a_plain_array_keeps_its_own():
    """A masked array is no numpy array to a kernel (its mask would be lost); asking does not import numpy.ma
    for the plain arrays of a program that never uses it."""
    assert arguments.kind_of(np.ma.masked_array(np.arange(3.0), mask=[0, 1, 0])) is None
    assert arguments.kind_of(np.arange(3.0)).name == "numpy_array"


class Colour(enum.IntEnum):
    RED = 1
    BLUE = 7


class Shape(enum.Enum):
    CIRCLE = 1.5
    SQUARE = 2.5


class Planet(enum.Enum):  # numba-cuda's test_enums: members whose values are tuples
    MERCURY = (3.303e23, 2.4397e6)
    VENUS = (4.869e24, 6.0518e6)


@pytest.mark.parametrize(
    ("value", "typed", "passed"),
    [
        (Colour.BLUE, "IntEnum<int64>(Colour)", 7),
        (Shape.SQUARE, "Enum<float64>(Shape)", 2.5),
        (np.datetime64("2020-01-03"), "datetime64[D]", 18264),
        (np.timedelta64(90, "s"), "timedelta64[s]", 90),
        (Planet.VENUS, "Enum<UniTuple(float64 x 2)>(Planet)", (4.869e24, 6.0518e6)),
    ],
)
def test_enum_members_and_datetimes_are_passed_as_numba_cuda_passes_them(value, typed, passed):
    """numba-cuda passes an enum member as its value and a datetime64 or timedelta64 as its count of units; a
    launch on the CUDA target refused them (no slots), the CPU target typed them with numba's typeof."""
    kind = arguments.kind_of(value)
    ty = kind.typeof(value)
    assert str(ty) == typed and ty == numba.typeof(value)
    slots = abi.kind_slots(kind, kind.signature(value), ty)
    values = abi.slot_values(slots, "v", namespace := {})
    passed = passed if isinstance(passed, tuple) else (passed,)
    assert eval(f"({', '.join(values)},)", dict(namespace, v=value)) == passed
    assert len(abi.slot_format(slots)) == 1 + len(passed)
    conditions = kind.guards("v", kind.signature(value), consts := {"signature_" + kind.name: kind.signature})
    consts["v_signature"] = kind.signature(value)
    assert all(eval(c, dict(consts, v=value)) for c in conditions)

    def kernel(out, v):
        out[0] = v == v

    out = np.zeros(1, dtype=np.bool_)
    od.cuda(kernel, out, value, target="cpu")
    assert out[0] and ".visible .entry" in od.code_ptx(kernel, numba.types.bool_[::1], ty)


def test_a_datetime_of_another_unit_is_another_signature():
    def kernel(out, when):
        out[0] = when

    for unit in ("D", "s"):
        out = np.zeros(1, dtype=f"datetime64[{unit}]")
        od.cuda(kernel, out, np.datetime64("2020-01-03", unit), target="cpu")
        assert out[0] == np.datetime64("2020-01-03", unit)


def test_numba_cudas_argument_hints_are_host_memory_the_drop_in_copies():
    from numba.cuda.args import In

    with pytest.raises(cuda_target.HostMemoryError, match=r"cuda.In\(...\) wraps a host array: launch through od.jit"):
        cuda_target.target_for((9, 0)).argument(In(np.zeros(2)))


def test_a_foreign_arrays_producer_stream_is_synchronized_before_a_launch_reads_it(monkeypatch):
    """``__cuda_array_interface__`` version 3: a consumer waits for the stream the interface names before
    reading (numba-cuda does, under CUDA_ARRAY_INTERFACE_SYNC); an interface naming none is read as it is."""
    from numba import cuda
    from numba.cuda.core import config

    synchronized = []

    class Stream:
        def __init__(self, handle):
            self.handle = handle

        def synchronize(self):
            synchronized.append(self.handle)

    monkeypatch.setattr(cuda, "external_stream", Stream)
    on_a_stream, on_none = Interface((4,)), Interface((4,))
    on_a_stream.__cuda_array_interface__["stream"] = 0x7000
    assert abi.interface_fields(on_a_stream, 8)[2] == 4 and synchronized == [0x7000]
    abi.interface_fields(on_none, 8)
    assert synchronized == [0x7000]
    monkeypatch.setattr(config, "CUDA_ARRAY_INTERFACE_SYNC", False)
    abi.interface_fields(on_a_stream, 8)
    assert synchronized == [0x7000]


class _FakeDeviceArray:
    """A device array of numba-cuda's, as far as the drop-in's copies use one (no GPU here)."""

    def __init__(self, host, copied):
        self.data, self.copied = (host.copy() if copied else np.full_like(host, -1)), copied

    def copy_to_host(self, host, stream=0):
        host[...] = self.data


@pytest.mark.parametrize(
    ("hint", "copied_in", "copied_back"), [("In", True, False), ("Out", False, True), ("InOut", True, True)]
)
def test_cuda_in_out_and_inout_copy_a_host_array_as_their_names_say_without_numbas_warning(
    monkeypatch, hint, copied_in, copied_back
):
    """od.jit's copies for numba-cuda's argument hints (targets/cuda/copies.py), with numba-cuda's device arrays
    (the hint's own to_device gives a cuda.core view no kernel argument types); an implicit copy warns."""
    import warnings

    from numba import cuda as numba_cuda

    from overdub.targets.cuda import copies

    monkeypatch.setattr(copies, "make_current", lambda: None)
    monkeypatch.setattr(copies.numba_cuda, "to_device", lambda host, stream=0: _FakeDeviceArray(host, True))
    monkeypatch.setattr(copies.numba_cuda, "device_array_like", lambda host, stream=0: _FakeDeviceArray(host, False))
    host = np.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numba-cuda warns of implicit copies only
        (device,), pairs = copies.copied_to_device((getattr(numba_cuda, hint)(host),))
    assert device.copied == copied_in
    device.data[0] = 3.0  # the kernel's store
    copies.copy_back(pairs)
    assert host[0] == (3.0 if copied_back else 0.0)
    with pytest.warns(Warning, match="copy overhead"):
        copies.copied_to_device((np.zeros(2),))
