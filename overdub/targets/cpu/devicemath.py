"""The math intrinsics of numba-cuda's kernels as CPU code: ``cuda.fma``, ``cuda.cbrt``, the bit intrinsics
(``cuda.popc``, ``cuda.brev``, ``cuda.clz``, ``cuda.ffs``), ``cuda.selp``, the memory fences and
``cuda.nanosleep`` (:data:`STUBS`); and the code that libdevice's and ``cuda.fp16``'s functions run
(:mod:`.libdevice` and :mod:`.half` say which is which).

numba-cuda lowers them to NVVM intrinsics and libdevice, which numba's CPU target has neither of: ``cuda.fma``
was an unknown attribute on the CPU target. The CPU target's root replaces each of these ``cuda`` stubs with an
intrinsic of :data:`STUBS` (target.py), typed as numba-cuda types it. Each building block below is a
``codegen(context, builder, sig, args)``, its arguments already converted to ``sig.args``: the GPU's answer
where it is exact (bits, integers, rounding, reinterpretation, conversions saturating as ``cvt`` does,
:mod:`.conversions`), the C library's function where the GPU's is an approximation (``exp``, ``lgamma``), as
numba's own ``math`` functions call it. :func:`typed_as` and :func:`refused` type the intrinsics made of them:
with one signature, or as an error naming the function the CPU target cannot run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.extending import intrinsic, overload_method

from ...bridge.calls import call_sites
from .conversions import saturating
from .sync import namespace

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

# what an intrinsic's typing answers: the call's signature and its code generator, or None (no such call)
_Typed: TypeAlias = "tuple[Signature, Codegen] | None"
Codegen: TypeAlias = "Callable[..., ir.Value]"
"""A building block: ``codegen(context, builder, sig, args)``, as numba's intrinsics and lowerings take it."""
Typing: TypeAlias = "Callable[[TypingContext, tuple[types.Type, ...]], _Typed]"
"""The typing of a stand-in: a signature and its codegen for the argument types (or an error)."""
_SignatureOf: TypeAlias = "Callable[[tuple[types.Type, ...]], _Typed]"


# --- building blocks: each a codegen(context, builder, sig, args), its arguments cast to sig.args ----------


def _fnty(result: ir.Type, args: Sequence[ir.Value]) -> ir.FunctionType:
    return ir.FunctionType(result, [a.type for a in args])


def _constant(like: ir.Value, value: float) -> ir.Constant:
    return ir.Constant(like.type, value)


def llvm_intrinsic(name: str) -> Codegen:
    """The LLVM intrinsic ``llvm.<name>`` of the arguments' type."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        llty = args[0].type
        return builder.call(builder.module.declare_intrinsic(f"llvm.{name}", [llty], _fnty(llty, args)), args)

    return codegen


def c_function(name: str) -> Codegen:
    """The C library's function ``name`` (the process's libm, as numba's own ``math`` functions call it)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        fnty = _fnty(context.get_value_type(sig.return_type), args)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), args)  # type: ignore[no-untyped-call]  # numba's is unannotated

    return codegen


def libm(name: str) -> Codegen:
    """The C library's ``name`` of the arguments' type, that of the result: ``sin`` of a double, ``sinf`` of a
    float."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        suffix = "f" if isinstance(args[0].type, ir.FloatType) else ""
        fnty = ir.FunctionType(args[0].type, [a.type for a in args])
        return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name + suffix), args)  # type: ignore[no-untyped-call]  # numba's is unannotated

    return codegen


def c_with_outputs(name: str) -> Codegen:
    """A C function giving more results through pointers (``frexp``, ``modf``, ``remquo``): ``(result, *more)``."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        result_type, *output_types = sig.return_type.types
        outputs = [cgutils.alloca_once(builder, context.get_value_type(t)) for t in output_types]  # type: ignore[no-untyped-call]  # numba's is unannotated
        fnty = ir.FunctionType(context.get_value_type(result_type), [a.type for a in args] + [p.type for p in outputs])  # type: ignore[no-untyped-call]  # numba's is unannotated
        result = builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), [*args, *outputs])  # type: ignore[no-untyped-call]  # numba's is unannotated
        return context.make_tuple(builder, sig.return_type, [result, *map(builder.load, outputs)])  # type: ignore[no-untyped-call]  # numba's is unannotated

    return codegen


def _call(codegen: Codegen, builder: ir.IRBuilder, *args: ir.Value) -> ir.Value:
    """A building block that reads only its arguments, called on ``args``."""
    return codegen(None, builder, None, list(args))


def pair(first: Codegen, second: Codegen) -> Codegen:
    """Two results of one argument as a tuple (``sincos``: ``(sin(x), cos(x))``)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        return context.make_tuple(  # type: ignore[no-untyped-call]  # numba's is unannotated
            builder, sig.return_type, [_call(first, builder, *args), _call(second, builder, *args)]
        )

    return codegen


def reciprocal_of(inner: Codegen | None = None) -> Codegen:
    """1 / inner(x) (1 / x without ``inner``)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        (x,) = args
        return builder.fdiv(_constant(x, 1.0), x if inner is None else _call(inner, builder, x))

    return codegen


def exp10(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    (x,) = args
    return _call(libm("pow"), builder, _constant(x, 10.0), x)


def powi(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    x, n = args
    return _call(libm("pow"), builder, x, builder.sitofp(n, x.type))


def normcdf(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """0.5 erfc(-x / sqrt(2))."""
    (x,) = args
    return builder.fmul(_constant(x, 0.5), _call(libm("erfc"), builder, builder.fmul(x, _constant(x, -math.sqrt(0.5)))))


def sinpi(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """sin(pi x), of x reduced to [-1, 1] exactly (IEEE remainder by 2); a signed zero at the integers."""
    (x,) = args
    r = _call(libm("remainder"), builder, x, _constant(x, 2.0))
    value = _call(libm("sin"), builder, builder.fmul(r, _constant(x, math.pi)))
    integral = builder.fcmp_ordered("==", r, _call(llvm_intrinsic("trunc"), builder, r))
    return builder.select(integral, _call(llvm_intrinsic("copysign"), builder, _constant(x, 0.0), x), value)


def cospi(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """cos(pi x), of x reduced to [0, 1] exactly; zero at the odd multiples of 1/2."""
    (x,) = args
    r = _call(llvm_intrinsic("fabs"), builder, _call(libm("remainder"), builder, x, _constant(x, 2.0)))
    value = _call(libm("cos"), builder, builder.fmul(r, _constant(x, math.pi)))
    return builder.select(builder.fcmp_ordered("==", r, _constant(x, 0.5)), _constant(x, 0.0), value)


def saturatef(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """x clamped to [0, 1]; NaN gives 0 (PTX ``cvt.sat``)."""
    (x,) = args
    low = builder.select(builder.fcmp_ordered(">", x, _constant(x, 0.0)), x, _constant(x, 0.0))
    return builder.select(builder.fcmp_ordered("<", low, _constant(x, 1.0)), low, _constant(x, 1.0))


def int_result(test: Callable[[ir.IRBuilder, ir.Value], ir.Value]) -> Codegen:
    """A predicate of a float as libdevice's int32: 1 or 0."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        return builder.zext(test(builder, args[0]), ir.IntType(32))

    return codegen


def is_nan(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return builder.fcmp_unordered("uno", x, x)


def is_inf(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return builder.fcmp_ordered("==", _call(llvm_intrinsic("fabs"), builder, x), _constant(x, math.inf))


def is_finite(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return builder.fcmp_ordered("<", _call(llvm_intrinsic("fabs"), builder, x), _constant(x, math.inf))


def sign_bit(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    bits = ir.IntType(32 if isinstance(x.type, ir.FloatType) else 64)
    return builder.icmp_signed("<", builder.bitcast(x, bits), bits(0))


# --- integers -------------------------------------------------------------------------------------------


def _widened(builder: ir.IRBuilder, args: Sequence[ir.Value], bits: int, signed: bool) -> list[ir.Value]:
    extend = builder.sext if signed else builder.zext
    return [extend(a, ir.IntType(bits)) for a in args]


def high_product(signed: bool) -> Codegen:
    """The high half of the double-width product (``mulhi``, ``umul64hi``...)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        width = args[0].type.width
        a, b = _widened(builder, args, 2 * width, signed)
        product = builder.mul(a, b)
        shifted = builder.ashr(product, product.type(width)) if signed else builder.lshr(product, product.type(width))
        return builder.trunc(shifted, args[0].type)

    return codegen


def halving_add(signed: bool, rounded: bool) -> Codegen:
    """(x + y) >> 1 (``+ 1`` first where ``rounded``), without overflow (``hadd``, ``urhadd``...)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        a, b = _widened(builder, args, 64, signed)
        total = builder.add(builder.add(a, b), a.type(int(rounded)))
        half = builder.ashr(total, a.type(1)) if signed else builder.lshr(total, a.type(1))
        return builder.trunc(half, args[0].type)

    return codegen


def mul24(signed: bool) -> Codegen:
    """The low 32 bits of the product of the low 24 bits of x and y."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        i32 = ir.IntType(32)
        if signed:
            low = [builder.ashr(builder.shl(a, i32(8)), i32(8)) for a in args]
        else:
            low = [builder.and_(a, i32(0xFFFFFF)) for a in args]
        return builder.mul(*low)

    return codegen


def sad(signed: bool) -> Codegen:
    """|x - y| + z."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        x, y, z = args
        less = builder.icmp_signed("<", x, y) if signed else builder.icmp_unsigned("<", x, y)
        return builder.add(builder.select(less, builder.sub(y, x), builder.sub(x, y)), z)

    return codegen


def extreme(predicate: str, signed: bool) -> Codegen:
    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        x, y = args
        compare = builder.icmp_signed if signed else builder.icmp_unsigned
        return builder.select(compare(predicate, x, y), x, y)

    return codegen


def integer_abs(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    (x,) = args
    return builder.select(builder.icmp_signed("<", x, x.type(0)), builder.neg(x), x)


def bit_count(name: str) -> Codegen:
    """A count of bits, as libdevice's int32: ``ctpop``, ``ctlz`` (32 or 64 for zero)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        (x,) = args
        flag = [] if name == "ctpop" else [ir.IntType(1)(0)]
        fnty = ir.FunctionType(x.type, [x.type] + [f.type for f in flag])
        count = builder.call(builder.module.declare_intrinsic(f"llvm.{name}", [x.type], fnty), [x, *flag])
        return builder.trunc(count, ir.IntType(32)) if x.type.width > 32 else count

    return codegen


def ffs(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """The 1-based position of the lowest set bit; 0 for zero."""
    (x,) = args
    fnty = ir.FunctionType(x.type, [x.type, ir.IntType(1)])
    trailing = builder.call(builder.module.declare_intrinsic("llvm.cttz", [x.type], fnty), [x, ir.IntType(1)(0)])
    position = builder.select(builder.icmp_unsigned("==", x, x.type(0)), x.type(0), builder.add(trailing, x.type(1)))
    if x.type.width == 32:
        return position
    return builder.trunc(position, ir.IntType(32)) if x.type.width > 32 else builder.zext(position, ir.IntType(32))


def brev(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    return llvm_intrinsic("bitreverse")(context, builder, sig, args)


def byte_perm(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """Byte n of the result is byte ``(s >> 4n) & 7`` of the eight bytes of ``y:x``."""
    x, y, s = args
    i64 = ir.IntType(64)
    source = builder.or_(builder.shl(builder.zext(y, i64), i64(32)), builder.zext(x, i64))
    result = ir.IntType(32)(0)
    for n in range(4):
        selector = builder.and_(builder.lshr(s, s.type(4 * n)), s.type(7))
        shift = builder.zext(builder.mul(selector, s.type(8)), i64)
        byte = builder.and_(builder.trunc(builder.lshr(source, shift), ir.IntType(32)), ir.IntType(32)(0xFF))
        result = builder.or_(result, builder.shl(byte, ir.IntType(32)(8 * n)))
    return result


def bitcast(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    return builder.bitcast(args[0], context.get_value_type(sig.return_type))  # type: ignore[no-untyped-call]  # numba's is unannotated


def double_half(high: bool) -> Codegen:
    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        bits = builder.bitcast(args[0], ir.IntType(64))
        return builder.trunc(builder.lshr(bits, ir.IntType(64)(32)) if high else bits, ir.IntType(32))

    return codegen


def hiloint2double(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    i64 = ir.IntType(64)
    high, low = (builder.zext(a, i64) for a in args)
    return builder.bitcast(builder.or_(builder.shl(high, i64(32)), low), ir.DoubleType())


# --- conversions and arithmetic rounded to nearest -------------------------------------------------------


def to_integer(rounding: str, toty: types.Integer) -> Codegen:
    """Rounded as ``rounding`` says, then converted as ``cvt`` converts: saturating, NaN as the GPU gives it."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        rounded = llvm_intrinsic(rounding)(context, builder, sig, args)
        return saturating(builder, rounded, sig.args[0], toty)

    return codegen


def to_float(signed: bool) -> Codegen:
    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        convert = builder.sitofp if signed else builder.uitofp
        return convert(args[0], context.get_value_type(sig.return_type))  # type: ignore[no-untyped-call]  # numba's is unannotated

    return codegen


def arithmetic(operation: str) -> Codegen:
    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        result: ir.Value = getattr(builder, operation)(*args)
        return result

    return codegen


def float2half_rn(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))


def half2float(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())


def double2float_rn(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    return builder.fptrunc(args[0], ir.FloatType())


# --- typing: the intrinsics of the CPU target's stand-ins ------------------------------------------------


def typed_as(label: str, sig: Signature, codegen: Codegen) -> Typing:
    """The typing of ``label`` with the one signature ``sig``: arguments that convert to its parameters."""

    def typed(typingctx: TypingContext, args: tuple[types.Type, ...]) -> _Typed:
        if len(args) != len(sig.args) or any(typingctx.can_convert(a, p) is None for a, p in zip(args, sig.args)):  # type: ignore[no-untyped-call]  # numba's is unannotated
            raise TypingError(f"{label} takes ({', '.join(map(str, sig.args))}), not ({', '.join(map(str, args))})")
        return sig, codegen

    return typed


def refused(label: str, why: str) -> Typing:
    """The typing of ``label``, which the CPU target cannot run: an error naming it, the kernel's line and the
    way out."""

    def typed(typingctx: TypingContext, args: tuple[types.Type, ...]) -> _Typed:
        sites = call_sites()
        where = f" (at {sites[0]})" if sites else ""
        raise TypingError(
            f"{label} cannot run on the CPU target: {why}{where}. Launch the kernel with target='cuda', or compute "
            f"it another way where the kernel runs on the CPU"
        )

    return typed


def fixed_arity_intrinsic(module: str, qualname: str, arity: int, typed: Typing) -> Any:  # a numba intrinsic
    """An intrinsic of ``arity`` parameters (numba's intrinsics take no ``*args``) typed by ``typed``, found in
    another process (by the disk cache) as ``module`` + ``qualname``."""

    def nullary(typingctx: TypingContext) -> _Typed:
        return typed(typingctx, ())

    def unary(typingctx: TypingContext, x: types.Type) -> _Typed:
        return typed(typingctx, (x,))

    def binary(typingctx: TypingContext, x: types.Type, y: types.Type) -> _Typed:
        return typed(typingctx, (x, y))

    def ternary(typingctx: TypingContext, x: types.Type, y: types.Type, z: types.Type) -> _Typed:
        return typed(typingctx, (x, y, z))

    definition = (nullary, unary, binary, ternary)[arity]
    definition.__name__ = qualname.rpartition(".")[2]
    definition.__module__, definition.__qualname__ = module, qualname
    return intrinsic(definition)


# --- the cuda.* stubs -------------------------------------------------------------------------------------


def _stub(name: str, arity: int, signature_of: _SignatureOf) -> Any:  # a numba intrinsic
    """``cuda.<name>`` typed by ``signature_of(args)`` (a signature and its codegen, or None: not these types)."""

    def typed(typingctx: TypingContext, args: tuple[types.Type, ...]) -> _Typed:
        found = signature_of(args) if len(args) == arity else None
        if found is None:
            raise TypingError(f"cuda.{name} does not take ({', '.join(map(str, args))})")
        return found

    return fixed_arity_intrinsic(__name__, f"STUBS.{name}", arity, typed)


def _floats(codegen: Codegen) -> _SignatureOf:
    """float32 where every argument is one, else float64 (numba-cuda's cases: the two float types)."""

    def signature_of(args: tuple[types.Type, ...]) -> _Typed:
        if not all(isinstance(a, (types.Float, types.Integer, types.Boolean)) for a in args):
            return None
        result = types.float32 if all(a == types.float32 for a in args) else types.float64
        return result(*[result] * len(args)), codegen

    return signature_of


def _integer(result_of: Callable[[types.Integer], types.Type], codegen: Codegen) -> _SignatureOf:
    def signature_of(args: tuple[types.Type, ...]) -> _Typed:
        if not isinstance(args[0], types.Integer):
            return None
        return result_of(args[0])(args[0]), codegen

    return signature_of


def _selp(args: tuple[types.Type, ...]) -> _Typed:
    _, a, b = args
    if a != b or not isinstance(a, (types.Integer, types.Float)) or a.bitwidth < 16:  # type: ignore[union-attr]  # numba's stub of Integer omits it
        return None
    return a(types.boolean, a, a), lambda context, builder, sig, args: builder.select(*args)


def _width(bits: int) -> types.Integer:
    return types.uint32 if bits <= 32 else types.uint64


def _clz(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    return builder.ctlz(args[0], ir.IntType(1)(0))


def _brev(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """Of the argument as an unsigned integer of 32 or 64 bits (the return type)."""
    return brev(context, builder, sig, [context.cast(builder, args[0], sig.args[0], sig.return_type)])  # type: ignore[no-untyped-call]  # numba's is unannotated


def _ffs(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """Of the argument as an integer of 32 or 64 bits."""
    return ffs(context, builder, sig, [context.cast(builder, args[0], sig.args[0], _width(sig.args[0].bitwidth))])  # type: ignore[no-untyped-call]  # numba's is unannotated


def _fence_codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    builder.fence("seq_cst")
    return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated


def _fence(args: tuple[types.Type, ...]) -> _Typed:
    """``cuda.threadfence`` (and ``_block``, ``_system``): a sequentially consistent fence, which orders a
    thread's memory accesses for every other thread of the process, as each of CUDA's does for its scope."""
    return types.none(), _fence_codegen


def _nanosleep(args: tuple[types.Type, ...]) -> _Typed:
    """``cuda.nanosleep(ns)``: a sleep of about ``ns``, which CUDA bounds by [0, 2 ns]: none."""
    if not isinstance(args[0], types.Integer):
        return None
    return types.none(types.uint32), lambda context, builder, sig, args: context.get_dummy_value()


STUB_NAMES: tuple[str, ...] = ("fma", "cbrt", "popc", "clz", "brev", "ffs", "selp")
STUB_NAMES += ("threadfence", "threadfence_block", "threadfence_system", "nanosleep")
STUBS = namespace(
    "stubs",
    fma=_stub("fma", 3, _floats(llvm_intrinsic("fma"))),
    cbrt=_stub("cbrt", 1, _floats(libm("cbrt"))),
    popc=_stub("popc", 1, _integer(lambda t: t, llvm_intrinsic("ctpop"))),
    clz=_stub("clz", 1, _integer(lambda t: t, _clz)),
    brev=_stub("brev", 1, _integer(lambda t: _width(t.bitwidth), _brev)),  # type: ignore[attr-defined]  # numba's stub of Integer omits it
    ffs=_stub("ffs", 1, _integer(lambda t: types.uint32, _ffs)),
    selp=_stub("selp", 3, _selp),
    threadfence=_stub("threadfence", 0, _fence),
    threadfence_block=_stub("threadfence_block", 0, _fence),
    threadfence_system=_stub("threadfence_system", 0, _fence),
    nanosleep=_stub("nanosleep", 1, _nanosleep),
)
"""``cuda.fma``, ``cuda.cbrt``, ``cuda.popc``, ``cuda.clz``, ``cuda.brev``, ``cuda.ffs``, ``cuda.selp``, the
memory fences and ``cuda.nanosleep`` inside a CPU-target kernel (target.py replaces numba-cuda's stubs with
them)."""


@overload_method(types.Integer, "bit_count", target="cpu")
def _bit_count(i):  # type: ignore[no-untyped-def]  # numba compares the parameters with the implementation's
    """``i.bit_count()``, which numba-cuda gives kernels: ``cuda.popc(i)`` (the bits of its two's complement)."""
    popc = STUBS.popc
    return lambda i: popc(i)
