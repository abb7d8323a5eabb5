"""The CPU target: numba machine code, with the whole grid run by a compiled loop.

A launch runs every block and, within each, every thread, one after another, in a loop compiled together
with the kernel (so LLVM can inline the kernel into it). The CUDA kernel idiom -- ``cuda.grid``,
``cuda.threadIdx`` and friends -- reads a small grid state that the loop writes: twelve int64 slots at an
address baked into the code. Compiled code holds the GIL, so launches never overlap.

Barriers and shared memory cannot be honoured by threads that run one after another; a kernel using them is
rejected at compile time with an error naming the construct.
"""
from __future__ import annotations

import copy
import ctypes
import itertools
import secrets
import sys
import types as pytypes

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import cuda as numba_cuda
from numba.core import bytecode, cgutils, config, types
from numba.core.compiler import CompileResult
from numba.core.compiler_lock import global_compiler_lock
from numba.core.environment import Environment
from numba.core.extending import intrinsic, models, register_model, typeof_impl
from numba.core.registry import cpu_target
from numba.core.imputils import lower_constant, lower_getattr
from numba.core.typing.templates import AttributeTemplate, infer_getattr

from .. import arguments, bridge, world
from ..context import CPU, TargetRoot
from ..intrinsics import cuprintln
from ..types import typeof
from . import cpu_checks, launchfn
from .options import CompileOptions, Configurable

# --- grid state -----------------------------------------------------------------------------------------
# slots: threadIdx.xyz 0-2, blockIdx.xyz 3-5, blockDim.xyz 6-8, gridDim.xyz 9-11
#
# The kernel is inlined (at numba IR level) into the grid loop, so the reads in its own body find the grid
# loop's local copy of the state, which LLVM keeps in registers: thread indices are plain loop variables
# there, and the loops vectorise. Callees compiled on their own read the state from twelve int64 slots at
# a symbol (so that code loaded from the disk cache finds this process's state); a kernel that reaches such a
# callee "needs" the state in memory, and only then does its grid loop store it there as well.

_GRID_STATE = np.zeros(12, dtype=np.int64)
_GRID_STATE_SYMBOL = "overdub_grid_state"
llvm.add_symbol(_GRID_STATE_SYMBOL, _GRID_STATE.ctypes.data)
_I64 = ir.IntType(64)
_LOCAL_STATE = "overdub.grid_state"
NEEDS_GRID_STATE = "grid state in memory"


def _global_slot(builder, slot: int):
    module = builder.module
    try:
        state = module.get_global(_GRID_STATE_SYMBOL)
    except KeyError:
        state = ir.GlobalVariable(module, ir.ArrayType(_I64, 12), _GRID_STATE_SYMBOL)    # external: the symbol
    return _local_slot(builder, state, slot)


def _local_state(builder):
    """The grid loop's local copy of the state, when the code being generated is inlined in a grid loop."""
    for instruction in builder.function.entry_basic_block.instructions:
        if instruction.name == _LOCAL_STATE:
            return instruction
    return None


def _local_slot(builder, state, slot: int):
    return builder.gep(state, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), slot)])


@intrinsic
def _set_slot(typingctx, slot, value):
    if not isinstance(slot, types.IntegerLiteral):
        return None
    index = slot.literal_value

    def codegen(context, builder, sig, args):
        value = context.cast(builder, args[1], sig.args[1], types.int64)
        state = _local_state(builder) or cgutils.alloca_once(builder, ir.ArrayType(_I64, 12), name=_LOCAL_STATE)
        builder.store(value, _local_slot(builder, state, index))
        built = world.being_built()
        if built is not None and NEEDS_GRID_STATE in built.needs:
            builder.store(value, _global_slot(builder, index))
        return context.get_dummy_value()
    return types.void(slot, types.unliteral(value)), codegen


def _read_slot(builder, slot: int):
    state = _local_state(builder)
    if state is not None:
        return builder.load(_local_slot(builder, state, slot))
    built = world.being_built()
    if built is not None:
        built.needs.add(NEEDS_GRID_STATE)
    return builder.load(_global_slot(builder, slot))


class Dim3Type(types.Type):
    """``threadIdx`` / ``blockIdx`` / ``blockDim`` / ``gridDim`` on the CPU: x, y, z read the grid state."""

    def __init__(self, first_slot: int, name: str):
        self.first_slot = first_slot
        super().__init__(name=f"cpu.{name}")


class _Dim3:
    def __init__(self, first_slot: int, name: str):
        self.type = Dim3Type(first_slot, name)


@typeof_impl.register(_Dim3)
def _typeof_dim3(value, c):
    return value.type


register_model(Dim3Type)(models.OpaqueModel)


@lower_constant(Dim3Type)
def _lower_dim3(context, builder, ty, pyval):
    return context.get_dummy_value()


@infer_getattr
class _Dim3Attributes(AttributeTemplate):
    key = Dim3Type

    def generic_resolve(self, typ, attr):
        if attr in ("x", "y", "z"):
            return types.int32


def _dim3_component(offset: int):
    def lower(context, builder, typ, value):
        return builder.trunc(_read_slot(builder, typ.first_slot + offset), ir.IntType(32))
    return lower


for _offset, _attr in enumerate("xyz"):
    lower_getattr(Dim3Type, _attr)(_dim3_component(_offset))


def _grid_type(ndim):
    if not isinstance(ndim, types.IntegerLiteral) or ndim.literal_value not in (1, 2, 3):
        return None
    n = ndim.literal_value
    return types.int64 if n == 1 else types.UniTuple(types.int64, n)


def _tuple_or_scalar(context, builder, restype, values):
    if restype == types.int64:
        return values[0]
    return context.make_tuple(builder, restype, values)


def _grid_intrinsic(name: str, per_dimension):
    """An intrinsic ``name(ndim)`` (``ndim`` a constant 1, 2 or 3) returning ``per_dimension(builder, d)`` for
    each dimension: an int64 for one dimension, a tuple for more, as ``cuda.grid`` and ``cuda.gridsize``."""
    def grid_function(typingctx, ndim):
        restype = _grid_type(ndim)
        if restype is None:
            return None

        def codegen(context, builder, sig, args):
            values = [per_dimension(builder, d) for d in range(ndim.literal_value)]
            return _tuple_or_scalar(context, builder, sig.return_type, values)
        return restype(ndim), codegen
    grid_function.__name__ = grid_function.__qualname__ = name
    return intrinsic(grid_function)


# no signed wrap: lets LLVM see indices are non-negative and drop numba's negative-index handling
_grid = _grid_intrinsic("grid", lambda builder, d: builder.add(
    builder.mul(_read_slot(builder, 3 + d), _read_slot(builder, 6 + d), flags=["nsw"]),
    _read_slot(builder, d), flags=["nsw"]))
_gridsize = _grid_intrinsic("gridsize", lambda builder, d: builder.mul(
    _read_slot(builder, 6 + d), _read_slot(builder, 9 + d), flags=["nsw"]))


class UnsupportedOnCPU(TypeError):
    """A kernel uses a construct the CPU target cannot run correctly (a barrier, shared memory)."""


def _unsupported(construct: str, why: str):
    @intrinsic
    def reject(typingctx, *args):
        sites = bridge.call_sites()
        where = f" (at {sites[0]})" if sites else ""
        raise UnsupportedOnCPU(f"{construct} is not supported on the CPU target{where}: {why}; "
                               f"launch on the CUDA target instead")
    return reject


_NO_BARRIERS = "the CPU target runs a block's threads one after another, so no thread can wait for another"


# the atomics: threads never overlap on the CPU, so a read-modify-write is atomic as it stands
def _atomic_add(ary, idx, val):
    old = ary[idx]
    ary[idx] = old + val
    return old


def _atomic_sub(ary, idx, val):
    old = ary[idx]
    ary[idx] = old - val
    return old


def _atomic_max(ary, idx, val):
    old = ary[idx]
    ary[idx] = max(old, val)
    return old


def _atomic_min(ary, idx, val):
    old = ary[idx]
    ary[idx] = min(old, val)
    return old


def _atomic_exch(ary, idx, val):
    old = ary[idx]
    ary[idx] = val
    return old


def _atomic_cas(ary, idx, old, val):
    current = ary[idx]
    if current == old:
        ary[idx] = val
    return current


def _literal_shape(shape) -> tuple[int, ...] | None:
    items = shape.types if isinstance(shape, types.BaseTuple) else (shape,)
    values = tuple(getattr(t, "literal_value", None) for t in items)
    return values if all(isinstance(v, int) and v >= 0 for v in values) else None


@intrinsic(prefer_literal=True)
def _local_array(typingctx, shape, dtype):
    """``cuda.local.array(shape, dtype)`` on the CPU: per-thread storage on the stack, like the GPU's local
    memory (kernels are compiled without numba's runtime, so nothing is heap-allocated)."""
    dims = _literal_shape(shape)
    element = getattr(dtype, "dtype", None)
    if dims is None or not isinstance(element, (types.Number, types.Boolean)):
        return None
    array_type = types.Array(element, len(dims), "C")

    def codegen(context, builder, sig, args):
        data_type = context.get_data_type(element)
        itemsize = context.get_abi_sizeof(data_type)
        count = 1
        for extent in dims:
            count *= extent
        data = cgutils.alloca_once(builder, data_type, size=max(count, 1))
        strides, step = [], itemsize
        for extent in reversed(dims):
            strides.append(step)
            step *= extent
        intp = context.get_value_type(types.intp)
        array = context.make_array(array_type)(context, builder)
        context.populate_array(array, data=data, shape=[intp(d) for d in dims],
                               strides=[intp(st) for st in reversed(strides)], itemsize=intp(itemsize),
                               meminfo=None)
        return array._getvalue()
    return array_type(shape, dtype), codegen


def _namespace(name: str, **members) -> pytypes.ModuleType:
    """A module of the kernel idiom, importable by its name (the disk cache finds the globals a kernel read
    through it by that name)."""
    module = pytypes.ModuleType(f"overdub.targets.cpu.{name}")
    vars(module).update(members)
    sys.modules[module.__name__] = module
    return module


CUDA_IDIOM = _namespace(
    "cuda",
    grid=_grid, gridsize=_gridsize,
    threadIdx=_Dim3(0, "threadIdx"), blockIdx=_Dim3(3, "blockIdx"),
    blockDim=_Dim3(6, "blockDim"), gridDim=_Dim3(9, "gridDim"),
    syncthreads=_unsupported("cuda.syncthreads (a barrier)", _NO_BARRIERS),
    shared=_namespace("shared", array=_unsupported("cuda.shared.array (shared memory)", _NO_BARRIERS)),
    local=_namespace("local", array=_local_array),
    atomic=_namespace("atomic", add=_atomic_add, sub=_atomic_sub, max=_atomic_max, min=_atomic_min,
                      exch=_atomic_exch, cas=_atomic_cas, compare_and_swap=_atomic_cas),
)
"""What ``numba.cuda`` (and each of the names it exports for kernels) means inside a CPU-target kernel."""


# --- the target -----------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None)


class CPULauncher:
    """Runs a compiled kernel over a grid: the compiled loop over blocks and threads.

    A launch calls the loop's compiled entry point for the kernel's argument types directly, not numba's
    dispatcher: the launch function's guards have already pinned every argument's type, and the types overdub
    gives some values (an array of a struct: an array of its StructType) are not those numba's dispatcher
    would give them (an array of Records). (numba internals: ``Dispatcher.overloads[argtypes].entry_point``.)"""

    __slots__ = ("grid_loop", "entry_point", "checked")

    def __init__(self, grid_loop, argtypes: tuple, checked: bool = False):
        self.grid_loop, self.checked = grid_loop, checked      # the dispatcher owns the code the entry point runs
        self.entry_point = grid_loop.overloads[argtypes].entry_point

    def suggested_block_size(self, shmem: int = 0) -> int:
        """Blocks run one after another here; any size serves, this one keeps the grid loop's inner loop long."""
        return 256

    def launch_function(self, kernel, args, argtypes):
        names = "".join(f"{name}, " for name in launchfn.argument_names(len(args)))
        run = f"grid_loop({names}gx, gy, gz, tx, ty, tz)"
        body = ["try:", f"    {run}", "except IndexError:", f"    raise_recorded({kernel.job.name!r})", "    raise"] \
            if self.checked else [run]
        body.append("fflush(None)    # device printf reaches the console at the end of each launch")
        return launchfn.generate(kernel, args, argtypes, body, {"grid_loop": self.entry_point, "fflush": _libc.fflush,
                                                                 "raise_recorded": cpu_checks.raise_recorded})


def _grid_loop_source(nargs: int) -> str:
    """The grid loop takes the kernel's arguments first, so that a kernel's hidden first argument (a launch's
    state) is the grid loop's too, where the kernel is inlined."""
    return f"""{_grid_loop_def(nargs)}
    set_slot(6, bx); set_slot(7, by); set_slot(8, bz)
    set_slot(9, gx); set_slot(10, gy); set_slot(11, gz)
    for k in range(gz):
        set_slot(5, k)
        for j in range(gy):
            set_slot(4, j)
            for i in range(gx):
                set_slot(3, i)
                for tz in range(bz):
                    set_slot(2, tz)
                    for ty in range(by):
                        set_slot(1, ty)
                        for tx in range(bx):
                            set_slot(0, tx)
                            kernel({", ".join(f"a{i}" for i in range(nargs))})
"""


def _grid_loop_def(nargs: int) -> str:
    params = "".join(f"a{i}, " for i in range(nargs))
    return f"def grid_loop({params}gx, gy, gz, bx, by, bz):"


def _grid_loop_stub(nargs: int):
    """A def with the grid loop's parameters, for a dispatcher holding only loaded code."""
    namespace: dict = {}
    exec(compile(f"{_grid_loop_def(nargs)}\n    pass\n", "<overdub grid loop>", "exec"), namespace)
    return namespace["grid_loop"]


# numba internals: numba names each compiled function by its qualified name and a counter that starts at 1 in
# every process (numba.core.bytecode.FunctionIdentity._unique_ids). Code loaded from the disk cache was named
# by another process's counter, and the JIT links symbols by name: two processes' "scale$3" must never meet.
# Each process starts the counter at a random multiple of 2**20 below 2**60 instead.
bytecode.FunctionIdentity._unique_ids = itertools.count(secrets.randbits(40) << 20)


class CPUTarget(Configurable):
    name = "cpu"
    base = CPU
    compile_lock = global_compiler_lock

    def __init__(self, options: CompileOptions = CompileOptions(), root: TargetRoot | None = None):
        self.options = options
        self.label = self._label("cpu")
        self.root = TargetRoot("cpu", self) if root is None else root.configured_for(self)
        # debug: bounds checks (cpu_checks names the site) and Python's error model (x // 0 raises)
        self._njit_options = {"_nrt": False, "fastmath": options.fastmath, "boundscheck": options.debug,
                              "error_model": "python" if options.debug else "numpy"}

    def _with_options(self, options):
        return CPUTarget(options, self.root)

    @property
    def cache_tag(self) -> str:
        """What the machine code depends on besides the kernel: the host's triple, CPU and its features, the
        compile options, and numba's settings that change code (``NUMBA_OPT``, ``NUMBA_BOUNDSCHECK``, ...)."""
        settings = (config.OPT, config.BOUNDSCHECK, config.DEBUGINFO_DEFAULT)
        return f"cpu:{cpu_target.target_context.codegen().magic_tuple()}:{self.options!r}:{settings}"

    def typeof(self, value):
        kind = arguments.kind_of(value)
        if kind is None:
            return typeof(value)
        if kind.memory(value) == "device":
            raise TypeError(f"a {type(value).__name__} ({value!r:.60}) lives in GPU memory: the CPU target takes "
                            f"host memory (a numpy array, od.pointer of one)")
        return kind.typeof(value)

    def compile_method(self, func, typing_context, argtypes, kws):
        # called only from compiled code: without the wrappers a call from Python needs (compile latency)
        dispatcher = numba.njit(func, no_cpython_wrapper=True, no_cfunc_wrapper=True, **self._njit_options)
        with cpu_checks.checking(self.options.debug):
            sig, impl_key = bridge.dispatcher_call(typing_context, dispatcher, argtypes, kws)
        return sig, impl_key, dispatcher      # the dispatcher must outlive every caller's code

    def call_with_state(self, sig, impl_key):
        calls = bridge.HiddenArgumentCall(cpu_target.target_context, sig, impl_key)
        return calls.sig, calls.impl_key, calls

    def compile_kernel(self, func, argtypes):
        kernel = numba.njit(func, inline="always", **self._njit_options)
        namespace = {"kernel": kernel, "set_slot": _set_slot}
        exec(compile(_grid_loop_source(len(argtypes)), "<overdub grid loop>", "exec"), namespace)
        grid_loop = numba.njit(namespace["grid_loop"], no_cfunc_wrapper=True, **self._njit_options)
        signature = tuple(argtypes) + (types.int64,) * 6
        with cpu_checks.checking(self.options.debug):
            grid_loop.compile(signature)
        grid_loop.disable_compile()
        return CPULauncher(grid_loop, signature, checked=self.options.debug)

    # -- the disk cache's view of a compiled kernel: the grid loop's machine code, serialised as numba's own
    # cache does (numba/core/caching.py, CompileResultCacheImpl: CompileResult._reduce / _rebuild) --------
    def launcher_payload(self, launcher):
        """The grid loop's object code and what rebuilds its entry point, or None where the code holds
        addresses of this process (numba's "dynamic globals"; a checked kernel's record of a failed check)."""
        (cres,) = launcher.grid_loop.overloads.values()
        if self.options.debug or cres.library.has_dynamic_globals or cres.reload_init:
            return None
        fndesc = copy.copy(cres.fndesc)
        fndesc.typemap = fndesc.calltypes = fndesc.global_dict = None     # typing state and exec namespace
        return cres.library.serialize_using_object_code(), fndesc, cres.signature

    def launcher_from_payload(self, payload, argtypes):
        libdata, fndesc, signature = payload
        cres = CompileResult._rebuild(cpu_target.target_context, libdata, fndesc, Environment({}), signature,
                                      False, (), "", (), ())
        grid_loop = numba.njit(_grid_loop_stub(len(argtypes)), **self._njit_options)
        grid_loop.add_overload(cres)
        grid_loop.disable_compile()
        return CPULauncher(grid_loop, tuple(cres.signature.args), checked=self.options.debug)

    def synchronize(self):
        _libc.fflush(None)

    def check_launchable(self):
        """The CPU target runs anywhere."""


TARGET = CPUTarget()
TARGET.root.forward(print, cuprintln)
# The kernel idiom: calls are forwarded (so a context's overdub of cuda.grid still applies on the CPU),
# objects read for their attributes are replaced.
for _name in ("grid", "gridsize", "syncthreads"):
    TARGET.root.forward(getattr(numba_cuda, _name), getattr(CUDA_IDIOM, _name))
for _name in ("threadIdx", "blockIdx", "blockDim", "gridDim", "shared", "local", "atomic"):
    TARGET.root.replace(getattr(numba_cuda, _name), getattr(CUDA_IDIOM, _name))
cpu_checks.install(_read_slot)
# on CUDA these are attributes of numba-cuda's stub classes, not functions: calls no hook observes there
for _name in ("shared", "local", "atomic"):
    TARGET.root.hide(*(value for value in vars(getattr(CUDA_IDIOM, _name)).values() if callable(value)))
