"""The CPU target's interface to the native grid runner (``overdub/targets/cpu/_cpugrid.c``): its functions' addresses,
how compiled code calls them, the build compiled code was made for, and what a kernel needs of it.

Compiled code never holds a runner address: it calls external symbols that the JIT resolves to this process's
runner, so code loaded from the disk cache calls the runner of the process that loads it.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import pathlib
import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING

from llvmlite import binding as llvm
from llvmlite import ir
from numba.core import cgutils
from numba.core.errors import NumbaError

from ... import bridge, world
from ...runtime import runtime

if TYPE_CHECKING:
    from ...bindings import Guarded

try:
    from . import _cpugrid
except ImportError:  # built without a C compiler: no fibers, blocks run one after another
    _cpugrid = None  # type: ignore[assignment]  # mypy types a module, not "the module or None"

SYMBOLS = _cpugrid.symbols() if _cpugrid is not None else None
"""The addresses of the runner's functions, by name (None where the helper is not built)."""

SYMBOL_PREFIX = "overdub_cpugrid_"
# Compiled code calls the runner's functions by these external symbols, which the JIT resolves to this
# process's addresses: code loaded from the disk cache was generated in another process, where the runner
# sat elsewhere (an address baked into the code would call into whatever is there now).
for _name, _address in (SYMBOLS or {}).items():
    llvm.add_symbol(SYMBOL_PREFIX + _name, _address)


class Need(enum.Enum):
    """What a kernel's code (or a callee's) needs of the runner, recorded at its code generation in the
    ``needs`` of the kernel being built (which its callers inherit, and the disk cache stores: a member pickles
    by its name). The runner's mode for the kernel follows from them."""

    FIBERS = "block fibers"
    """Its threads run as fibers of their block: it synchronizes, uses shared memory or warp functions."""
    GRID_SYNC = "grid fibers"
    """Every block of its grid is resident at once: it synchronizes the grid."""
    FIBER_WAITS = "waits where its code cannot be cut"
    """It (or a callee) waits where :mod:`.regions` cannot cut its grid body -- a warp operation, a grid sync,
    a barrier in a device function compiled on its own: its threads run as fibers, not as block regions."""
    BLOCK_ROWS = "thread and block x indices apart"
    """Rows of one block. A row loop sets the thread's and the block's x index as ``x - q * bx`` and ``q``,
    ``q`` the first block of the row: exact where the row is one block's, and always exact in their sum,
    ``cuda.grid``'s (so that a row can span blocks with no division per thread). A kernel reading either on
    its own needs rows of one block."""
    GRID_STATE = "grid state in memory"
    """The running thread's indices in the runner's state, not only in registers: a callee compiled on its
    own reads them there."""


LOCAL_MEMORY_LIMIT = 512 * 1024
"""CUDA's limit on one thread's local memory, in bytes (ptxas refuses a kernel using more): the CPU target
refuses a kernel whose local arrays exceed it, at compile time."""

MAX_RESIDENT_THREADS = 1 << 20
"""The threads of a grid the runner holds at once (a fiber and its stack each), as ``_cpugrid.c`` defines it: a
grid that synchronizes (grid fibers) may have no more."""

FIBER_STACK_MARGIN = 512 * 1024
"""A fiber's stack beyond its kernel's local arrays: the frames of the kernel and its callees, printf's."""


@dataclasses.dataclass(frozen=True)
class LocalMemory:
    """A need: the ``cuda.local.array`` at ``site`` (its source line, as numba lowered it) takes ``nbytes`` of
    a thread's stack. A kernel's local arrays are those of its code and its callees' (one record a site, however
    often the code is generated): a fiber's stack holds them all, plus :data:`FIBER_STACK_MARGIN`."""

    site: str
    nbytes: int


def local_memory(needs: Iterable[object]) -> int:
    """The bytes of local arrays a kernel with these needs takes per thread (an upper bound: each array of
    the kernel and its callees counted once, as if all were live at once)."""
    return sum(need.nbytes for need in needs if isinstance(need, LocalMemory))


def fiber_stack_size(needs: Iterable[object]) -> int:
    """The stack each fiber of a kernel with these needs gets."""
    return local_memory(needs) + FIBER_STACK_MARGIN


def check_local_memory(needs: Iterable[object], kernel: str) -> None:
    """At compile time: refuse a kernel whose local arrays exceed CUDA's per-thread limit (the GPU refuses it
    too), instead of letting its threads overflow their stacks."""
    total = local_memory(needs)
    if total > LOCAL_MEMORY_LIMIT:
        sites = sorted((need for need in needs if isinstance(need, LocalMemory)), key=lambda need: need.site)
        listed = ", ".join(f"{need.nbytes} bytes at {need.site}" for need in sites)
        raise LocalMemoryError(
            f"{kernel} uses {total} bytes of local memory per thread ({listed}), more than CUDA's limit of "
            f"{LOCAL_MEMORY_LIMIT} bytes (512 KiB): use fewer or smaller cuda.local.array, or global memory"
        )


class LocalMemoryError(NumbaError):
    """A kernel's local arrays exceed CUDA's per-thread local memory (a numba error, so that the compile error
    carries it)."""


class UnsupportedOnCPU(TypeError):
    """A kernel uses a construct the CPU target cannot run here."""


def runner_digest() -> str:
    """Which build of the runner compiled code calls ("none" where it is not built): part of the disk cache's
    key, since the code's calls follow the runner's conventions."""
    global _runner_digest
    if _runner_digest is None:
        path = getattr(_cpugrid, "__file__", None)
        _runner_digest = hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:16] if path else "none"
    return _runner_digest


_runner_digest: str | None = None
runtime.register_cache(f"{__name__}._runner_digest", kept="a digest of the runner's binary, loaded once")


def last_error() -> str:
    """The runner's message for this thread's last grid that failed (a deadlock, memory)."""
    return _cpugrid.last_error()


def native_call(builder: ir.IRBuilder, name: str, restype: ir.Type, args: list[ir.Value]) -> ir.Value:
    """Call the runner's function ``name``, by its external symbol (resolved by the JIT in this process)."""
    function_type = ir.FunctionType(restype, [arg.type for arg in args])
    function = cgutils.get_or_insert_function(builder.module, function_type, SYMBOL_PREFIX + name)  # type: ignore[no-untyped-call]  # numba's is unannotated
    return builder.call(function, args)


def require_runner(construct: str) -> None:
    """At typing: a clear error where the runner is not built."""
    if SYMBOLS is None:
        sites = bridge.call_sites()
        where = f" (at {sites[0]})" if sites else ""
        raise UnsupportedOnCPU(
            f"{construct} needs overdub's native CPU grid runner (overdub/targets/cpu/_cpugrid.c), which "
            f"is not built here{where}: reinstall overdub where a C compiler is available"
        )


def need(*what: object) -> None:
    """At code generation: the kernel being built needs these (members of :class:`Need`, records such as
    :class:`LocalMemory` or a block regions' frame): its callers inherit them, the disk cache keeps them."""
    built = typing.cast("Guarded | None", world.being_built())  # at code generation: a compile's node
    if built is not None:
        built.needs.update(what)
