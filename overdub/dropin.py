"""The drop-in for numba-cuda users: ``od.jit``, numba-cuda's decorator, launched the overdub way.

A numba-cuda user changes ``from numba import cuda; @cuda.jit`` to ``@od.jit`` and keeps the rest:
``kernel[blocks, threads](...)``, ``kernel[blocks, threads, stream, shmem](...)``, ``kernel.forall(n)(...)``,
``inspect_llvm`` / ``inspect_asm`` / ``inspect_sass``, eager compilation for given signatures, and
``@od.jit(device=True)`` for device functions. Every launch goes through :func:`overdub.cuda` -- edges,
contexts, any target, never stale -- so a kernel object is only a launch configuration around its function.

Explicit signatures compile eagerly and, as in numba-cuda, fix the types a launch passes: each scalar argument
is converted to its signature's type (``cuda.jit("void(int32[:], int32)")`` launched with a Python int passes
an int32), the signature chosen as numba's dispatcher chooses it: an exact match first, then the fewest unsafe,
safe and promoting conversions; no fit, or two equally good, is numba-cuda's TypeError.

Differences from numba-cuda, by design: a device function is a generic function (``@od.jit(device=True)`` twice
with different signatures defines two methods); ``forall`` uses a fixed
block of 128 threads (or ``tpb``) rather than asking the driver for an occupancy-optimal size. As numba-cuda
does, and ``od.cuda`` does not, a kernel launched on the CUDA target with host (numpy) arrays copies them to the
device and back around the launch.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import sys
import typing
import warnings
from collections.abc import Callable, Iterable
from types import MethodType
from typing import Any, cast

import numpy as np

from . import bridge, compiler, launch, launchconfig, reflect, world
from .arguments import HostMemoryError
from .bindings import plan_key
from .bridge.signatures import chosen_signature, scalar_converter, sign_view, signature_argtypes, typeof_or_none
from .call import KernelCall, launch_own
from .context import Context
from .intrinsics import Pointer
from .launch import launch_configured
from .launchconfig import LaunchConfig
from .registry import function
from .runtime import runtime
from .targets import CompileOptions, Launcher, get_target
from .targets.numbacuda import check_debug_options, performance_warning
from .travel import defs, load, tasks
from .types import Any as AnyType
from .types import PtrType, dtype_of, is_concrete

__all__ = ["jit", "Kernel", "Overload"]

load()  # what ships code to other processes, its reducers of generic functions, contexts and struct classes

# numba-cuda's cuda.jit options: those that change the code are compile options (overdub.targets.options);
# the rest are accepted for compatibility and explained in jit's docstring
_COMPILE_OPTIONS = frozenset(
    {"fastmath", "lineinfo", "debug", "opt", "max_registers", "link", "launch_bounds", "shared_memory_carveout"}
)
_ACCEPTED = frozenset({"cache", "inline", "forceinline", "boundscheck", "lto", "extensions", "target"})


def jit(func_or_signature=None, device: bool = False, context: Context | None = None, **options):
    """numba-cuda's ``cuda.jit`` forms: ``@od.jit``, ``@od.jit()``, ``@od.jit("void(float32[:])")`` or a list
    of signatures (compiled eagerly), ``@od.jit(device=True)`` (a generic function, its signature from the
    signature string when one is given). ``context`` launches in that context; ``target`` ("cpu", "cuda")
    picks the target, otherwise the default one.

    numba-cuda's compile options apply to the kernel and everything it calls: ``fastmath``, ``lineinfo``,
    ``debug`` (checked kernels: bounds checks on the CPU target, numba-cuda's kernel exceptions on CUDA),
    ``opt``, ``max_registers``, ``link``, ``launch_bounds`` and ``shared_memory_carveout`` (see
    :class:`overdub.targets.CompileOptions`).
    ``extensions`` convert arguments before each launch as numba-cuda's do (``prepare_args``).
    ``boundscheck=True`` means ``debug=True``. ``cache`` is accepted (overdub keeps its own cache), as are
    ``inline``, ``forceinline`` and ``lto``, which change nothing here: LLVM and NVVM decide inlining."""
    unknown = set(options) - _COMPILE_OPTIONS - _ACCEPTED
    if unknown:
        raise TypeError(
            f"od.jit got unexpected options {sorted(unknown)}; it takes numba-cuda's "
            f"{sorted(_COMPILE_OPTIONS | _ACCEPTED)} and device, context"
        )
    check_debug_options(options.get("debug"), options.get("opt"), options.get("lineinfo"), stacklevel=2)
    scope = sys._getframe(1).f_locals  # where the def runs: device functions extend what it names
    if callable(func_or_signature) and not isinstance(func_or_signature, (str, list, tuple)):
        return _make(func_or_signature, (), device, context, options, scope)
    # a list is several signatures; a string, a tuple of argument types or a Signature object is one
    signatures = (
        func_or_signature
        if isinstance(func_or_signature, list)
        else [func_or_signature]
        if func_or_signature is not None
        else []
    )
    specialized = func_or_signature is not None and not isinstance(func_or_signature, list)  # numba-cuda's rule
    return lambda func: _make(func, tuple(signatures), device, context, options, scope, specialized)


def _make(func, signatures, device, context, options, scope, specialized=False):
    if isinstance(func, Kernel):  # an od.jit kernel jitted again: its def, as numba-cuda takes a dispatcher's
        func = func.py_func
    if device:
        given = CompileOptions.of(**{k: v for k, v in options.items() if k in _COMPILE_OPTIONS})
        ignored = sorted(k for k in _COMPILE_OPTIONS if getattr(given, k) != getattr(CompileOptions(), k))
        if ignored:
            warnings.warn(
                f"od.jit(device=True) for {func.__qualname__}: compile options {ignored} apply to whole "
                f"kernels in overdub (a device function compiles with the options of the kernel calling "
                f"it): give them to the kernel's od.jit or od.cuda(..., debug=True)",
                stacklevel=3,
            )
        first, *others = [signature_argtypes(sig) for sig in signatures] or [_any_types(func)]
        gf = function(func, first, scope=scope, converts=bool(signatures))
        for argtypes in others:  # one generic function, a method per signature (its name may be bound elsewhere)
            gf.define(func, argtypes, converts=True)
        return gf
    compile_options = CompileOptions.of(**{k: v for k, v in options.items() if k in _COMPILE_OPTIONS})
    if options.get("boundscheck"):
        compile_options = compile_options.replaced(debug=True)
    extensions = tuple(options.get("extensions") or ())
    return Kernel(func, signatures, context, options.get("target"), compile_options, extensions, specialized)


class Kernel:
    """A kernel from ``od.jit``: launch with ``kernel[blocks, threads](*args)``."""

    def __init__(
        self,
        py_func,
        signatures=(),
        context: Context | None = None,
        target: str | None = None,
        options: CompileOptions = CompileOptions(),
        extensions: tuple = (),
        specialized: bool = False,
    ):
        self.py_func, self.context, self.target_name = py_func, context, target
        self.options, self.extensions = options, _Extensions(self, extensions)
        self.__name__, self.__qualname__ = py_func.__name__, py_func.__qualname__
        self.__doc__, self.__module__ = py_func.__doc__, py_func.__module__
        self._configs: dict = {}
        defs.note_kernel(py_func)
        self._explicit = [signature_argtypes(sig) for sig in signatures]  # the signatures it was given
        # numba-cuda's specialized kernel: given one signature (not a list of one), or made by specialize()
        self._specialized = specialized
        self.specializations: dict = {}  # specialize()'s kernels, by argument types
        self._plans: dict = {}  # the conversions to them chosen for the arguments' classes (_as_signature)
        self._since = compiler.kernels_made()  # its overloads: the kernels of its def made after this,
        self._launched: set = set()  # and those its first launch found made (by another od.jit of its def)
        # made while numba's dumps are asked for (NUMBA_DUMP_IR...): the jobs it compiled itself, as each
        # numba-cuda dispatcher compiles its own code, so that the dumps print
        self._afresh: set | None = set() if bridge.dumps_requested() else None
        self._compile_hook = None  # a program's own _compile_for_args (it wraps numba-cuda's)
        self.launch_config_sensitive = False  # a compile of it read its launch's configuration
        self._compiled_here: set = set()  # the jobs its launches through Python compiled (_compile_for_args)
        self._per_configuration: dict = {}  # (job, grid, block, shared memory) -> its own code for them
        for argtypes in self._explicit:
            self.compile(argtypes)

    def compile(self, argtypes: tuple):
        """Compile for ``argtypes`` now (on this kernel's target), as an explicit signature does."""
        return self._own(KernelCall.of(self.py_func, argtypes, self.target, self.context, typed=True))

    def _compiled(self, args: tuple):
        """The compiled kernel for ``args`` on this kernel's target and context."""
        return self._own(KernelCall.of(self.py_func, args, self.target, self.context))

    def _own(self, call: KernelCall):
        if self._afresh is None or call.job in self._afresh:
            return call.compiled()
        self._afresh.add(call.job)
        return compiler.compiled_afresh(call.job, self._since)

    # --- what a launch that compiles does (numba-cuda's dispatcher's, overdub.cuda.launchconfig) ---

    @property
    def _compile_for_args(self):
        """What a launch of this kernel that compiles calls with the launch's arguments, its configuration
        current (:mod:`overdub.cuda.launchconfig`): numba-cuda's dispatcher's, which programs wrap by
        assigning their own; returns the compiled kernel."""
        return self._compile_hook or MethodType(Kernel._compile_default, self)

    @_compile_for_args.setter
    def _compile_for_args(self, hook) -> None:
        self._compile_hook = hook
        self._configs.clear()  # its launches through Python from now on, which call it

    @_compile_for_args.deleter
    def _compile_for_args(self) -> None:
        self._compile_hook = None
        self._configs.clear()

    def _compile_default(self, *args, **kws):
        call = KernelCall.of(self.py_func, args, self.target, self.context)
        if self.launch_config_sensitive:  # its own code for the configuration current (marked so where the
            own = compiler.compiled_afresh(call.job, None)  # marking came before this compile, not in it)
            own.needs.add(compiler.CONFIGURATION_BOUND)
            return own
        return self._own(call)

    def mark_launch_config_sensitive(self) -> None:
        """The code compiling now depends on its launch's configuration (numba-cuda's; a rewrite pass reading
        :func:`overdub.cuda.launchconfig.current_launch_config` calls it, as cuda.coop's do): from then on this
        kernel compiles its own code for each configuration it is launched with, which no other launch runs
        and the disk cache does not keep."""
        self.launch_config_sensitive = True
        self._configs.clear()
        node = world.being_built()
        needs = getattr(node, "needs", None)
        if needs is not None:
            needs.add(compiler.CONFIGURATION_BOUND)
        current = launchconfig.current_launch_config()
        if isinstance(node, compiler.Kernel) and isinstance(current, launchconfig.LaunchConfiguration):
            # the kernel being built is this configuration's code: its next launch like this one runs it
            self._per_configuration[(node.job, (current.griddim, current.blockdim, current.sharedmem))] = node
            self._compiled_here.add(node.job)

    def _through_python(self) -> bool:
        """Do its launches go through Python (not the native launch table): a program's ``_compile_for_args``,
        code depending on the launch configuration, numba's dumps asked for?"""
        return self._compile_hook is not None or self.launch_config_sensitive or self._afresh is not None

    def _launch_compiling(self, configured: _Configured, args: tuple) -> None:
        """A launch through Python: with its configuration current, ``_compile_for_args`` first where it
        compiles (each job once, or once for each configuration where the code depends on it); code depending
        on the configuration launched as this kernel's own."""
        config = configured.config
        current = launchconfig.LaunchConfiguration(self, config, args)
        shape = (current.griddim, current.blockdim, current.sharedmem)
        try:
            call, copy_back = KernelCall.of(self.py_func, args, self.target, self.context), None
        except HostMemoryError:  # host arrays on a GPU: copied as numba-cuda copies them, and back after
            moved, copy_back = get_target(self.target).host_copies(args, config.stream)
            call = KernelCall.of(self.py_func, moved, self.target, self.context)
        here = launchconfig.here
        outer, here.config = getattr(here, "config", None), current
        try:
            if call.job not in self._compiled_here:  # (launches on two threads at once each call it)
                compiled = self._compile_for_args(*call.args)
                self._compiled_here.add(call.job)
                if self.launch_config_sensitive and compiled is not None:
                    self._per_configuration[(call.job, shape)] = compiled
            if self.launch_config_sensitive:
                own = self._per_configuration.get((call.job, shape))
                if own is None or not own.usable():
                    own = self._per_configuration[(call.job, shape)] = self._compile_for_args(*call.args)
                launch_own(call, own, config)
            else:
                configured._launch(call.args)
        finally:
            here.config = outer
        if copy_back is not None:
            copy_back()

    @property
    def target(self):
        """The target this kernel compiles for, configured with its compile options."""
        return self.launch_defaults(None)[0]

    def launch_defaults(self, target):
        """What ``od.cuda(kernel, ..., target=target)`` launches this kernel with: the target (``target``, else
        this kernel's) configured with this kernel's compile options, and this kernel's context."""
        chosen = get_target(self.target_name if target is None else target)
        return chosen.configured(self.options.replaced(debug=self.options.debug or chosen.options.debug)), self.context

    def __getitem__(self, config) -> Callable[..., None]:
        configured = self._configs.get(config)
        if configured is None:
            checked = _launch_config(config)
            if get_target(self.target_name).device_memory:  # a GPU's: numba-cuda's warning of small grids
                _warn_low_occupancy(checked)
            configured = self._configs[config] = self._configured(checked)
        return configured

    def _configured(self, config: LaunchConfig) -> Callable[..., None]:
        """Calling it launches with ``config``: the native front where the extension is built (the lookup
        with the configuration held), after the arguments' conversions where the kernel has some."""
        plain = _Configured(self, config)
        front = (  # through Python where its launches compile its own way (_through_python)
            plain
            if self._through_python()
            else launch.configured(plain, plain.function, config, plain.target, plain.context)
        )
        return _Converting(self, front, plain.target, config) if self._explicit or self.extensions else front

    def __reduce__(self):
        # what makes it: its def (which engines ship by value), its options and context; no compiled state. A def
        # plain pickle cannot name (a closure, a def made in a function) by value, as numba-cuda pickles kernels
        made = (self.py_func, (), self.context, self.target_name, self.options, tuple(self.extensions))
        state = {"_explicit": self._explicit, "_specialized": self._specialized}
        by_value = None if _named(self.py_func) else tasks.reduce_def(self.py_func)
        if by_value is None:
            return Kernel, made, state
        rebuild, args = by_value
        return _kernel_arriving, (rebuild, args, made[1:]), state

    def __call__(self, *args, **kwargs):
        raise ValueError(  # numba-cuda's error and the start of its message, which programs test for
            f"Kernel launch configuration was not specified: launch the kernel {self.__qualname__} with a grid, "
            f"{self.__name__}[blocks, threads](...)"
        )

    def forall(self, ntasks: int, tpb: int = 0, stream=0, sharedmem: int = 0) -> _ForAll:
        """A launch covering ``ntasks`` threads (one per task): ``kernel.forall(n)(*args)``; the block size is
        ``tpb``, else the one the target suggests for the kernel compiled for the arguments (on CUDA, the
        driver's occupancy-optimal size)."""
        if ntasks < 0:
            raise ValueError(f"Can't create ForAll with negative task count: {ntasks}")
        return _ForAll(self, int(ntasks), tpb, stream, sharedmem)

    def specialize(self, *args) -> Kernel:
        """numba-cuda's specialization to the types of ``args`` (values, or numba types): a kernel compiled for
        them, launched with no other (one per types, kept in ``specializations``). A RuntimeError, as
        numba-cuda's, for a kernel already specialized (given one signature, or made by this)."""
        if self._specialized:
            raise RuntimeError(f"Dispatcher already specialized: {self.__qualname__} takes only its signature")
        argtypes = tuple(arg if is_concrete(arg) else typeof_or_none(arg) for arg in args)
        if any(ty is None for ty in argtypes):
            raise TypeError(f"{self.__qualname__}.specialize: numba has no type for some of {args!r}")
        made = self.specializations.get(argtypes)
        if made is None:
            made = self.specializations[argtypes] = Kernel(
                self.py_func, [argtypes], self.context, self.target_name, self.options, tuple(self.extensions), True
            )
        return made

    @property
    def signatures(self) -> list:
        """The argument types it is compiled for, as numba-cuda lists them: the signatures it was given, then
        those its launches compiled."""
        return [*self._explicit, *(argtypes for argtypes in self.overloads if argtypes not in self._explicit)]

    @property
    def overloads(self) -> dict:
        """The compiled kernels of this function now cached, by argument types (as numba-cuda's dict): those
        made since this kernel was (numba-cuda's dispatcher made anew has none; another ``od.jit`` of the same
        def, made earlier, lists its own)."""
        kernels = cast("list[compiler.Kernel]", runtime.kernels.nodes())  # the runtime's kernel cache holds these
        found = {
            node.job.argtypes: Overload(node, self)
            for node in kernels
            if node.job.func is self.py_func
            and (node.made > self._since or node.job.argtypes in self._explicit or node.job.argtypes in self._launched)
        }
        for node in self._per_configuration.values():  # its own code for a launch configuration: not in that cache
            if node.valid:
                found.setdefault(node.job.argtypes, Overload(node, self))
        return found

    def _per_overload(self, name: str, signature):
        """numba-cuda's resource queries: for ``signature`` (its argument types), else for the one signature of
        a kernel compiled for one, else a dict over the compiled kernels."""
        overloads = self.overloads
        if signature is not None:
            argtypes = signature_argtypes(signature)
            overload = overloads.get(argtypes) or Overload(self.compile(argtypes), self)
            return getattr(overload, name)
        if self._specialized:
            return getattr(overloads.get(self._explicit[0]) or Overload(self.compile(self._explicit[0]), self), name)
        return {argtypes: getattr(overload, name) for argtypes, overload in overloads.items()}

    def get_regs_per_thread(self, signature=None):
        """The registers each thread of the kernel uses on the current device (numba-cuda's)."""
        return self._per_overload("regs_per_thread", signature)

    def get_shared_mem_per_block(self, signature=None):
        """The bytes of static shared memory each block of the kernel uses."""
        return self._per_overload("shared_mem_per_block", signature)

    def get_const_mem_size(self, signature=None):
        """The bytes of constant memory the kernel uses."""
        return self._per_overload("const_mem_size", signature)

    def get_local_mem_per_thread(self, signature=None):
        """The bytes of local memory each thread of the kernel uses."""
        return self._per_overload("local_mem_per_thread", signature)

    def get_max_threads_per_block(self, signature=None):
        """The most threads a block of the kernel may have on the current device (a launch beyond fails)."""
        return self._per_overload("max_threads_per_block", signature)

    def in_context(self, context: Context) -> Kernel:
        """The same kernel, launched in ``context``."""
        return Kernel(self.py_func, (), context, self.target_name, self.options, tuple(self.extensions))

    # -- inspection, as numba-cuda's dispatcher offers it -----------------------------------------------
    def _inspect(self, code, signature):
        options = dataclasses.asdict(self.options)
        if signature is not None:
            return code(self.py_func, *signature_argtypes(signature), context=self.context, **options)
        return {
            argtypes: code(self.py_func, *argtypes, context=self.context, **options) for argtypes in self.signatures
        }

    def inspect_llvm(self, signature=None):
        """The NVVM IR for ``signature``, or a dict over the compiled signatures."""
        return self._inspect(reflect.code_llvm, signature)

    def inspect_asm(self, signature=None):
        """The PTX for ``signature``, or a dict over the compiled signatures."""
        return self._inspect(reflect.code_ptx, signature)

    def inspect_sass(self, signature=None):
        """The SASS for ``signature`` (needs a GPU, or ptxas and nvdisasm)."""
        return self._inspect(reflect.code_sass, signature)

    def inspect_lto_ptx(self, signature=None):
        """The PTX after link-time optimisation for ``signature`` (needs nvJitLink), or a dict."""
        return self._inspect(reflect.code_lto_ptx, signature)

    def inspect_types(self, signature=None, file=None):
        """Print the typed IR of the kernel for ``signature`` (each compiled signature by default), annotated on
        its source lines, to ``file`` (standard output by default), as numba-cuda does."""
        typed = self._inspect(reflect.code_typed, signature)
        for argtypes, text in ({signature: typed} if signature is not None else typed).items():
            print(f"{self.__name__} {argtypes}", "-" * 80, text, "=" * 80, sep="\n", file=file or sys.stdout)

    def __repr__(self) -> str:
        return f"<overdub kernel {self.__qualname__}>"


class Overload:
    """One compiled kernel of an ``od.jit`` kernel, as numba-cuda lists it in ``overloads``: its argument types,
    its typed IR (``inspect_types``; numba-cuda's ``_type_annotation``, where the target keeps it)."""

    __slots__ = ("kernel", "owner")

    def __init__(self, kernel, owner: Kernel):
        self.kernel, self.owner = kernel, owner  # the compiler's Kernel node; the od.jit kernel it is one of

    def _code(self, code, **where):
        owner = self.owner
        return code(
            owner.py_func, *self.argument_types, context=owner.context, **dataclasses.asdict(owner.options), **where
        )

    def inspect_llvm(self) -> str:
        """Its NVVM IR."""
        return self._code(reflect.code_llvm)

    def inspect_asm(self, cc=None) -> str:
        """Its PTX, for compute capability ``cc`` (the current device's by default)."""
        return self._code(reflect.code_ptx, cc=cc)

    def inspect_sass(self, cc=None) -> str:
        """Its SASS (needs a GPU, or ptxas and nvdisasm)."""
        return self._code(reflect.code_sass, cc=cc)

    @property
    def argument_types(self) -> tuple:
        return self.kernel.job.argtypes

    @property
    def launch_config_sensitive(self) -> bool:
        """Was it compiled for one launch configuration (:meth:`Kernel.mark_launch_config_sensitive`)?"""
        return compiler.configuration_bound(self.kernel)

    @property
    def _type_annotation(self):
        return getattr(self.kernel.launcher, "type_annotation", None)

    def inspect_types(self, file=None) -> None:
        print(self._type_annotation, file=file or sys.stdout)

    @property
    def _codelibrary(self):
        """The kernel's code library on the CUDA target (numba-cuda's ``CUDACodeLibrary``: its PTX, the files
        it links), as numba-cuda's overload has it; None on the CPU target."""
        return getattr(self.kernel.launcher, "library", None)

    @property
    def cooperative(self) -> bool:
        """Does the kernel synchronize its whole grid (``cuda.cg.this_grid().sync()``)? Its launches are then
        cooperative: every block resident at once."""
        return bool(getattr(self.kernel.launcher, "cooperative", False))

    def max_cooperative_grid_blocks(self, blockdim, dynsmem: int = 0) -> int:
        """The most blocks of ``blockdim`` threads (an int or a tuple) a launch of this kernel that synchronizes
        its grid may have, with ``dynsmem`` bytes of dynamic shared memory: all must be resident at once."""
        threads = math.prod(blockdim) if isinstance(blockdim, tuple) else int(blockdim)
        return int(cast("Launcher", self.kernel.launcher).co_resident_blocks(threads, dynsmem))

    def _resource(self, name: str) -> int:
        resources = getattr(self.kernel.launcher, "resources", None)
        if resources is None:
            raise NotImplementedError(
                f"{name} is what a kernel's code uses of a GPU: the {self.kernel.job.target.label} target has none "
                f"to report (launch on the CUDA target)"
            )
        return int(resources()[name])

    @property
    def regs_per_thread(self) -> int:
        return self._resource("regs_per_thread")

    @property
    def shared_mem_per_block(self) -> int:
        return self._resource("shared_mem_per_block")

    @property
    def const_mem_size(self) -> int:
        return self._resource("const_mem_size")

    @property
    def local_mem_per_thread(self) -> int:
        return self._resource("local_mem_per_thread")

    @property
    def max_threads_per_block(self) -> int:
        return self._resource("max_threads_per_block")

    def __repr__(self) -> str:
        return f"<overload of {self.kernel.describe()}>"


def _launch_config(config) -> LaunchConfig:
    """The launch configuration of numba-cuda's ``[blocks, threads(, stream(, shmem))]``, checked (a stream of
    0 is the default stream)."""
    if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
        raise ValueError(
            f"launch configuration must be [blocks, threads], [blocks, threads, stream] or "
            f"[blocks, threads, stream, shmem], not {config!r}"
        )
    blocks, threads, stream, shmem = config + (0, 0)[len(config) - 2 :]
    _numba_dims(blocks, "griddim")
    _numba_dims(threads, "blockdim")
    return LaunchConfig.of(blocks, threads, shmem, None if isinstance(stream, int) and stream == 0 else stream)


def _warn_low_occupancy(config: LaunchConfig) -> None:
    """numba-cuda's warning for a grid of fewer than 128 blocks on the GPU (``CUDA_LOW_OCCUPANCY_WARNINGS``)."""
    blocks = config.blocks if isinstance(config.blocks, tuple) else (config.blocks,)
    size = math.prod(blocks)
    if size < 128:
        message = f"Grid size {size} will likely result in GPU under-utilization due to low occupancy."
        performance_warning(message, "CUDA_LOW_OCCUPANCY_WARNINGS", stacklevel=3)


def _numba_dims(value: object, name: str) -> None:
    """numba-cuda's own check of ``kernel[griddim, blockdim]``, with its error classes and messages (programs
    catch them): at most three extents, each an integer; LaunchConfig then checks the rest."""
    dims = list(value) if isinstance(value, (tuple, list)) else [value]
    if len(dims) > 3:
        raise ValueError(f"{name} must be a sequence of 1, 2 or 3 integers, got {dims!r}")
    if not all(isinstance(d, numbers.Integral) for d in dims):
        hint = " (a division's result: use // for an integer one)" if any(isinstance(d, float) for d in dims) else ""
        raise TypeError(f"{name} must be a sequence of integers, got {dims!r}{hint}")


class _LaunchConfiguration:
    """What numba-cuda's ``kernel[blocks, threads(, stream(, shmem))]`` shows -- ``griddim``, ``blockdim``,
    ``stream``, ``sharedmem`` -- and how it pickles: as the kernel (by value where its def has no importable
    name, as numba-cuda pickles kernels) and the configuration, configured again where it arrives."""

    __slots__ = ("kernel", "config")
    kernel: Kernel
    config: LaunchConfig

    @property
    def griddim(self) -> tuple[int, int, int]:
        return launchconfig.shape_of(self.config.blocks)

    @property
    def blockdim(self) -> tuple[int, int, int]:
        return launchconfig.shape_of(self.config.threads)

    @property
    def stream(self) -> object:
        return 0 if self.config.stream is None else self.config.stream

    @property
    def sharedmem(self) -> int:
        return self.config.shmem

    args = None
    """numba-cuda's: None -- a launch's arguments are its thread's own, on the launch configuration that
    :func:`overdub.cuda.launchconfig.current_launch_config` gives while it compiles."""

    def __reduce__(self):
        return _configured_again, (self.kernel, (self.griddim, self.blockdim, self.stream, self.sharedmem))


def _configured_again(kernel: Kernel, config: tuple) -> Callable[..., None]:
    return kernel[config]


class _Configured(_LaunchConfiguration):
    """``kernel[blocks, threads, ...]``: calling it launches, with its configuration (one checked record)."""

    __slots__ = ("function", "target", "context")

    def __init__(self, kernel: Kernel, config: LaunchConfig):
        self.kernel, self.function, self.config, self.context = kernel, kernel.py_func, config, kernel.context
        self.target = kernel.target_name if kernel.options == CompileOptions() else kernel.target

    def __call__(self, *args):  # the slow path's (the native lookup found no launch function), or each launch's
        if self.kernel._through_python():
            self.kernel._launch_compiling(self, args)
            return
        here = launchconfig.here  # the launch's configuration, for what compiles meanwhile
        outer, here.config = getattr(here, "config", None), (self.kernel, self.config, args)
        try:
            self._launch(args)
        finally:
            here.config = outer

    def _launch(self, args: tuple) -> None:
        try:
            launch_configured(self.function, args, self.config, self.target, self.context)
        except HostMemoryError:
            # as numba-cuda does for its kernels (od.cuda refuses: the copies are not free): host arrays are
            # copied to the target's memory for the launch and back after it
            moved, copy_back = get_target(self.target).host_copies(args, self.config.stream)
            launch_configured(self.function, moved, self.config, self.target, self.context)
            copy_back()
            args = moved
        if not self.kernel._launched:  # its first launch: the kernel it ran is one of its overloads
            kernel = self.kernel
            kernel._launched.add(KernelCall.of(kernel.py_func, args, kernel.target, kernel.context).job.argtypes)


class _Converting(_LaunchConfiguration):
    """``kernel[blocks, threads, ...]`` of a kernel whose arguments are converted before each launch (explicit
    signatures, numba-cuda's extensions): the conversions, then the launch (``front``)."""

    __slots__ = ("front", "target", "signatures", "extensions")

    def __init__(self, kernel: Kernel, front: Callable[..., None], target, config: LaunchConfig):
        self.kernel, self.config, self.front, self.target = kernel, config, front, target
        self.signatures, self.extensions = kernel._explicit, kernel.extensions

    def __call__(self, *args):
        if self.signatures:
            args = _as_signature(self.kernel.py_func, args, self.signatures, self.target, self.kernel._plans)
        if not self.extensions:
            return self.front(*args)
        # numba-cuda's extensions: each converts the arguments before the launch (``prepare_args(ty, value,
        # stream=, retr=)``, ``ty`` the value's numba type where it has one) and may queue write-backs
        stream, retr, prepared = self.stream or 0, [], []
        for value in args:
            ty = typeof_or_none(value)
            for extension in self.extensions:
                ty, value = extension.prepare_args(ty, value, stream=stream, retr=retr)
            prepared.append(value)
        self.front(*prepared)
        for write_back in retr:
            write_back()


def _as_signature(function, args: tuple, signatures: list, target, plans: dict) -> tuple:
    """``args`` converted to the signature numba-cuda picks for them (:func:`chosen_signature`: exact matches
    first, then the fewest unsafe, safe and promoting conversions): scalars become numpy scalars of the
    signature's types, an int where the signature has a pointer (numba's ``CPointer``) the address of a typed
    pointer into the target's memory. A TypeError, as numba-cuda's, where no signature fits or two fit equally
    (naming the kernel ``function`` and its signatures).

    The choice depends on what the values' classes, dtypes and ranks say of their types: ``plans`` keeps each
    one made (a launch in a loop converts its arguments without choosing again)."""
    key = _plan_key(args)
    try:
        plan = plans.get(key) if key is not None else None
    except TypeError:  # a dtype attribute that is no dtype, unhashable: choose at each launch
        key = plan = None
    if plan is None:
        plan = _plan(function, args, signatures, target)
        if key is not None:
            plans[key] = plan
    if not plan:
        return args
    converted = list(args)
    for index, convert in plan:
        converted[index] = convert(converted[index])
    return tuple(converted)


def _plan_key_python(args: tuple) -> tuple | None:
    """What the signature chosen for ``args`` depends on, where their classes, dtypes and ranks say it: an
    int's class and whether it fits int64, any other value's class, dtype and rank. None where a value has no
    dtype (a tuple, a record, an object an extension converts): those choose at each launch."""
    key: list = []
    for value in args:
        cls = type(value)
        if isinstance(value, np.ndarray):  # the common case first (a target's device arrays too): every launch
            key.append((cls, value.dtype, value.ndim))
        elif cls is int:
            key.append(-(2**63) <= value < 2**63)
        elif cls is float or cls is bool or cls is complex:
            key.append(cls)
        else:
            dtype, ndim = getattr(value, "dtype", None), getattr(value, "ndim", None)
            if dtype is None or ndim is None:
                return None
            key.append((cls, dtype, ndim))
    return tuple(key)


_plan_key = _plan_key_python if plan_key is None else functools.partial(plan_key, np.ndarray)  # C, where built


def _plan(function, args: tuple, signatures: list, target) -> tuple:
    """The conversions of ``args`` to the signature chosen for them: (index, conversion) of each argument not
    passed as it is."""
    name = function.__qualname__
    argtypes = chosen_signature(args, signatures, function)
    views: tuple = (None,) * len(args)
    if argtypes is None and len(signatures) == 1:  # numba-cuda's one-signature kernel: integers' signs as it says
        views = tuple(sign_view(value, ty) for value, ty in zip(args, signatures[0]))
        viewed = tuple(value if view is None else view(value) for view, value in zip(views, args))
        argtypes = chosen_signature(viewed, signatures) if any(views) else None
    if argtypes is None:
        given = ", ".join(str(typeof_or_none(value) or type(value).__name__) for value in args)
        takes = "; ".join(f"({', '.join(map(str, each))})" for each in signatures)
        raise TypeError(f"No matching definition for argument type(s) {given}: {name} takes {takes}")
    conversions = (
        view
        or (functools.partial(_as_pointer, ty=ty, target=target) if isinstance(ty, PtrType) else None)
        or (None if typeof_or_none(value) == ty else scalar_converter(ty))  # a launch types it so already
        for view, ty, value in zip(views, argtypes, args)
    )
    return tuple((index, convert) for index, convert in enumerate(conversions) if convert is not None)


def _as_pointer(value, ty: PtrType, target):
    """An address (an int, as numba-cuda takes one for a ``CPointer``) as a pointer into ``target``'s memory."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return Pointer(int(value), dtype_of(ty.dtype), None, device=get_target(target).device_memory)
    return value


def _any_types(func) -> tuple | None:
    """A device function without a signature takes any arguments, as numba-cuda's does: its annotations
    (``x: np.ndarray``, ``x: float``, a library's ``torch.Tensor``) are the program's documentation, not
    overdub's dispatch (``@od.function`` reads them). None where its parameters are not all positional."""
    parameters = inspect.signature(func).parameters.values()
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters):
        return None
    return (AnyType,) * len(parameters)


def _named(func) -> bool:
    """Does plain pickle find ``func`` by its name (its module's attribute of its qualified name)?"""
    found: object = sys.modules.get(func.__module__)
    for part in func.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is func


def _kernel_arriving(rebuild: Callable[..., Any], args: tuple, made: tuple) -> Kernel:
    """A kernel pickled with its def by value (:meth:`Kernel.__reduce__`)."""
    return Kernel(rebuild(*args), *made)


class _Extensions(list[object]):
    """A kernel's numba-cuda extensions (``kernel.extensions.append(...)``, as numba-cuda's tests do): a change
    drops the kernel's configured launches, which convert through the extensions they found."""

    def __init__(self, kernel: Kernel, extensions: Iterable[object]) -> None:
        super().__init__(extensions)
        self._kernel = kernel

    def _changed(self) -> None:
        self._kernel._configs.clear()

    def append(self, item: object) -> None:
        super().append(item)
        self._changed()

    def extend(self, items: Iterable[object]) -> None:
        super().extend(items)
        self._changed()

    def insert(self, index: typing.SupportsIndex, item: object) -> None:
        super().insert(index, item)
        self._changed()

    def remove(self, item: object) -> None:
        super().remove(item)
        self._changed()

    def pop(self, index: typing.SupportsIndex = -1) -> object:
        item = super().pop(index)
        self._changed()
        return item

    def clear(self) -> None:
        super().clear()
        self._changed()

    def __setitem__(self, index, item) -> None:
        super().__setitem__(index, item)
        self._changed()

    def __delitem__(self, index) -> None:
        super().__delitem__(index)
        self._changed()

    def __iadd__(self, items):  # type: ignore[misc]  # list's own is typed as returning Self
        super().__iadd__(items)
        self._changed()
        return self


class _ForAll:
    """``kernel.forall(ntasks)``: calling it launches enough blocks of a suggested size to cover the tasks."""

    __slots__ = ("kernel", "ntasks", "tpb", "stream", "sharedmem")

    def __init__(self, kernel: Kernel, ntasks: int, tpb: int, stream, sharedmem: int):
        self.kernel, self.ntasks, self.tpb, self.stream, self.sharedmem = kernel, ntasks, tpb, stream, sharedmem

    def __call__(self, *args):
        threads = self.tpb or self._suggested_threads(args)
        threads = max(min(threads, self.ntasks), 1)
        blocks = max(math.ceil(self.ntasks / threads), 1)
        self.kernel._configured(_launch_config((blocks, threads, self.stream, self.sharedmem)))(*args)

    def _suggested_threads(self, args) -> int:
        try:
            compiled = self.kernel._compiled(args)
        except TypeError:  # host arrays on CUDA: the launch copies them; size for the default
            return 128
        return compiled.launcher.suggested_block_size(self.sharedmem)
