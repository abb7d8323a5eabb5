"""Launching: ``od.cuda(kernel, *args, ...)`` -- the hot path.

The first launch of a kernel with given argument classes compiles it (through :mod:`overdub.compiler`) and
makes one launch function for that kernel and those classes that does everything a later launch needs:
check the compiled kernel is still valid (a flag, and one version tag per module it read), check the guards
that pin the arguments' numba types (dtype, rank, contiguity of arrays), marshal the arguments and enqueue.
The target's native launcher (C, see ``_fastlaunch.c``) serves where it can; otherwise the function is
generated here in Python. A launch is then a dict lookup on (kernel, context, target, argument classes)
and one call -- in C too, where the extension is built; any check that fails falls back to the slow path,
which types, looks up or compiles, and adds a launch function.
"""
from __future__ import annotations

import functools
import os

import numpy as np
from numba.core import types

from . import compiler, world
from .context import Context
from .intrinsics import Pointer
from .types import PtrType

__all__ = ["cuda", "synchronize", "default_target", "get_target"]


@functools.lru_cache(maxsize=None)
def _gpu_usable() -> bool:
    try:
        from numba import cuda as numba_cuda
        return numba_cuda.is_available()
    except Exception:
        return False


def default_target() -> str:
    """``$OVERDUB_TARGET`` if set, else "cuda" when a GPU is usable, else "cpu"."""
    return os.environ.get("OVERDUB_TARGET") or ("cuda" if _gpu_usable() else "cpu")


@functools.lru_cache(maxsize=None)
def _target_named(name: str):
    if name == "cpu":
        from .targets.cpu import TARGET
        return TARGET
    if name == "cuda":
        from .targets.cuda import TARGET
        return TARGET
    raise ValueError(f"unknown target {name!r}: use 'cpu' or 'cuda'")


def get_target(name: str | None = None):
    """The target object for a name ("cpu" or "cuda"); None means :func:`default_target` as it was when
    first asked, so that launches and ``synchronize`` agree on it."""
    return _target_named(name) if name else _default_target()


@functools.lru_cache(maxsize=None)
def _default_target():
    return _target_named(default_target())


def dims(value, what: str) -> tuple[int, int, int]:
    """A grid or block shape as three positive ints."""
    shape = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(shape) <= 3 or any(not isinstance(d, int) or d < 1 for d in shape):
        raise ValueError(f"{what} must be a positive int or a tuple of 1-3 positive ints, not {value!r}")
    return shape + (1,) * (3 - len(shape))


# --- guards ---------------------------------------------------------------------------------------------

def _contiguity(shape, strides, itemsize) -> tuple[bool, bool]:
    """(C-contiguous, Fortran-contiguous) as numba decides them for a device array's layout."""
    if strides is None:
        return True, len(shape) <= 1
    flags = []
    for order in (reversed, lambda seq: seq):
        expected, ok = itemsize, True
        for extent, stride in zip(order(shape), order(strides)):
            ok = ok and (extent <= 1 or stride == expected)
            expected *= extent
        flags.append(ok)
    return flags[0], flags[1]


def interface_signature(value) -> tuple:
    """(typestr, ndim, layout) of a ``__cuda_array_interface__`` object: what its numba array type rests on."""
    interface = value.__cuda_array_interface__
    shape = interface["shape"]
    c, f = _contiguity(shape, interface.get("strides"), np.dtype(interface["typestr"]).itemsize)
    return interface["typestr"], len(shape), "C" if c else ("F" if f else "A")


def _guards(name: str, value, ty, consts: dict) -> list[str] | None:
    """Conditions on a later argument of the same class that make numba type it as ``ty`` (None: no cheap
    guard exists, so such launches always take the slow path)."""
    if isinstance(ty, (types.Integer, types.Float, types.Complex, types.Boolean)):
        if type(value) is int:     # numba types a Python int as int64, or as uint64 when it does not fit
            return [f"-{2**63} <= {name} < {2**63}" if ty == types.int64 else f"{name} >= {2**63}"]
        return []                  # otherwise the class decides the type
    if isinstance(ty, PtrType) and isinstance(value, Pointer):
        consts[f"{name}_dtype"] = value.dtype
        return [f"{name}.dtype == {name}_dtype", f"{name}.device is {value.device}"]
    if not isinstance(ty, types.Array):
        return None
    if isinstance(value, np.ndarray) or hasattr(value, "_c_contiguous"):      # numpy, cupy
        consts[f"{name}_dtype"] = value.dtype
        guards = [f"({name}.dtype is {name}_dtype or {name}.dtype == {name}_dtype)", f"{name}.ndim == {ty.ndim}"]
        if isinstance(value, np.ndarray):
            c, f = f"{name}.flags.c_contiguous", f"{name}.flags.f_contiguous"
            guards += [f"{name}.flags.writeable is {ty.mutable}", f"{name}.flags.aligned is {ty.aligned}"]
        else:                                       # cupy: cheaper than building a flags object
            c, f = f"{name}._c_contiguous", f"{name}._f_contiguous"
        guards.append({"C": c, "F": f"(not {c} and {f})", "A": f"not ({c} or {f})"}[ty.layout])
        return guards
    if hasattr(value, "__cuda_array_interface__"):      # numba device arrays, torch tensors, ...
        consts[f"{name}_signature"] = interface_signature(value)
        consts["interface_signature"] = interface_signature
        return [f"interface_signature({name}) == {name}_signature"]
    return None


def _make_launch(compiled: compiler.Kernel, args: tuple, argtypes: tuple, guarded: bool = True):
    """(the launch function for ``compiled`` and arguments like ``args``, whether it may be cached: False
    when some argument's type cannot be pinned by a cheap guard, or when ``guarded`` is False). The
    target's native launcher is preferred where it has one for these arguments."""
    native = getattr(compiled.launcher, "native_launch", None) if guarded else None
    launch = native and native(compiled, args, argtypes)
    if launch is not None:
        return launch, True
    names = [f"a{i}" for i in range(len(args))]
    consts: dict = {}
    guards, cacheable = [], guarded
    for name, value, ty in zip(names, args, argtypes):
        more = _guards(name, value, ty, consts) if guarded else None
        if more is None:
            cacheable = False
        else:
            guards += more
    if not cacheable:
        guards = []
    statements, namespace = compiled.launcher.launch_code(names)
    lines = ["def launch(args, blocks, threads, shmem, stream):",
             f"    {', '.join(names) + ',' if names else '_'} = args{'' if names else ' or ()'}",
             "    if not (kernel.valid and guard.fresh()) and not kernel.usable():",
             "        return False"]
    if guards:
        lines += [f"    if not ({' and '.join(guards)}):", "        return False"]
    lines += ["    gx, gy, gz = (blocks, 1, 1) if type(blocks) is int and blocks > 0 else dims(blocks, 'blocks')",
              "    tx, ty, tz = (threads, 1, 1) if type(threads) is int and threads > 0 else dims(threads, 'threads')"]
    lines += [f"    {statement}" for statement in statements]
    lines += ["    count_launch()", "    return True"]
    namespace.update(consts, kernel=compiled, guard=compiled.guard, dims=dims,
                     count_launch=compiler.count_launch)
    exec(compile("\n".join(lines) + "\n", f"<overdub launch of {compiled.describe()}>", "exec"), namespace)
    launch = namespace["launch"]
    launch.kernel = compiled
    return launch, cacheable


# --- launching ------------------------------------------------------------------------------------------

_launches: dict[tuple, list] = {}     # (kernel, context, target, *argument classes) -> launch functions


def _cuda(kernel, *args, threads=1, blocks=1, shmem: int = 0, stream=None, target: str | None = None,
          context: Context | None = None):
    """od.cuda where the native extension is not built (its documentation: ``help(od.cuda)`` there, or
    docs/index.md): the launch functions for these argument classes, else the slow path."""
    for launch in _launches.get((kernel, context, target, *map(type, args)), ()):
        if launch(args, blocks, threads, shmem, stream):
            return
    _launch_slow(kernel, args, threads, blocks, shmem, stream, target, context)


def _launch_slow(kernel, args, threads, blocks, shmem, stream, target, context):
    """A launch whose lookup missed or whose launch functions' checks failed: type the arguments, get the
    compiled kernel (compiling if needed), add a launch function for these argument classes, launch."""
    tgt = get_target(target)
    argtypes = tuple(map(tgt.typeof, args))
    key = (kernel, context, target, *map(type, args))
    chain = (context or tgt.base).chain(tgt)
    for _ in range(3):      # a redefinition racing this launch can invalidate the kernel just compiled
        compiled = compiler.cached_kernel(kernel, argtypes, chain)
        known = [f for f in _launches.get(key, ()) if f.kernel is compiled]
        if any(f(args, blocks, threads, shmem, stream) for f in known):
            return
        launch, cacheable = _make_launch(compiled, args, argtypes)
        if launch(args, blocks, threads, shmem, stream):
            if cacheable:
                with world.lock:
                    live = [f for f in _launches.get(key, ()) if f.kernel.valid]
                    _launches[key] = live + [launch]
            return
        if compiled.valid:   # the guards disagree with numba's typing of these very arguments: launch as typed
            unguarded, _ = _make_launch(compiled, args, argtypes, guarded=False)
            if unguarded(args, blocks, threads, shmem, stream):
                return
    raise RuntimeError(f"could not launch {kernel.__qualname__}: it was invalidated on every attempt")


try:     # the same lookup in C, where the native extension is built (see _fastlaunch.c)
    from ._fastlaunch import cuda, install as _install_native
except ImportError:
    cuda = _cuda
else:
    _install_native(_launches, _launch_slow)


def synchronize(target: str | None = None) -> None:
    """Wait for launched work to finish and flush device printf output."""
    get_target(target).synchronize()
