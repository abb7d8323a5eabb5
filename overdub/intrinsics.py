"""Device intrinsics: pointers, unchecked loads and stores, printing, a launch's state.

Each public intrinsic is an :class:`Intrinsic`: inside a kernel it is an overdubbable callee whose device
implementation is lowered with llvmlite; on the host it runs a Python implementation, so that kernels and
methods can also be run as plain Python (for testing, or as an oracle).
"""

from __future__ import annotations

import enum
import functools
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic, typeof_impl

from .bridge.pointers import load_element, store_element
from .runtime import runtime
from .types import PtrType

if TYPE_CHECKING:
    import numpy.typing as npt  # for an annotation only
    from numba.core.base import BaseContext
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature


# what an intrinsic's typing answers: the call's signature and its code generator, or None (no such call)
_Typed: TypeAlias = "tuple[Signature, Callable[..., ir.Value]] | None"

__all__ = [
    "Pointer",
    "pointer",
    "unsafe_load",
    "unsafe_store",
    "vload",
    "vstore",
    "cuprintln",
    "state",
    "Intrinsic",
    "PrintLowering",
    "register_print_lowering",
    "LaunchNeed",
]


class Intrinsic:
    """A callable with a device implementation for kernels and a host implementation for Python."""

    __overdub_intrinsic__ = True

    __name__: str  # the host implementation's, as functools.update_wrapper copies it

    def __init__(self, host: Callable[..., Any], device: Callable[..., Any]) -> None:
        functools.update_wrapper(self, host)
        self.host, self.device = host, device

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # the host implementation's arguments and result
        return self.host(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<overdub intrinsic {self.__name__}>"


# --- pointers -------------------------------------------------------------------------------------------


class Pointer:
    """A typed pointer to the first element of an array's memory (``Ptr[dtype]`` inside kernels).

    It keeps the array alive. ``device`` says whether the memory is on the GPU.
    """

    __slots__ = ("address", "dtype", "owner", "device")

    def __init__(self, address: int, dtype: npt.DTypeLike, owner: object = None, device: bool = False) -> None:
        self.address, self.dtype, self.owner, self.device = int(address), np.dtype(dtype), owner, device

    @property
    def type(self) -> PtrType:
        return PtrType(numba.from_dtype(self.dtype))

    def __reduce__(self) -> typing.NoReturn:
        raise TypeError(
            "an od.Pointer is an address in this process and means nothing in another: pickle the "
            "array and take od.pointer of it where it is used"
        )

    def _host_view(self) -> np.ndarray[typing.Any, np.dtype[typing.Any]]:
        if self.device or not isinstance(self.owner, np.ndarray):
            raise TypeError("this pointer's memory is not host memory: it can only be used inside a kernel")
        return self.owner.reshape(-1) if self.owner.flags.c_contiguous else self.owner.ravel(order="K")

    def __repr__(self) -> str:
        where = "device" if self.device else "host"
        return f"Ptr[{numba.from_dtype(self.dtype)}]({where} 0x{self.address:x})"


@typeof_impl.register(Pointer)
def _typeof_pointer(value: Pointer, c: object) -> PtrType:
    return value.type


def contiguity(shape: Sequence[int], strides: Sequence[int] | None, itemsize: int) -> tuple[bool, bool]:
    """(C-contiguous, Fortran-contiguous) of a strided layout, numpy's rule: extents of 1 have any stride."""
    if strides is None:
        return True, len(shape) <= 1
    flags: list[bool] = []
    for order in (reversed, lambda seq: seq):
        expected, ok = itemsize, True
        for extent, stride in zip(order(shape), order(strides)):
            ok = ok and (extent <= 1 or stride == expected)
            expected *= extent
        flags.append(ok)
    return flags[0], flags[1]


def interface_dtype(value: Any, interface: dict[str, Any] | None = None) -> np.dtype[typing.Any]:
    """The element dtype of a ``__cuda_array_interface__`` object (``interface``: that interface, where the
    caller has read it -- numba's device arrays build it anew at each read): its own numpy ``dtype`` where it
    has one of the interface's size (numba device arrays: record dtypes keep their alignment), else the
    interface's ``descr`` where that names fields (a structured array), else its ``typestr``."""
    if interface is None:
        interface = value.__cuda_array_interface__
    plain: np.dtype[typing.Any] = np.dtype(interface["typestr"])
    own = getattr(value, "dtype", None)
    if isinstance(own, np.dtype) and own.itemsize == plain.itemsize:
        return own
    descr = interface.get("descr")
    if not descr or not any(field[0] for field in descr):
        return plain
    names: list[str] = []
    formats: list[np.dtype[typing.Any]] = []
    offsets: list[int] = []
    offset = 0
    for name, fmt, *shape in descr:  # unnamed entries are padding
        field = np.dtype((fmt, tuple(shape[0])) if shape else fmt)
        if name:
            names.append(name)
            formats.append(field)
            offsets.append(offset)
        offset += field.itemsize
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": plain.itemsize})


def pointer(array: Any) -> Pointer:  # a numpy array or any __cuda_array_interface__ object
    """A ``Ptr[dtype]`` to ``array``'s first element: a numpy array (CPU target), or a cupy array, numba
    device array or any ``__cuda_array_interface__`` object (CUDA target). The array must be contiguous (C or
    Fortran order): a pointer indexes memory, element after element."""
    if isinstance(array, np.ndarray):
        contiguous = array.flags.c_contiguous or array.flags.f_contiguous
        address, dtype, device = array.ctypes.data, array.dtype, False
    elif hasattr(array, "__cuda_array_interface__"):
        interface = array.__cuda_array_interface__
        dtype = interface_dtype(array)
        contiguous = any(contiguity(interface["shape"], interface.get("strides"), dtype.itemsize))
        address, device = interface["data"][0], True
    else:
        raise TypeError(
            f"od.pointer needs a numpy array or an object with __cuda_array_interface__, not {type(array).__name__}"
        )
    if not contiguous:
        raise ValueError(
            "od.pointer needs a contiguous array (a pointer indexes elements one after another in "
            "memory); this one is a strided view: pass a contiguous copy (np.ascontiguousarray, "
            "cupy.ascontiguousarray) or index the array itself in the kernel"
        )
    return Pointer(address, dtype, array, device=device)


@intrinsic
def _load(typingctx: TypingContext, ptr: types.Type, index: types.Type) -> _Typed:
    if not (isinstance(ptr, PtrType) and isinstance(index, types.Integer)):
        return None

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        return load_element(context, builder, sig.args[0], args[0], sig.args[1], args[1])  # type: ignore[no-untyped-call]  # numba's is unannotated

    return ptr.dtype(ptr, types.unliteral(index)), codegen  # type: ignore[no-untyped-call]  # numba's is unannotated


@intrinsic
def _store(typingctx: TypingContext, ptr: types.Type, value: types.Type, index: types.Type) -> _Typed:
    if not (
        isinstance(ptr, PtrType)
        and isinstance(index, types.Integer)
        and isinstance(value, (types.Number, types.Boolean))
    ):
        return None

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        store_element(context, builder, sig.args[0], args[0], sig.args[2], args[2], sig.args[1], args[1])  # type: ignore[no-untyped-call]  # numba's is unannotated
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.void(ptr, types.unliteral(value), types.unliteral(index)), codegen  # type: ignore[no-untyped-call]  # numba's is unannotated


# The device implementations are compiled, never run: numba types their arguments. (numba's stub of an
# intrinsic's call counts the typing context among its arguments, which a call in compiled code does not pass.)
def _unsafe_load_device(ptr: Pointer, i: int = 0) -> object:
    return _load(ptr, i)  # type: ignore[call-arg, arg-type]


def _unsafe_store_device(ptr: Pointer, value: object, i: int = 0) -> None:
    _store(ptr, value, i)  # type: ignore[call-arg, arg-type]


def _unsafe_load_host(ptr: Pointer, i: int = 0) -> Any:  # an element: a numpy scalar of the pointer's dtype
    """``ptr[i]``, with no bounds check inside kernels."""
    return ptr._host_view()[i]


def _unsafe_store_host(ptr: Pointer, value: object, i: int = 0) -> None:
    """``ptr[i] = value`` (converted to the element type), with no bounds check inside kernels."""
    ptr._host_view()[i] = value


unsafe_load = Intrinsic(_unsafe_load_host, _unsafe_load_device)
unsafe_store = Intrinsic(_unsafe_store_host, _unsafe_store_device)


# --- vector loads and stores ----------------------------------------------------------------------------
# One aligned load or store of `width` consecutive elements (a 128-bit ld.global.v4.f32 for four float32s):
# the widest memory transactions a thread can issue, which numba's array indexing never emits.


def _vector_pointer(
    context: BaseContext,
    builder: ir.IRBuilder,
    ptr_type: PtrType,
    ptr: ir.Value,
    index_type: types.Type,
    index: ir.Value,
    width: int,
) -> tuple[ir.Value, ir.VectorType]:
    element = context.get_data_type(ptr_type.dtype)  # type: ignore[no-untyped-call]  # numba's is unannotated
    vector = ir.VectorType(element, width)
    base = builder.bitcast(ptr, vector.as_pointer())
    return builder.gep(base, [context.cast(builder, index, index_type, types.intp)]), vector  # type: ignore[no-untyped-call]  # numba's is unannotated


def _vector_width(width: types.Type) -> int | None:
    value = getattr(width, "literal_value", None)
    return value if isinstance(value, int) and value in (2, 4, 8, 16) else None


@intrinsic(prefer_literal=True)
def _vload(typingctx: TypingContext, ptr: types.Type, index: types.Type, width: types.Type) -> _Typed:
    n = _vector_width(width)
    if not (isinstance(ptr, PtrType) and isinstance(index, types.Integer) and n):
        return None
    result = types.UniTuple(ptr.dtype, n)  # type: ignore[no-untyped-call]  # numba's is unannotated

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        address, vector = _vector_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1], n)
        loaded = builder.load(address, align=n * context.get_abi_sizeof(vector.element))  # type: ignore[no-untyped-call]  # numba's is unannotated
        items = [builder.extract_element(loaded, ir.Constant(ir.IntType(32), k)) for k in range(n)]
        return context.make_tuple(builder, result, items)  # type: ignore[no-untyped-call]  # numba's is unannotated

    return result(ptr, types.unliteral(index), width), codegen  # type: ignore[no-untyped-call]  # numba's is unannotated


@intrinsic(prefer_literal=True)
def _vstore(typingctx: TypingContext, ptr: types.Type, values: types.Type, index: types.Type) -> _Typed:
    if not (
        isinstance(ptr, PtrType)
        and isinstance(index, types.Integer)
        and isinstance(values, types.BaseTuple)
        and len(values) in (2, 4, 8, 16)
        and all(isinstance(t, types.Number) for t in values)  # type: ignore[attr-defined]  # each BaseTuple iterates
    ):
        return None
    n = len(values)

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        ptr_type, values_type, index_type = sig.args
        address, vector = _vector_pointer(context, builder, ptr_type, args[0], index_type, args[2], n)
        items = cgutils.unpack_tuple(builder, args[1], n)  # type: ignore[no-untyped-call]  # numba's is unannotated
        packed = ir.Constant(vector, ir.Undefined)
        for k, (ty, item) in enumerate(zip(values_type, items)):
            packed = builder.insert_element(
                packed,
                context.cast(builder, item, ty, ptr_type.dtype),  # type: ignore[no-untyped-call]  # numba's is unannotated
                ir.Constant(ir.IntType(32), k),
            )
        builder.store(packed, address, align=n * context.get_abi_sizeof(vector.element))  # type: ignore[no-untyped-call]  # numba's is unannotated
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.void(ptr, values, types.unliteral(index)), codegen  # type: ignore[no-untyped-call]  # numba's is unannotated


def _vload_host(ptr: Pointer, i: int, width: int) -> tuple[Any, ...]:
    """Elements ``width*i`` ... ``width*i + width - 1`` of ``ptr`` as a tuple, in one aligned vector load inside
    kernels (``width`` a constant 2, 4, 8 or 16; the address must be aligned to the vector's size)."""
    return tuple(ptr._host_view()[width * i : width * (i + 1)])


def _vstore_host(ptr: Pointer, values: tuple[object, ...], i: int) -> None:
    """Store the tuple ``values`` at elements ``len(values)*i`` onwards, in one aligned vector store inside
    kernels."""
    n = len(values)
    ptr._host_view()[n * i : n * (i + 1)] = values


vload = Intrinsic(_vload_host, _vload)
vstore = Intrinsic(_vstore_host, _vstore)


# --- printing -------------------------------------------------------------------------------------------


class PrintLowering(typing.Protocol):
    """How a target's code prints: its string constants, its printf (C's, CUDA's vprintf), and values of the
    types only it prints (``printable``: numba-cuda's ``dim3`` on CUDA)."""

    printable: tuple[type, ...]  # numba type classes of values only this target prints (``item``)

    def item(
        self, context: BaseContext, builder: ir.IRBuilder, ty: types.Type, value: ir.Value
    ) -> tuple[str, list[ir.Value]]:
        """The printf conversions and values of a value of one of the ``printable`` types."""

    def string(self, context: BaseContext, builder: ir.IRBuilder, text: str) -> ir.Value:
        """A pointer to the constant C string ``text``."""

    def printf(self, context: BaseContext, builder: ir.IRBuilder, fmt: str, values: list[ir.Value]) -> None:
        """Print ``values`` (promoted as C varargs are) with the format ``fmt``."""


# numba's target context class -> how code it lowers prints (each target registers its own)
_print_lowerings: dict[type, PrintLowering] = {}
runtime.register_cache(
    f"{__name__}._print_lowerings", _print_lowerings, kept="what each target registered when imported"
)


def register_print_lowering(context_class: type, lowering: PrintLowering) -> None:
    """Print with ``lowering`` in the code numba's target context ``context_class`` lowers (a target's)."""
    _print_lowerings[context_class] = lowering


def _print_lowering(context: BaseContext) -> PrintLowering:
    for cls in type(context).__mro__:
        lowering = _print_lowerings.get(cls)
        if lowering is not None:
            return lowering
    raise TypeError(f"no target lowers od.cuprintln for numba's {type(context).__name__}")


def _format_item(
    context: BaseContext, builder: ir.IRBuilder, ty: types.Type, value: ir.Value, lowering: PrintLowering
) -> tuple[str, list[ir.Value]]:
    """(printf conversions, promoted values) for one argument of cuprintln: a tuple as Python prints it,
    ``(1, 2.5)``, its items formatted each; a type only the target prints by its lowering."""
    if isinstance(ty, types.StringLiteral):
        return ty.literal_value.replace("%", "%%"), []
    if isinstance(ty, types.Boolean):
        flag = context.cast(builder, value, ty, types.boolean)  # type: ignore[no-untyped-call]  # numba's is unannotated
        yes, no = lowering.string(context, builder, "True"), lowering.string(context, builder, "False")
        return "%s", [builder.select(flag, yes, no)]
    if isinstance(ty, types.Integer):
        signed: bool = ty.signed  # type: ignore[attr-defined]  # numba's stub of Integer omits it
        wide = types.int64 if signed else types.uint64
        return ("%lld" if signed else "%llu"), [context.cast(builder, value, ty, wide)]  # type: ignore[no-untyped-call]  # numba's is unannotated
    if isinstance(ty, types.Float):
        # numba-cuda's form, "%f" (3.0 prints 3.000000); C varargs promote floats to double
        return "%f", [context.cast(builder, value, ty, types.float64)]  # type: ignore[no-untyped-call]  # numba's is unannotated
    if isinstance(ty, types.BaseTuple):
        formats, values = [], []
        for k, item_type in enumerate(typing.cast(typing.Any, ty).types):  # each tuple type has its items'
            conversion, promoted = _format_item(context, builder, item_type, builder.extract_value(value, k), lowering)
            formats.append(conversion)
            values += promoted
        return ("({},)" if len(formats) == 1 else "({})").format(", ".join(formats)), values
    return lowering.item(context, builder, ty, value)


def _printable(ty: types.Type) -> bool:
    """Can cuprintln print a value of ``ty``: a string constant, a number, a bool, a tuple of them, or a type
    a target's lowering prints (numba-cuda's ``dim3`` on CUDA)?"""
    if isinstance(ty, (types.StringLiteral, types.Integer, types.Float, types.Boolean)):
        return True
    if isinstance(ty, types.BaseTuple):
        return all(_printable(item) for item in typing.cast(typing.Any, ty).types)
    return any(isinstance(ty, lowering.printable) for lowering in _print_lowerings.values())


class LaunchNeed(enum.Enum):
    """What a kernel's code (or a callee's) needs of each of its launches, recorded at its code generation in
    the ``needs`` of the kernel being built (which its callers inherit, and the disk cache stores)."""

    FLUSH_STDOUT = "printf on the host"
    """It calls C's printf: its launch flushes stdout when it ends."""


@intrinsic(prefer_literal=True)
def _println(typingctx: TypingContext, *args: types.Type) -> _Typed:
    if not all(_printable(a) for a in args):
        return None
    sig = types.void(types.StarArgTuple.from_types(args))  # type: ignore[no-untyped-call]  # numba's is unannotated

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, llargs: Sequence[ir.Value]) -> ir.Value:
        tuple_type = sig.args[0]
        items = cgutils.unpack_tuple(builder, llargs[0], len(tuple_type))  # type: ignore[no-untyped-call]  # numba's is unannotated
        lowering = _print_lowering(context)
        parts: list[str] = []
        values: list[ir.Value] = []
        for ty, value in zip(tuple_type.types, items):
            conversion, promoted = _format_item(context, builder, ty, value, lowering)
            parts.append(conversion)
            values += promoted
        lowering.printf(context, builder, " ".join(parts) + "\n", values)
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return sig, codegen


def _cuprintln_host(*args: object) -> None:
    """Print the arguments space-separated with a newline: device printf inside kernels (ints, floats,
    bools and string constants), Python's print on the host."""
    print(*args)


cuprintln = Intrinsic(_cuprintln_host, _println)


# --- a launch's state -----------------------------------------------------------------------------------
# Every function compiled for a launch with state takes the state as a hidden first parameter, and passes
# its own to each function it calls (overdub.rewrite, overdub.bridge.hidden.HiddenArgumentCall). od.state()'s device
# function is the one that takes it as a parameter of its own: it returns it.


def _state_device(state: object) -> object:
    return state


_state_device.__overdub_takes_state__ = True  # type: ignore[attr-defined]  # a function takes any attribute


def _state_host() -> typing.NoReturn:
    """The state passed by the launch (``od.cuda(..., context=ctx, state=value)``), inside the kernel, its
    callees and the context's overdubs and hooks; its type is the launch's value's (one compile per state
    type, whatever the value). Compiling a call of it for a launch without state is an error."""
    raise RuntimeError(
        "od.state() is the state of a launch: it can only be called inside a kernel launched with "
        "od.cuda(..., context=ctx, state=value), or in the functions that kernel calls"
    )


state = Intrinsic(_state_host, _state_device)
