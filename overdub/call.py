"""A kernel call as one value, and the tiers that find (or make) what it runs.

Every way of naming a kernel call -- ``od.cuda(kernel, *args, ...)``, ``kernel[blocks, threads](...)`` of
``od.jit``, ``od.code_ptx(kernel, *types)``, ``od.explain`` -- builds one :class:`KernelCall`: the kernel's
Python function (lifted, for a closure over data: :mod:`overdub.closures`), the target, the context chain, the
launch's hidden state, and per argument one :class:`overdub.arguments.Argument`
(its kind, signature and numba type, read once). From it follow the compile job, the launch table's key and
the launch function; nothing below re-derives them.

The lookup reads as tiers, GPUCompiler's shape (``cached_compilation``):

* **fast path** -- the launch table: ``od.cuda`` itself (in C where the extension is built) finds a launch
  function for (kernel, context, target, argument classes) and calls it; no ``KernelCall`` is built;
* **somewhat fast path** -- the kernel compiled in this process for the call's job, still valid: a new
  launch function for these argument classes (:meth:`KernelCall.compiled`);
* **slow path** -- under the compile lock, the disk cache (its facts re-checked here), else a compile
  (:func:`overdub.compiler.cached_kernel`: the target's ``compile_kernel``, then its ``link``).

A launch's configuration -- grid, block, shared memory, stream, device, debug -- is one
:class:`overdub.launchconfig.LaunchConfig`, made (and checked) where the fast path leaves off: by
:func:`launch_slow` from the options the fast path was given, or by the caller (``od.cuda``'s rarer keywords,
``kernel[blocks, threads]``, ``od.graph``), and passed on as one value. The device a launch runs on is the
one current on the launching thread when the call is built: the configuration's ``device`` is made current
around the whole launch (:func:`overdub.launch.launch_configured`), and the call's target is the target for
that device's architecture (``Target.for_current_device``), so a ``KernelCall`` needs no device of its own.
"""

from __future__ import annotations

import dis
import functools
import inspect
import types as pytypes
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from . import arguments, bridge, closures, compiler, reruns, stacks, travel
from .arguments import Argument
from .context import Context
from .job import CompileError, CompileJob
from .launchconfig import LaunchConfig, LaunchConfigError, named
from .places import place
from .registry import GenericFunction
from .runtime import Launch, launch_key, runtime
from .targets import get_target
from .types import is_concrete

if TYPE_CHECKING:
    from .targets import Launcher, Target

__all__ = [
    "KernelCall",
    "launch_slow",
    "slow_path",
    "launch_compiled",
    "launch_from_table",
    "check_call",
    "check_kernel",
    "launch_own",
]


@dataclass(frozen=True, eq=False, slots=True)
class KernelCall:
    """One call of a kernel (see the module docstring). Built by :meth:`of`; ``arguments`` are the arguments
    the compiled kernel takes: the hidden state, a lifted closure's captured values, then the call's own."""

    kernel: object  # what the user launched: a def, an od.jit or numba kernel
    function: pytypes.FunctionType  # what is compiled: the kernel's function, or its lifted form
    args: tuple[object, ...]  # the call's own arguments (values, or numba types for a reflection)
    target_option: str | Target | None  # the target as the call named it (part of the launch table's key)
    target: Target  # the Target it resolves to (for a launch, the architecture of the device current here)
    context: Context | tuple[Context, ...] | None
    state: object
    chain: tuple[Context, ...]
    lifted: closures.Lifted | None
    arguments: tuple[Argument, ...]
    job: CompileJob
    typed: bool  # may arguments be numba types (a reflection)?
    defaults: tuple[object, ...] = ()  # the default values of the parameters the call leaves out, passed
    interned: bool = False  # compiled as another def of its definition or content (_canonical)

    @classmethod
    def of(
        cls,
        kernel: object,
        args: tuple[object, ...],
        target: str | Target | None = None,
        context: Context | tuple[Context, ...] | None = None,
        state: object = None,
        typed: bool = False,
    ) -> KernelCall:
        """The call of ``kernel`` with ``args`` on ``target`` (a name, a target object or None: the default) in
        ``context`` with ``state``. ``typed``: arguments (and the state) may be numba types instead of values
        (reflection: ``od.code_ptx``, an ``od.jit`` signature)."""
        # a def, or the function of a numba / od.jit kernel (check_kernel refuses anything else before a launch)
        function = cast(pytypes.FunctionType, bridge.python_function(kernel) or kernel)
        travel.check_arrived()
        own = function
        function = _canonical(function) if isinstance(function, pytypes.FunctionType) else function
        # an od.jit kernel launched by od.cuda: its own target (its compile options) and context, unless given
        tgt, own_context = getattr(kernel, "launch_defaults", _launch_defaults)(target)
        describe = _describer(tgt, typed)
        ctx = stacks.resolve(own_context if context is None else context) or tgt.base  # a tuple: a stack
        chain = ctx.chain(tgt, ctx.launch_state_type(state, lambda value: describe(value).type))
        lifted = closures.lift(function)
        if lifted is not None and not _passable(describe, lifted.captured_values()):
            lifted = None  # it captures a host array on CUDA: a constant of its code, as numba-cuda freezes one
        compiled = function if lifted is None else lifted.function
        hidden = () if state is None else (state,)
        defaults = passed_defaults(function, len(args))
        values = hidden + (() if lifted is None else lifted.captured_values()) + tuple(args) + defaults
        # named by the compiled function's parameters: a lifted closure's captured variables come first
        described = tuple(_named(describe, compiled, i - len(hidden), value) for i, value in enumerate(values))
        job = CompileJob.of(compiled, tuple(a.type for a in described), chain)
        return cls(
            kernel,
            function,
            tuple(args),
            target,
            tgt,
            context,
            state,
            chain,
            lifted,
            described,
            job,
            typed,
            defaults,
            function is not own,
        )

    @property
    def key(self) -> tuple[object, ...]:
        """The launch table's key of this call (the one ``od.cuda``'s fast path builds)."""
        return launch_key(self.kernel, self.context, self.target_option, self.args, self.state)

    def compiled(self) -> compiler.Kernel:
        """The compiled kernel for this call: the somewhat fast path (valid in memory), else the slow path
        (disk cache, compile). A closure whose lifted form does not compile -- it uses a captured value where
        numba needs a constant, such as an array shape -- is compiled as it is, its captured values constants,
        from then on: then the kernel of :meth:`unlifted`."""
        try:
            return compiler.cached_kernel(self.job)
        except CompileError:
            if self.lifted is None:
                raise
        closures.keep_unlifted(self.function)
        return self.unlifted().compiled()

    def unlifted(self) -> KernelCall:
        """This call again, built after :meth:`compiled` gave up lifting its closure."""
        return KernelCall.of(self.kernel, self.args, self.target_option, self.context, self.state, self.typed)

    def launch_function(self, kernel: compiler.Kernel) -> Launch:
        """A launch function of ``kernel`` for arguments like this call's (it takes the hidden state and the
        call's own arguments; a lifted closure's captured values are read at each launch)."""
        if self.lifted is not None and kernel.job != self.job:  # compiled() gave up lifting: the closure as it is
            return self.unlifted().launch_function(kernel)
        hidden = 0 if self.state is None else 1
        launcher = cast("Launcher", kernel.launcher)  # what the target built (compiler.py cannot name its type)
        launch: Launch = launcher.launch_function(kernel, self.arguments)
        if self.lifted is not None:
            launch = closures.with_captured_values(launch, self.lifted, self.function, self.arguments, hidden)
        if self.defaults:
            launch = _with_defaults(launch, self.defaults)
        return launch


def _passable(describe: Callable[[object], Argument], values: tuple[object, ...]) -> bool:
    """Can each of ``values`` be passed to a kernel on the target ``describe`` describes for? Not where one lives
    in memory the target's kernels do not read as a parameter (a host array on CUDA)."""
    try:
        for value in values:
            describe(value)
    except arguments.HostMemoryError:
        return False
    return True


def passed_defaults(function: pytypes.FunctionType, given: int) -> tuple[object, ...]:
    """The default values of the parameters a call of ``function`` with ``given`` arguments leaves out, to pass
    as arguments: a CUDA kernel takes every parameter (numba-cuda has no omitted arguments: a kernel launched
    without its defaulted parameter failed to compile), and both targets compile the same kernel. Empty where
    one of them has no argument kind (None, an object): those stay constants, as numba's CPU compiler makes
    them (and numba-cuda refuses them, naming the kernel)."""
    missing = function.__code__.co_argcount - given
    defaults = function.__defaults__ or ()
    if missing <= 0 or len(defaults) < missing:
        return ()
    values = tuple(defaults[-missing:])
    return values if all(arguments.kind_of(value) is not None for value in values) else ()


def _with_defaults(launch: Launch, defaults: tuple[object, ...]) -> Launch:
    """``launch`` taking the call's own arguments and passing ``defaults`` after them."""

    def launch_with_defaults(
        args: tuple[object, ...], blocks: object, threads: object, shmem: int, stream: object
    ) -> bool:
        return launch((*args, *defaults), blocks, threads, shmem, stream)

    vars(launch_with_defaults).update(kernel=launch.kernel, guarded=launch.guarded)
    return cast("Launch", launch_with_defaults)


def _describer(target: Target, typed: bool) -> Callable[[object], Argument]:
    """How the call's values are described: by the target (which refuses what it cannot take), and, for a
    reflection, a numba type as itself."""
    if not typed:
        return target.argument
    return lambda value: Argument.of_type(value) if is_concrete(value) else target.argument(value)


def _named(
    describe: Callable[[object], Argument], function: pytypes.FunctionType, position: int, value: object
) -> Argument:
    """``describe(value)``; an argument the target refuses is named by the kernel's parameter it was passed to."""
    try:
        return describe(value)
    except (TypeError, ValueError) as error:  # overdub's refusals; numba's "cannot determine the type"
        code = function.__code__
        params = code.co_varnames[: code.co_argcount]
        where = f"parameter {params[position]!r}" if 0 <= position < len(params) else f"argument {position}"
        error.args = (f"{function.__qualname__}, {where}: {error}",)
        raise


def launch_from_table(
    kernel: object,
    args: tuple[object, ...],
    target: str | Target | None,
    context: Context | tuple[Context, ...] | None,
    state: object,
    blocks: object,
    threads: object,
    shmem: int,
    stream: object,
) -> bool:
    """The fast path in Python: the launch table's launch functions for the call, tried in turn with the
    launch's raw options; True when one launched (``od.cuda``'s own lookup is in C where the extension is
    built)."""
    launched = args if state is None else (state, *args)
    functions = runtime.launches.get(launch_key(kernel, context, target, args, state), ())
    return any(launch(launched, blocks, threads, shmem, stream) for launch in functions)


def launch_slow(
    kernel: object,
    args: tuple[object, ...],
    *,
    blocks: object = 1,
    threads: object = 1,
    shmem: object = 0,
    stream: object = None,
    target: str | Target | None = None,
    context: Context | tuple[Context, ...] | None = None,
    state: object = None,
) -> None:
    """A launch the launch table could not serve (the fast path missed, or its launch functions' checks
    failed), as the fast path hands it over: its options by name (``_fastlaunch.OPTIONS``), made one checked
    :class:`LaunchConfig` here, then :func:`slow_path`."""
    try:
        config = LaunchConfig.of(blocks, threads, shmem, stream)
    except LaunchConfigError as error:
        raise named(error, kernel) from None
    slow_path(kernel, args, config, target, context, state)


def slow_path(
    kernel: object,
    args: tuple[object, ...],
    config: LaunchConfig,
    target: str | Target | None,
    context: Context | tuple[Context, ...] | None,
    state: object = None,
) -> None:
    """The slow path: build the call, get its compiled kernel, add a launch function for these argument
    classes, launch with ``config``. A launch passing state passes it as the kernel's hidden first argument.

    Every check of the launch runs before anything is compiled or read from the disk cache, with the message
    the launch function would give: the configuration (checked when ``config`` was made), the kernel and the
    arguments' binding (:func:`check_call`), the target, then each argument's kind and memory (described by
    the target in :meth:`KernelCall.of`).

    A redefinition on another thread may invalidate the kernel between its compile and its launch; then the
    kernel is compiled again, as many times as that happens: a launch always runs a valid kernel."""
    runtime.collect()
    travel.note_kernel(kernel)
    canonical = _canonical(kernel) if type(kernel) is pytypes.FunctionType else kernel
    # a def run again unchanged, or arrived by value, launches as the first of it (from the table where it is)
    rerun = cast(pytypes.FunctionType, kernel) if canonical is not kernel else None
    kernel = canonical
    if rerun is None or not launch_from_table(kernel, args, target, context, state, *config.options()):
        check_call(kernel, args)
        tgt = get_target(target)
        with tgt.on_device(None, "a launch", config.stream):  # on a stream: in the stream's context
            tgt.check_launchable(config.stream)
            launch_compiled(kernel, args, config, target, context, state)
    if rerun is not None and cast(pytypes.FunctionType, kernel).__globals__ is rerun.__globals__:
        _alias(rerun, kernel, args, target, context, state)


def _alias(
    rerun: pytypes.FunctionType,
    first: object,
    args: tuple[object, ...],
    target: str | Target | None,
    context: Context | tuple[Context, ...] | None,
    state: object,
) -> None:
    """A def run again unchanged, launched as the first of its definition (whose kernel the launch table has
    under its own key), added to the table under its own key: its next launches take the fast path. Each such
    launch function checks first that the def is still what it was (its code and defaults: what made it the
    same definition -- they are attributes one may assign), then runs the first def's, which checks the
    kernel as any launch does."""
    key = launch_key(rerun, context, target, args, state)
    if key in runtime.launches:
        return
    for launch in runtime.launches.get(launch_key(first, context, target, args, state), ()):
        if launch.guarded:
            runtime.add_launch(key, _checking_def(rerun, launch))


def _checking_def(rerun: pytypes.FunctionType, launch: Launch) -> Launch:
    code, defaults, held = rerun.__code__, rerun.__defaults__, weakref.ref(rerun)  # (weakly: the table's key)

    def aliased(args: tuple[object, ...], blocks: object, threads: object, shmem: int, stream: object, /) -> bool:
        func = held()
        return (
            func is not None
            and func.__code__ is code
            and func.__defaults__ is defaults
            and launch(args, blocks, threads, shmem, stream)
        )

    aliased.kernel, aliased.guarded = launch.kernel, True  # type: ignore[attr-defined]  # what the table reads
    return cast(Launch, aliased)


def _canonical(function: pytypes.FunctionType) -> pytypes.FunctionType:
    """The def compiled for ``function``: the first of its definition where it is one run again unchanged (a
    notebook cell, ``exec``, a reload: :mod:`overdub.reruns`), or the first of its content where it arrived by
    value (a task's copy: :func:`overdub.travel.interned`); else itself."""
    found = travel.interned(function)
    return reruns.canonical(function) if found is function else found


def _launch_defaults(target: str | Target | None) -> tuple[Target, None]:
    return get_target(target), None


def check_call(kernel: object, args: tuple[object, ...]) -> None:
    """A launch's checks of the kernel and its arguments' binding, before anything compiles (the kernel as
    launched: a def, or a numba or ``od.jit`` kernel)."""
    check_kernel(bridge.python_function(kernel) or kernel, args)


def launch_compiled(
    kernel: object,
    args: tuple[object, ...],
    config: LaunchConfig,
    target: str | Target | None,
    context: Context | tuple[Context, ...] | None,
    state: object,
    add: bool = True,
) -> tuple[KernelCall, compiler.Kernel, Launch]:
    """The slow path's launch, in the launch's context: the compiled kernel for the device current here and a
    launch function for these argument classes, which launches with ``config``; ``add``: the launch function
    is added to the launch table -- unless the table has one already (a launch on a stream of another context,
    which the Python launch function leaves to this path). Returns the call, its compiled kernel and the launch
    function (a graph's capture keeps them)."""
    launched = args if state is None else (state, *args)
    while True:
        call = KernelCall.of(kernel, args, target, context, state)  # describes (and checks) every argument
        compiled = call.compiled()
        launch = call.launch_function(compiled)
        if launch(launched, *config.options()):
            if (
                add
                and launch.guarded
                and not call.interned
                and not _served(call.key, compiled)
                and not compiler.configuration_bound(compiled)
            ):
                runtime.add_launch(call.key, launch)
            return call, compiled, launch
        if call.lifted is None and compiled.usable():  # (a captured value may have changed meanwhile)
            raise RuntimeError(
                f"overdub internal error: the launch function of {compiled.job.call()} rejected "
                f"the arguments it was made for"
            )


def launch_own(call: KernelCall, compiled: compiler.Kernel, config: LaunchConfig) -> None:
    """Launch ``compiled`` for ``call`` with ``config`` as the slow path launches (the checks, the device, a
    launch function), where ``compiled`` is an ``od.jit`` kernel's own code for this launch configuration,
    which neither the kernel cache nor the launch table serves to another launch."""
    check_call(call.kernel, call.args)
    tgt = call.target
    with tgt.on_device(None, "a launch", config.stream):
        tgt.check_launchable(config.stream)
        if not call.launch_function(compiled)(call.args, *config.options()):
            raise RuntimeError(
                f"overdub internal error: the launch function of {compiled.job.call()} rejected the arguments "
                f"it was made for"
            )


def _served(key: tuple[object, ...], compiled: compiler.Kernel) -> bool:
    """Has the launch table a launch function of ``compiled`` under ``key``?"""
    return any(launch.kernel is compiled for launch in runtime.launches.get(key, ()))


def check_kernel(kernel: object, args: tuple[object, ...]) -> None:
    """Refuse, before anything is compiled, what cannot be a kernel launch: a kernel that is not a plain
    Python function, arguments that do not bind to its parameters, a kernel that returns a value."""
    not_arrived = getattr(kernel, "__overdub_not_arrived__", None)
    if not_arrived is not None:  # a def sent here that could not be made (overdub.travel): why, not its shape
        raise RuntimeError(not_arrived)
    if not isinstance(kernel, pytypes.FunctionType):
        raise TypeError(
            f"od.cuda launches a kernel written as a Python function (a def, or a numba cuda.jit "
            f"kernel), not {_what(kernel)}" + _KERNEL_HINTS.get(type(kernel), "")
        )
    signature = inspect.signature(kernel)
    unsupported = [
        p.name for p in signature.parameters.values() if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if unsupported:
        raise TypeError(
            f"kernel {kernel.__qualname__}{signature}: kernels take positional parameters only, not "
            f"{', '.join(unsupported)} (*args, **kwargs and keyword-only parameters)"
        )
    try:
        signature.bind(*args)
    except TypeError as exc:
        raise TypeError(
            f"kernel {kernel.__qualname__}{signature} cannot take the {len(args)} "
            f"argument{'s' if len(args) != 1 else ''} given after it: {exc}"
        ) from None
    line = returning_line(kernel.__code__)
    if line is not None:
        raise TypeError(
            f"kernel {kernel.__qualname__} returns a value ({place(kernel.__code__.co_filename, line)}); kernels "
            f"return nothing -- store results in an array argument"
        )


def returns_value(code: pytypes.CodeType) -> bool:
    """Does ``code`` return anything but None?"""
    return returning_line(code) is not None


def returning_line(code: pytypes.CodeType) -> int | None:
    """The line of the first return of ``code`` of anything but None, or None where every return returns
    None. (Read off the bytecode: each return's value.)"""
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions):
        returns = instruction.opname == "RETURN_CONST" and instruction.argval is not None
        if instruction.opname == "RETURN_VALUE":
            before = instructions[i - 1]
            returns = not (before.opname == "LOAD_CONST" and before.argval is None)
        if returns:
            return instruction.positions.lineno if instruction.positions else code.co_firstlineno
    return None


def _what(value: object) -> str:
    if isinstance(value, type):
        return f"the class {value.__qualname__}"
    return f"a {type(value).__name__} ({value!r:.60})"


def _where(func: pytypes.FunctionType) -> str:
    return place(func.__code__.co_filename, func.__code__.co_firstlineno)


_KERNEL_HINTS = {
    GenericFunction: ": a generic function is a device function; launch a def that calls it",
    functools.partial: ": write a kernel def that calls the function with the bound arguments",
}
