"""The target-independent driver: rewrite -> typing (dispatch, edges) -> target library; the compile caches.

One value describes a compile: a :class:`CompileJob` -- the def, the argument types, the context chain (whose
last element names the target) and keyword argument types. It keys both caches of :data:`runtime`:

* **method instances** (Julia's name for a method compiled for concrete argument types) -- a def compiled in
  a context chain -- are shared by every kernel that calls them, while valid;
* **kernels**, each holding the launcher its target made.

Both are :mod:`overdub.world` nodes, checked by a flag plus the per-namespace version check of
:mod:`overdub.bindings`. A job holds its function weakly, so a cache entry dies with its function.

Dispatch happens in numba's type inference: each Overdubbed callee is typed as an :class:`OverdubCallType`,
whose ``get_call_type`` calls :func:`resolve_call` with the argument types. It asks the chain's overdub tables,
then the callee itself, records each answer as an edge of the node being built, and compiles what it picked.
"""

from __future__ import annotations

import logging
import time
import types as pytypes
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from numba.core import types as nt

from . import bridge, diskcache, hooks, world
from .bindings import Guarded
from .operators import OperatorSite, numba_signature
from .registry import GenericFunction, MethodError
from .rewrite import Overdubbed, Unobserved, interned, rewrite, state_type, substitute, takes_state
from .runtime import runtime
from .tables import asked

if TYPE_CHECKING:
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from .context import Context, TargetRoot
    from .targets import Target

Chain = tuple["Context", ...]  # the contexts a function is compiled in, the target's root last
Answer = tuple["Signature", object]  # how a call types: its signature, and the key lowering finds it by
_T = TypeVar("_T")

log = logging.getLogger("overdub")

__all__ = [
    "CompileJob",
    "CompileError",
    "MethodInstance",
    "Kernel",
    "resolve_call",
    "cached_kernel",
    "loaded_kernel",
    "explain",
    "stats",
]


class CompileError(Exception):
    """A kernel could not be compiled; the message is numba's, with the kernel's source lines.

    Where numba raised one of its own errors, the CompileError is also an instance of that error's class
    (``numba.core.errors.TypingError``, ...), so code written for numba -- ``except TypingError`` -- still
    catches it."""

    def __reduce__(self) -> tuple[Callable[[type[BaseException] | None, str], CompileError], tuple[object, ...]]:
        return _compile_error, (_NUMBA_CLASS.get(type(self)), str(self))


# numba error class -> the CompileError subclass that is also one
_AS_NUMBA_CLASS: dict[type[BaseException], type[CompileError]] = {}
_NUMBA_CLASS: dict[type[CompileError], type[BaseException]] = {}  # and back
runtime.register_cache(f"{__name__}._AS_NUMBA_CLASS", _AS_NUMBA_CLASS, kept="the classes made are definitions")
runtime.register_cache(f"{__name__}._NUMBA_CLASS", _NUMBA_CLASS, kept="the classes made are definitions")


def _compile_error(numba_class: type[BaseException] | None, message: str) -> CompileError:
    """A CompileError carrying ``message``, also an instance of ``numba_class`` when that is given."""
    if numba_class is None:
        return CompileError(message)
    cls = _AS_NUMBA_CLASS.get(numba_class)
    if cls is None:
        cls = type(
            "CompileError",
            (CompileError, numba_class),
            {"__module__": CompileError.__module__, "__qualname__": "CompileError"},
        )
        cls = _AS_NUMBA_CLASS.setdefault(numba_class, cls)
        _NUMBA_CLASS[cls] = numba_class
    return cls(message)


def type_list(argtypes: Sequence[object]) -> str:
    return ", ".join(str(t) for t in argtypes)


def chain_name(chain: Chain) -> str:
    return "/".join(ctx.name for ctx in chain)


@dataclass(frozen=True)
class CompileJob:
    """What a compile depends on besides the edges it records (GPUCompiler's ``CompilerJob``): the function,
    held weakly, the argument types, the context chain -- ending in the target's root -- and the types of
    keyword arguments. Equal jobs compile to the same code in the same world."""

    # the canonical weak reference to the def (compared by the def's identity)
    func_ref: weakref.ref[pytypes.FunctionType]
    argtypes: tuple[object, ...]  # numba types
    chain: Chain
    kwtypes: tuple[tuple[str, object], ...] = ()  # (name, numba type), by name
    name: str = ""

    @classmethod
    def of(
        cls,
        func: pytypes.FunctionType,
        argtypes: Sequence[object],
        chain: Chain,
        kwtypes: Mapping[str, object] | None = None,
    ) -> CompileJob:
        return cls(weakref.ref(func), tuple(argtypes), chain, tuple(sorted((kwtypes or {}).items())), func.__qualname__)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CompileJob)
            and self.func_ref == other.func_ref
            and (self.argtypes, self.chain, self.kwtypes) == (other.argtypes, other.chain, other.kwtypes)
        )

    def __hash__(self) -> int:
        return hash((self.func_ref, self.argtypes, self.chain, self.kwtypes))

    @property
    def func(self) -> Callable[..., Any]:
        """The def (alive while its job is used: the caches drop the jobs of a def that died). Typed as a
        callable: mypy reads a property of type FunctionType as a bound method (FunctionType.__get__)."""
        return cast(pytypes.FunctionType, self.func_ref())

    @property
    def target(self) -> Target:
        return cast("TargetRoot", self.chain[-1]).target

    def call(self) -> str:
        return f"{self.name}({type_list(self.argtypes)})"


stats = runtime.stats
reset = runtime.reset


# --- method instances -----------------------------------------------------------------------------------


class MethodInstance(Guarded):
    """A def compiled in a context chain for concrete argument types: its signature, the key numba's lowering
    finds it by, and what keeps its code alive (and registered with the target) while any caller lives."""

    __slots__ = ("job", "sig", "impl_key", "keepalive")

    def __init__(self, job: CompileJob) -> None:
        super().__init__()
        self.job = job
        self.sig: Signature | None = None  # None while it is being compiled
        self.impl_key: object = None
        self.keepalive: object = None

    def on_invalidate(self, cause: str) -> None:
        runtime.methods.discard(self.job, self)

    def describe(self) -> str:
        return f"{self.job.call()} compiled in {chain_name(self.job.chain)}"


def _consult_chain(chain: Chain) -> None:
    """What is compiled in ``chain`` depends on each context's parent, forwards and replacements."""
    for ctx in chain:
        world.consult(ctx.shape)


def _use(node: Guarded) -> None:
    """The node being built depends on ``node``, on every global ``node`` read, and needs what it needs."""
    world.consult(node)
    builder = world.being_built()
    if isinstance(builder, Guarded):
        builder.guard.include(node.guard)
        builder.needs |= node.needs


def compile_method(
    func: pytypes.FunctionType,
    chain: Chain,
    typing_context: TypingContext,
    argtypes: tuple[nt.Type, ...],
    kwtypes: dict[str, nt.Type],
) -> Answer:
    """Compile ``func`` (rewritten in ``chain``) for ``argtypes``; reuse a valid earlier compile."""
    job = CompileJob.of(func, argtypes, chain, kwtypes)
    node = cast("MethodInstance | None", runtime.methods.get(job))  # the runtime's method cache holds these
    if node is not None and node.sig is None:
        sites = bridge.call_sites()
        raise CompileError(
            f"{job.call()} calls itself{' at ' + sites[0] if sites else ''}: recursion is not supported in kernels"
        )
    if node is None or not node.usable():
        node = MethodInstance(job)  # in progress until it has a signature
        runtime.methods.put(job, node)
        try:
            with world.building(node):
                _consult_chain(chain)
                rewritten = rewrite(func, chain)
                node.sig, node.impl_key, node.keepalive = _compile_for_launch_state(
                    job.target, func, rewritten, chain, typing_context, argtypes, kwtypes
                )
        except BaseException:
            runtime.methods.discard(job, node)
            world.retire([node])
            raise
        runtime.count("method_instances")
    _use(node)
    return cast("Signature", node.sig), node.impl_key  # compiled: it has its signature


def _compile_for_launch_state(
    target: Target,
    func: pytypes.FunctionType,
    rewritten: pytypes.FunctionType,
    chain: Chain,
    typing_context: TypingContext,
    argtypes: tuple[nt.Type, ...],
    kwtypes: dict[str, nt.Type],
) -> tuple[Signature, object, object]:
    """The target's compile of ``func`` rewritten in a chain; in a chain with state (where the rewrite gave it
    the hidden state parameter), compiled with the state's type first and called with the caller's state."""
    state = state_type(chain)
    if state is None:
        if takes_state(func):
            sites = bridge.call_sites()
            raise CompileError(
                f"od.state() called{' at ' + sites[0] if sites else ''} in a launch without state: "
                f"it is the state a launch in a context with state passes -- declare it with "
                f"od.Context(name, state=T) and launch with od.cuda(..., context=ctx, state=value)"
            )
        return target.compile_method(rewritten, typing_context, argtypes, kwtypes)
    sig, impl_key, keepalive = target.compile_method(rewritten, typing_context, (state,) + argtypes, kwtypes)
    outer_sig, outer_key, registration = target.call_with_state(sig, impl_key)
    return outer_sig, outer_key, (keepalive, registration)


def _compile_callee(
    func: Callable[..., Any],
    chain: Chain,
    typing_context: TypingContext,
    args: tuple[nt.Type, ...],
    kws: dict[str, nt.Type],
) -> Answer:
    """Compile a callee for the call's argument types without their literal values, and -- as numba does --
    with them where that fails to type (a constant a callee passes on to ``cuda.shared.array``, say)."""
    argtypes = tuple(bridge.unliteral(a) for a in args)
    kwtypes = {k: bridge.unliteral(v) for k, v in kws.items()}
    function = cast(pytypes.FunctionType, func)  # what a call compiles is a def: a method's, a hooked call's
    try:
        return compile_method(function, chain, typing_context, argtypes, kwtypes)
    except Exception as exc:
        if (argtypes, kwtypes) == (tuple(args), dict(kws)) or bridge.compile_error_message(exc) is None:
            raise
    return compile_method(function, chain, typing_context, tuple(args), dict(kws))


# --- dispatch during typing -----------------------------------------------------------------------------


class OverdubCallType(nt.Callable):
    """The numba type of one Overdubbed callee; dispatch happens in ``get_call_type``."""

    def __init__(self, site: Overdubbed) -> None:
        self.site = site
        self._impl_keys: dict[tuple[nt.Type, ...], object] = {}
        # (the node being built, weakly; its answers by argument types)
        self._answers: tuple[weakref.ref[world.Node] | None, dict[tuple[object, ...], Answer]] = (None, {})
        name = getattr(site.callee, "__qualname__", None) or getattr(site.callee, "__name__", repr(site.callee))
        super().__init__(name=f"overdub({name})")

    @property
    def key(self) -> Overdubbed:
        return self.site

    def get_call_type(self, context: TypingContext, args: Sequence[nt.Type], kws: Mapping[str, nt.Type]) -> Signature:
        sig, impl_key = self._resolved(context, tuple(args), dict(kws))
        self._impl_keys[tuple(sig.args)] = impl_key
        return sig

    def _resolved(self, context: TypingContext, args: tuple[nt.Type, ...], kws: dict[str, nt.Type]) -> Answer:
        """:func:`resolve_call`, once per argument types for the node being built: numba's type inference
        asks again each time it propagates, and the first answer's edges are already the node's (a
        redefinition waits for the compile, which holds the world's lock)."""
        builder, call = world.being_built(), (args, tuple(sorted(kws.items())))
        ref, answers = self._answers
        if builder is None or ref is None or ref() is not builder:
            answers = {}
            self._answers = (None if builder is None else weakref.ref(builder), answers)
        answer = answers.get(call)
        if answer is None:
            answer = resolve_call(self.site, context, args, kws)
            if builder is not None:
                answers[call] = answer
        return answer

    def get_call_signatures(self) -> tuple[list[Signature], bool]:
        return [], True

    def get_impl_key(self, sig: Signature) -> object:
        return self._impl_keys[tuple(sig.args)]


bridge.register_opaque(Overdubbed, OverdubCallType)


def _raise_at_call_site(error: MethodError) -> NoReturn:
    sites = bridge.call_sites()
    if sites:
        error.call_site = " <- ".join(sites)
    raise error


def resolve_call(
    site: Overdubbed, typing_context: TypingContext, args: tuple[nt.Type, ...], kws: dict[str, nt.Type]
) -> Answer:
    """Resolve a call of an Overdubbed callee during numba's typing: (signature, implementation key).

    Order: each context of the chain (the first applicable overdub wins; its body compiles one context
    down), the methods added to the callee with ``od.method`` and, for an operator, the dunders of its
    operands' classes (:mod:`overdub.dunders`), the chain's forwards (``print`` -> ``cuprintln``), then the
    callee itself: a generic function's method, a plain function -- or the Python function of a numba
    ``njit`` or ``cuda.jit(device=True)`` dispatcher -- compiled in the same chain (so it is an edge like
    any callee, and compiles for the target with no GPU present), or, for what numba implements itself
    (``@overload``, ``@intrinsic``, libdevice, fp16, cooperative groups: Python placeholders whose bodies
    mean nothing; an operator of a kernel), numba's own typing.
    """
    argtypes = tuple(bridge.unliteral(a) for a in args)
    if not site.dispatched:  # a hook method, called by a hooked call
        return _compile_callee(site.callee, site.chain, typing_context, args, kws)
    hooked = _hooked_call(site, typing_context, args, kws) if site.observed else None
    if hooked is not None:
        return _compile_callee(hooked, site.chain, typing_context, args, kws)
    ops = site.operators if isinstance(site, OperatorSite) else (site.callee,)
    for op in ops:  # a += b: iadd's tables, then add's (Python's fallback)
        found = _user_method(site.chain, op, argtypes)
        if found is not None:
            func, chain = found
            return _compile_callee(func, chain, typing_context, args, kws)
    if isinstance(site, OperatorSite):
        return _numba_operator(site, typing_context, args, argtypes)
    return _resolve_callee(site, typing_context, args, kws, argtypes)


def _user_method(
    chain: Chain, callee: Callable[..., Any], argtypes: tuple[nt.Type, ...]
) -> tuple[Callable[..., Any], Chain] | None:
    """(the def, the chain to compile it in) of the overdub or added method a call reaches, or None. Each
    table asked (:func:`overdub.tables.asked`) is an edge, whatever its answer."""
    for each in asked(chain, callee):
        match = each.table.dispatch(argtypes)
        if match.method is not None:
            return match.method.func, each.below
        if match.ambiguous:
            _raise_at_call_site(cast(MethodError, match.error()))  # an ambiguity's
    return None


def _numba_operator(
    site: OperatorSite, typing_context: TypingContext, args: tuple[nt.Type, ...], argtypes: tuple[nt.Type, ...]
) -> Answer:
    """An operator no table took: numba's own typing of its node, which the node is turned back into. Where
    numba has no meaning for it either, a MethodError listing the methods added to the operator -- or, if
    none was, numba's own error, as for an operator never rerouted."""
    candidates = [
        m for op in site.operators for each in asked(site.chain, op) if not each.overdub for m in each.table.methods
    ]
    try:
        sig = numba_signature(site, typing_context, args)
    except Exception as exc:
        if not candidates or bridge.compile_error_message(exc) is None:
            raise
        sig = None
    if sig is None:
        _raise_at_call_site(MethodError(getattr(site.callee, "__name__", repr(site.callee)), argtypes, candidates))
    site.by_numba.add(tuple(sig.args))
    return sig, None


def _resolve_callee(
    site: Overdubbed,
    typing_context: TypingContext,
    args: tuple[nt.Type, ...],
    kws: dict[str, nt.Type],
    argtypes: tuple[nt.Type, ...],
) -> Answer:
    chain, callee = site.chain, site.callee
    for ctx in chain:
        forward = ctx.forwarded(callee)
        if forward is not None:
            return resolve_call(_forwarded(site, forward), typing_context, args, kws)
    if getattr(callee, "__overdub_intrinsic__", False):
        callee = cast(Any, callee).device  # an intrinsic: its device function
    if isinstance(callee, GenericFunction):
        if kws:
            raise TypeError(f"{callee.__name__}: generic functions take positional arguments only")
        match = callee.table.dispatch(argtypes)
        if match.method is None:
            _raise_at_call_site(cast(MethodError, match.error()))  # no method: the error says why
        return _compile_callee(match.method.func, chain, typing_context, args, kws)
    function = bridge.python_function(callee)
    if function is not None and not bridge.numba_implements(typing_context, callee):
        return _compile_callee(function, chain, typing_context, args, kws)
    inlined = bridge.always_inlined_overload(typing_context, callee, args, kws)
    if inlined is not None:
        return _compile_callee(inlined, chain, typing_context, args, kws)
    sig, impl_key = bridge.delegate(typing_context, callee, args, kws)
    if sig is None:
        _raise_at_call_site(MethodError(getattr(callee, "__name__", repr(callee)), argtypes))
    return sig, impl_key


def _hooked_call(
    site: Overdubbed, typing_context: TypingContext, args: tuple[nt.Type, ...], kws: dict[str, nt.Type]
) -> Callable[..., Any] | None:
    """The generated function running this call with the hooks observing it (:mod:`overdub.hooks`), or
    None when none does."""

    def result_type() -> nt.Type:
        unobserved = interned(Unobserved, site.chain, site.callee)
        return bridge.unliteral(resolve_call(unobserved, typing_context, args, kws)[0].return_type)

    try:
        pre, post = hooks.observing(
            site,
            tuple(bridge.unliteral(a) for a in args),
            tuple(bridge.unliteral(k) for k in kws.values()),
            result_type,
        )
    except MethodError as error:  # ambiguous hooks
        _raise_at_call_site(error)
    return hooks.hooked_call(site, pre, post, len(args), tuple(kws)) if pre or post else None


def _forwarded(site: Overdubbed, forward: object) -> Overdubbed:
    """The callee a forward makes of ``site``: a call already hooked (Unobserved) is not observed again."""
    forwarded = cast(Overdubbed, substitute(forward, site.chain))  # a forward's target is a callable
    if not site.observed and type(forwarded) is Overdubbed:
        return cast(Overdubbed, interned(Unobserved, forwarded.chain, forwarded.callee))
    return forwarded


# --- kernels --------------------------------------------------------------------------------------------


class Kernel(Guarded):
    """A compiled kernel: its code and this process's launcher of it, valid while every edge it consulted
    holds."""

    __slots__ = ("job", "code", "launcher", "launch_keys")

    def __init__(self, job: CompileJob) -> None:
        super().__init__()
        self.job = job
        # the target's code (what the disk cache stores) and the Launcher it links of it (overdub.targets, above
        # this module), set once built or loaded, before the kernel is cached
        self.code: object = None
        self.launcher: object = None
        # where the runtime's launch table holds launch functions for it
        self.launch_keys: set[tuple[object, ...]] = set()

    def on_invalidate(self, cause: str) -> None:
        runtime.kernels.discard(self.job, self, reason=cause)
        runtime.drop_launches(self)

    def describe(self) -> str:
        return f"kernel {self.job.call()} in {chain_name(self.job.chain)}"


def cached_kernel(job: CompileJob) -> Kernel:
    """The compiled kernel of ``job`` (the tiers after the launch table, :mod:`overdub.call`)."""
    return cast(Kernel, _kernel_of(job, compile=True))


def loaded_kernel(job: CompileJob) -> Kernel | None:
    """``job``'s kernel from the tiers before a compile -- this process's, else the disk cache's -- or None
    where neither has it; nothing is compiled (``od.precompile`` asks this before it compiles elsewhere)."""
    return _kernel_of(job, compile=False)


def _kernel_of(job: CompileJob, compile: bool) -> Kernel | None:
    """The lookup's tiers after the launch table; on a miss of both, a compile where ``compile``, else None."""
    # somewhat fast path: compiled in this process and still valid
    kernel = cast("Kernel | None", runtime.kernels.get(job))  # the runtime's kernel cache holds these
    if kernel is not None and kernel.usable():
        return kernel
    # slow path: under the compile lock, the disk cache, else a compile
    target = job.target
    with target.compile_lock, world.lock:
        runtime.collect()
        current = cast("Kernel | None", runtime.kernels.get(job))
        if current is not None and current is not kernel and current.usable():
            return current  # another thread compiled it meanwhile
        reason = _reason(job, kernel)
        loaded = _loaded_kernel(job)
        if loaded is None and not compile:
            return None
        built = loaded or _built_kernel(job)
        runtime.kernels.put(job, built)
        verb = "loaded from the disk cache" if loaded is not None else "compiled"
        log.info("%s %s for %s: %s", verb, job.call(), target.label, reason)
        return built


def _building(job: CompileJob, kernel: Guarded) -> bool:
    """Start building ``kernel`` (inside ``world.building``): it depends on each context of the chain; False
    where the chain is no longer what the job's first context makes (a parent changed since the job was
    made), so the kernel is built invalid and the next launch makes the job anew."""
    _consult_chain(job.chain)
    return job.chain[0].chain(job.target, state_type(job.chain)) == job.chain


def _loaded_kernel(job: CompileJob) -> Kernel | None:
    """``job``'s kernel from the disk cache, its recorded edges re-checked (and made its edges) here."""
    kernel = Kernel(job)
    with world.building(kernel):
        loaded = _building(job, kernel) and diskcache.load(job, kernel)
    if loaded:
        return kernel
    world.retire([kernel])  # it holds the edges of a partial check
    return None


def _built_kernel(job: CompileJob) -> Kernel:
    """``job``'s kernel compiled, and written to the disk cache."""
    target = job.target
    kernel = Kernel(job)
    started = time.perf_counter()
    kernel.code = _build(job, kernel, target.compile_kernel, f"compiling kernel {job.call()} for {target.label}")
    kernel.launcher = target.link(kernel.code)
    compile_ms[kernel.describe()] = (time.perf_counter() - started) * 1e3
    runtime.count("compiles")
    diskcache.store(job, kernel)
    return kernel


# a kernel's description -> how long its latest compile took, in ms (what od.invalidation_tree shows)
compile_ms: dict[str, float] = {}
runtime.register_cache(f"{__name__}.compile_ms", compile_ms)


def _build(
    job: CompileJob, node: Guarded, compile_with: Callable[[pytypes.FunctionType, tuple[object, ...]], _T], what: str
) -> _T:
    """``compile_with(rewritten function, argument types)`` for ``job`` while building ``node`` (its edges);
    a failure numba explains retires the node and is a CompileError headed ``what``."""
    try:
        with world.building(node):
            if not _building(job, node):
                node.valid = False
            func = cast(pytypes.FunctionType, job.func)
            return compile_with(rewrite(func, job.chain, len(job.argtypes)), job.argtypes)
    except Exception as exc:
        world.retire([node])
        message = None if isinstance(exc, MethodError) else bridge.compile_error_message(exc)
        if message is None:
            raise
        raise _compile_error(bridge.numba_error_class(exc), f"{what}:\n{message}") from None


def _reason(job: CompileJob, stale: Kernel | None) -> str:
    reason = runtime.kernels.reason(job)
    if reason is not None:
        return reason
    return f"first launch of {job.call()}" if stale is None else f"a global read by {job.call()} was rebound"


class HostCall(Guarded):
    """A function compiled for calls on the host in a context chain (``od.overdub``): a numba dispatcher of
    it rewritten in the chain, valid while every edge it consulted holds."""

    __slots__ = ("job", "dispatcher")

    def __init__(self, job: CompileJob) -> None:
        super().__init__()
        self.job = job
        self.dispatcher: object = None

    def on_invalidate(self, cause: str) -> None:
        _host_calls.pop(self.job, None)

    def describe(self) -> str:
        return f"host call {self.job.call()} in {chain_name(self.job.chain)}"


_host_calls: dict[CompileJob, HostCall] = {}
runtime.register_cache(f"{__name__}._host_calls", _host_calls)


def host_call(job: CompileJob) -> HostCall:
    """The compiled host call of ``job`` (the function rewritten in its chain, compiled by the chain's target
    with a Python entry point): reused while valid, else compiled again."""
    node = _host_calls.get(job)
    if node is not None and node.usable():
        return node
    with job.target.compile_lock, world.lock:
        node = HostCall(job)
        what = f"compiling {job.call()} for a host call in {chain_name(job.chain)}"
        node.dispatcher = _build(job, node, job.target.compile_host, what)
        _host_calls[job] = node
        runtime.count("compiles")
        return node


def explain(job: CompileJob) -> list[tuple[world.Node, str]]:
    """The edges of the cached kernel for ``job``, each with its text and the world range it is valid for:
    what the kernel's validity depends on. Empty when no such kernel is cached."""
    kernel = runtime.kernels.get(job)
    if kernel is None:
        return []
    return [(node, f"{node.describe()} [worlds {node.worlds()}]") for node in kernel.edges]
