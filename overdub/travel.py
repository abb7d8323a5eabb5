"""The client's world travels with the work: overdub across processes (Dask, Ray, process pools).

A task run in another process -- a Dask worker, a ``multiprocessing`` or ``concurrent.futures`` pool, a Ray
task -- imports the modules it names from files, which need not hold what this process defined since: a
method redefined by ``exec`` (a notebook cell, ``%autoreload``), a generic function of ``__main__``, a method
added at run time. Julia asks for ``@everywhere``; overdub ships the definitions instead.

* **What travels.** Every method table of the user's code -- its generic functions', the overdubs it added
  to contexts (``od.CPU``'s and ``od.ALL``'s too), the methods ``od.method`` added to plain callables -- each
  method's def *by value*: its code, the globals it names, its defaults, cells and annotations
  (:class:`Shipper`). Not an installed package's: the worker has the same version. This is the *snapshot*
  (:func:`snapshot`): each table pickled on its own, with a format number, as bytes with a digest; rebuilt
  when this process's world changes or something a def reads does (:class:`Watch`).
* **When.** Each generic function pickles with the snapshot (:func:`reduce_generic`), so does each kernel a
  task holds as :class:`Shipped` (``od.map_blocks``), and so does the ``overdub`` module wherever cloudpickle
  pickles it by reference -- which it does for each global ``od`` of a task function Dask or Ray ships by
  value (one defined in ``__main__``, a notebook cell). A pickle holds the snapshot once (pickle's memo).
* **Arrival.** The receiving process compares the snapshot's digest with the last one it adopted (one
  string comparison: the per-task cost when nothing changed) and otherwise *adopts* it (:func:`adopt`): in
  each table, the methods whose def differs from what it last adopted are defined again, those the sender has
  not are deleted -- through the normal definition path, so only their dependents recompile (or load from
  the disk cache). A restarted worker adopts on its next task. Nothing raises while a task is unpickled (Dask
  hangs when it does): a table that cannot arrive is dropped with a warning naming it; a snapshot that cannot
  be read at all (another overdub version's) makes every launch here say why.
* **Identity.** A generic function is found by module and qualified name where that names it; else (one of
  ``__main__``, of a factory, of an exec'd namespace) by its origin -- the process that made it and its id
  there -- so all tasks share one object on a worker, and its compiled kernels. Results coming back carry
  the snapshot of the client itself, which a process never adopts.
* **Kernels by value.** A kernel shipped by value (a task function of ``__main__`` closing over it, by
  cloudpickle) is a new function object in each task; :func:`interned` maps it to the first one with the
  same content -- code, defaults, closure and the globals it reads, transitively -- so a worker compiles a
  definition once, and each copy launches through the first one's launch function.

Limits: a task function importable by name (module-level ``run`` pickled by reference) ships nothing, so a
kernel it reaches through its module is the worker's import of that module; generic functions reached only
that way are synced by the next task that carries the snapshot. Contexts themselves pickle by reference;
hooks do not travel.
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import io
import itertools
import marshal
import os
import pickle
import sys
import threading
import types as pytypes
import typing
import uuid
import warnings
import weakref
from dataclasses import dataclass
from typing import cast

from . import bindings, bridge, context, extending, fingerprint, registry, rewrite, world
from .registry import GenericFunction, MethodTable, Signature
from .runtime import runtime

__all__ = ["snapshot", "adopt", "interned", "reduce_generic", "Shipper", "Shipped", "dumps"]

try:  # what Dask and Ray ship with: classes and functions of __main__ by value
    import cloudpickle.cloudpickle as _cloudpickle  # type: ignore[import-untyped]  # the module, its internals

    _BasePickler: type[pickle.Pickler] = _cloudpickle.Pickler
except ImportError:  # pragma: no cover - cloudpickle comes with dask; plain pickle otherwise
    _cloudpickle = None
    _BasePickler = pickle.Pickler

# This process as the origin of the generic functions it makes that no name finds elsewhere.
_ORIGIN = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
_local = threading.local()  # building: a snapshot is being pickled on this thread (generic functions bare)


# --- functions by value -----------------------------------------------------------------------------------


class Shipper(_BasePickler):  # type: ignore[misc, valid-type]  # cloudpickle's Pickler, where installed
    """A pickler that ships each def of the user's code by value: its code (marshal), the globals its code
    names, its defaults, keyword defaults, closure, annotations and docstring. It records what it read of
    each def (``read``: a :class:`Watch`), for the snapshot's cache check."""

    def __init__(self, file: io.BytesIO, read: list[Watch]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.read = read

    def reducer_override(self, obj: object) -> object:
        if type(obj) is pytypes.FunctionType and not fingerprint.is_library_module(obj.__module__):
            return _function_reduce(obj, self.read)
        parent = getattr(super(), "reducer_override", None)
        return NotImplemented if parent is None else parent(obj)


def dumps(value: object, read: list[Watch] | None = None) -> bytes:
    """``value`` pickled with :class:`Shipper`."""
    buffer = io.BytesIO()
    Shipper(buffer, [] if read is None else read).dump(value)
    return buffer.getvalue()


_EMPTY = ("overdub.travel", "empty cell")


class Watch:
    """What a snapshot read of one def, as it was (the snapshot's cache check): its code, defaults and cells,
    by identity, and the globals it names -- the namespace's version tag first, then, where the tag moved
    (another global of the module changed), value by value."""

    __slots__ = ("func", "state", "namespace", "version", "values")

    def __init__(self, func: pytypes.FunctionType, values: dict[str, object]) -> None:
        self.func, self.state = func, _def_state(func)
        self.namespace, self.values = func.__globals__, values
        self.version = bindings.dict_version(self.namespace)

    def unchanged(self) -> bool:
        state = _def_state(self.func)
        if len(state) != len(self.state) or any(a is not b for a, b in zip(state, self.state)):
            return False
        version = bindings.dict_version(self.namespace)
        if version == self.version:
            return True
        get = self.namespace.get
        if all(bindings.same_value(value, get(name, _EMPTY)) for name, value in self.values.items()):
            self.version = version  # another global changed: checked by its tag again next time
            return True
        return False


def _def_state(func: pytypes.FunctionType) -> tuple[object, ...]:
    cells = []
    for cell in func.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # an empty cell
            cells.append(_EMPTY)
    return (func.__code__, func.__defaults__, func.__kwdefaults__, *cells)


def _function_reduce(func: pytypes.FunctionType, read: list[Watch]) -> tuple[object, ...]:
    namespace = func.__globals__
    names = rewrite.global_names(func.__code__)
    values = {name: namespace[name] for name in names if name in namespace}
    read.append(Watch(func, values))
    cells = list(_def_state(func)[3:])
    state = (
        values,
        func.__defaults__,
        func.__kwdefaults__,
        tuple(cells),
        _annotations(func),
        func.__doc__,
    )
    skeleton = (marshal.dumps(func.__code__), func.__name__, func.__qualname__, func.__module__, len(cells))
    # the state is set after the skeleton is memoized, so a def naming itself (recursion) pickles
    return _function_skeleton, skeleton, state, None, None, _function_fill


def _annotations(func: pytypes.FunctionType) -> dict[str, object]:
    """``func``'s annotations evaluated (a module under ``from __future__ import annotations`` has strings,
    naming globals its code may not read, which then do not travel), or as they are where they do not
    evaluate."""
    try:
        return inspect.get_annotations(func, eval_str=True)
    except Exception:  # a name not defined yet, say: the strings, evaluated (or not) where they arrive
        return dict(func.__annotations__)


def _function_skeleton(code: bytes, name: str, qualname: str, module: str, ncells: int) -> pytypes.FunctionType:
    namespace = {"__builtins__": builtins, "__name__": module, fingerprint.SHIPPED: True}
    cells = tuple(pytypes.CellType() for _ in range(ncells))
    func = pytypes.FunctionType(marshal.loads(code), namespace, name, None, cells or None)
    func.__qualname__, func.__module__ = qualname, module
    _shipped_here.add(func)
    return func


def _function_fill(func: pytypes.FunctionType, state: tuple[typing.Any, ...]) -> None:
    names, defaults, kwdefaults, cells, annotations, doc = state
    func.__globals__.update(names)
    func.__defaults__, func.__kwdefaults__ = defaults, kwdefaults
    for cell, value in zip(func.__closure__ or (), cells):
        if value != _EMPTY:
            cell.cell_contents = value
    func.__annotations__, func.__doc__ = annotations, doc


# --- the snapshot -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One method table in a snapshot: whose it is -- a generic function, or (context, callee) for a context's
    overdubs -- and its methods' signatures with their defs pickled (:func:`dumps`, each on its own, so an
    unchanged def is known by its bytes' digest)."""

    key: str  # the table, as the receiving process remembers what it adopted for it
    owner: object  # a GenericFunction, or (Context, callee)
    methods: tuple[tuple[Signature, str, bytes], ...]  # (signature, digest of the def's bytes, the bytes)
    signatures: frozenset[Signature]  # every method's, generated default-arity ones included


@dataclass(frozen=True, slots=True)
class ByName:
    """A function of an importable module, as a snapshot names a context's callee (not by value: overdub
    tables know a callee by its module and name)."""

    module: str
    qualname: str

    def __reduce__(self) -> tuple[object, ...]:
        return registry.resolve_reference, (self.module, self.qualname)


@dataclass(frozen=True, slots=True)
class Snapshot:
    world: int
    read: tuple[Watch, ...]
    digest: str
    blob: bytes

    def current(self) -> bool:
        return self.world == world.current_world() and all(watch.unchanged() for watch in self.read)


FORMAT = 2  # of a snapshot's bytes: (FORMAT, [(key, one table's entry pickled), ...])
_snapshots: dict[str, Snapshot] = {}  # "last": the snapshot this process last built
runtime.register_cache(f"{__name__}._snapshots", _snapshots)


def snapshot() -> tuple[str, str, bytes]:
    """This process's definitions, as (root, digest, bytes), cached until the world or a namespace they read
    changes. The root is the process they come from: this one, or the one whose snapshot it adopted (a worker
    shipping work on, or results back, ships its client's definitions -- which its client never adopts)."""
    last = _snapshots.get("last")
    if last is not None and last.current():
        return _root(), last.digest, last.blob
    with world.lock:  # no definition meanwhile
        age, read = world.current_world(), cast("list[Watch]", [])
        _local.building = True
        try:
            entries = [entry for entry in map(_entry, _tables(), itertools.repeat(read)) if entry is not None]
            blob = dumps((FORMAT, sorted(entries)), read)
        finally:
            _local.building = False
        watches = {id(watch.func): watch for watch in read}  # each def once
        last = Snapshot(age, tuple(watches.values()), hashlib.blake2b(blob, digest_size=16).hexdigest(), blob)
        _snapshots["last"] = last
    return _root(), last.digest, last.blob


def _root() -> str:
    return str(_adopted.get("root", _ORIGIN))


def _ships(module: str | None) -> bool:
    """Are definitions made by ``module`` shipped (the user's code), rather than the same in every process
    (an installed package's, at the version the worker has too)?"""
    return not fingerprint.is_library_module(module)


def _tables() -> list[tuple[str, object, MethodTable]]:
    """Every method table of the user's code with methods: (key, owner, table)."""
    found: list[tuple[str, object, MethodTable]] = []
    for gf in registry.every_generic_function():
        if gf.table.methods and _ships(gf.__module__):
            origin = _origin(gf)
            found.append((origin or f"{gf.__module__}.{gf.__qualname__}", gf, gf.table))
    owners: list[object] = [*context.every_context(), extending.user_methods]  # od.CPU's too; od.method's
    for ctx in owners:
        for callee, table in ctx.overdub_tables():  # type: ignore[attr-defined]
            if not any(_ships(method.func.__module__) for method in table.methods):
                continue
            named = callee
            if isinstance(callee, pytypes.FunctionType) and "<" not in callee.__qualname__:
                named = ByName(callee.__module__, callee.__qualname__)
            where = f"{type(ctx).__qualname__}:{ctx.__module__}:{getattr(ctx, 'name', '')}"
            found.append((f"{where}:{table.name}", (ctx, named), table))
    return found


def _entry(table_of: tuple[str, object, MethodTable], read: list[Watch]) -> tuple[str, bytes] | None:
    """The snapshot's entry of a table, pickled on its own (so one that cannot arrive leaves the others right),
    or None (recorded in ``_unshippable``) where something in it does not pickle: a def closing over a lock, a
    context of ``__main__``, say."""
    key, owner, table = table_of
    try:
        methods = []
        for method in table.methods:
            if not method.generated:  # its def defines it again
                data = dumps(method.func, read)
                methods.append((method.sig, hashlib.blake2b(data, digest_size=16).hexdigest(), data))
        data = dumps(Entry(key, owner, tuple(methods), frozenset(m.sig for m in table.methods)), read)
    except Exception as exc:  # whatever pickling raises: this table does not travel
        _unshippable[key] = f"{type(exc).__name__}: {exc}"
        return None
    _unshippable.pop(key, None)
    return key, data


_unshippable: dict[str, str] = {}  # key -> why its table does not travel
runtime.register_cache(f"{__name__}._unshippable", _unshippable)


def _origin(gf: GenericFunction) -> str | None:
    """None where module and qualname find ``gf``; else where it came from (this process, or the one it was
    adopted from)."""
    origin = _origins.get(gf)
    if origin is not None:
        return origin
    try:
        if registry.resolve_reference(gf.__module__ or "", gf.__qualname__) is gf:
            return None
    except Exception:  # not importable here: by its origin
        pass
    origin = f"{_ORIGIN}:{id(gf)}"
    _made_here[origin] = gf
    return origin


_origins: weakref.WeakKeyDictionary[GenericFunction, str] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._origins", _origins, kept="where generic functions made elsewhere come from")
_made_here: weakref.WeakValueDictionary[str, GenericFunction] = weakref.WeakValueDictionary()  # origin -> it
_foreign: dict[str, GenericFunction] = {}  # origin -> the generic function standing for it here
# kept across runtime.reset(): they are definitions, not caches
runtime.register_cache(f"{__name__}._made_here", _made_here, kept="the generic functions this process made, by origin")
runtime.register_cache(f"{__name__}._foreign", _foreign, kept="generic functions received from other processes")


# --- arrival ----------------------------------------------------------------------------------------------

_adopted: dict[object, object] = {}  # "digest": the snapshot adopted last; (origin, signature) -> its def's digest
runtime.register_cache(f"{__name__}._adopted", _adopted, kept="what this process adopted from another: its definitions")


def adopt(root: str, digest: str, blob: bytes) -> None:
    """Make this process's generic functions those of the snapshot ``digest`` from ``root`` (a no-op when it
    is the one adopted last, or this process's own definitions coming back)."""
    if _adopted.get("digest") == digest or root == _ORIGIN:
        return
    with world.lock:
        if _adopted.get("digest") == digest:
            return
        try:
            sent_format, entries = pickle.loads(blob)
            if sent_format != FORMAT:
                raise ValueError(
                    f"they come in format {sent_format} of another overdub version; this one reads format {FORMAT}"
                )
            for key, data in entries:
                if not isinstance(key, str) or not isinstance(data, bytes):
                    raise ValueError(f"an entry of another shape ({type(key).__name__}, {type(data).__name__})")
        except Exception as exc:  # never raise while unpickling (Dask hangs): every launch here says why instead
            _failed["the definitions"] = f"{type(exc).__name__}: {exc}"
            runtime.reset()  # nothing compiled here launches again without check_arrived's error
            return
        _failed.pop("the definitions", None)
        for key, data in entries:  # each table on its own: one that cannot arrive leaves the others right
            entry = None
            try:
                entry = pickle.loads(data)
                _adopt_entry(entry)
            except Exception as exc:  # a struct class only the sender can rebuild, say
                _failed[key] = f"{type(exc).__name__}: {exc}"
                dropped = entry is not None and _drop(entry)
                warnings.warn(
                    f"overdub: the definitions of {key} sent from process {root} could not be adopted here "
                    f"({_failed[key]}); "
                    + ("its methods are dropped here" if dropped else "this process keeps its own"),
                    RuntimeWarning,
                    stacklevel=2,
                )
            else:
                _failed.pop(key, None)
        _adopted["digest"], _adopted["root"] = digest, root


def _drop(entry: Entry) -> bool:
    """Delete the methods of the table ``entry`` names (a call of it then fails by name, never runs what the
    sender no longer has); False where its owner cannot be found."""
    try:
        table = _table_of(entry)[0]
    except Exception:  # the owner itself did not arrive
        return False
    for method in list(table.methods):
        table.remove(method.sig, "the definitions sent here could not be adopted")
    return True


_failed: dict[str, str] = {}  # what could not be adopted here -> why
runtime.register_cache(f"{__name__}._failed", _failed, kept="definitions that failed to arrive: an error until fixed")


def check_arrived() -> None:
    """Raise where the definitions sent to this process could not be read at all (a kernel launched here
    would not run the sender's code)."""
    if "the definitions" in _failed:
        what = _failed["the definitions"]
        raise RuntimeError(
            f"overdub: definitions sent to this process (pid {os.getpid()}) could not be adopted: {what}"
        )


def _table_of(entry: Entry) -> tuple[MethodTable, str, GenericFunction | None]:
    """The table an entry names, the name its methods take, and the generic function a default-arity method
    calls (None: the def itself, as for a context's overdubs)."""
    if isinstance(entry.owner, GenericFunction):
        return entry.owner.table, entry.owner.__name__, entry.owner
    ctx, callee = cast("tuple[context.Context, object]", entry.owner)
    table = ctx.table(callee)
    return table, table.name, None


def _adopt_entry(entry: Entry) -> None:
    table, name, full = _table_of(entry)
    for sig, digest, data in entry.methods:
        if _adopted.get((entry.key, sig)) != digest:
            func = pickle.loads(data)
            try:
                methods = registry.methods_from(name, func, sig, full=full)
            except TypeError:  # a signature that did not survive pickling: its def's own annotations
                methods = registry.methods_from(name, func, None, full=full)
            for method in methods:
                table.add(method)
            _adopted[(entry.key, sig)] = digest
    for method in list(table.methods):
        if method.sig not in entry.signatures:
            table.remove(method.sig, "the process the work came from has no such method")
            _adopted.pop((entry.key, method.sig), None)


def _generic_named(origin: str | None, module: str | None, qualname: str, name: str) -> GenericFunction:
    """The generic function a snapshot or a pickle names: found by module and qualname, else the one standing
    for its origin here (made empty on first arrival; a snapshot gives it its methods)."""
    if origin is None:
        try:
            found = registry.resolve_reference(module or "", qualname)
            if isinstance(found, GenericFunction):
                return found
        except Exception:  # not importable here (a module only the client has): by value
            pass
        origin = f"{module}.{qualname}"
    with world.lock:
        gf = _made_here.get(origin) or _foreign.get(origin)
        if gf is None:
            gf = _foreign[origin] = GenericFunction(name, module, qualname)
            _origins[gf] = origin
        return gf


def _generic_arriving(
    origin: str | None, module: str | None, qualname: str, name: str, root: str, digest: str, blob: bytes
) -> GenericFunction:
    adopt(root, digest, blob)
    return _generic_named(origin, module, qualname, name)


def reduce_generic(gf: GenericFunction) -> tuple[object, ...]:
    """How a generic function pickles: its identity, and (outside a snapshot being built) the snapshot."""
    identity = (_origin(gf), gf.__module__, gf.__qualname__, gf.__name__)
    if getattr(_local, "building", False) or (not _ships(gf.__module__) and identity[0] is None):
        return _generic_named, identity
    sent = snapshot()
    why = _unshippable.get(identity[0] or f"{gf.__module__}.{gf.__qualname__}")
    if why is not None:
        raise pickle.PicklingError(f"cannot ship {gf!r} to another process: its methods do not pickle ({why})")
    return (_generic_arriving, identity + sent)


registry.reduce_generic = reduce_generic


# --- the overdub module, as cloudpickle ships it ----------------------------------------------------------


def _overdub_arriving(root: str, digest: str, blob: bytes) -> pytypes.ModuleType:
    adopt(root, digest, blob)
    return sys.modules[__name__.rpartition(".")[0]]  # overdub: imported before this module, its child


def _install_cloudpickle_hooks(module: pytypes.ModuleType) -> None:
    """Teach cloudpickle (what Dask and Ray ship a ``__main__`` task function with) three things, by wrapping
    its internals -- each only where this cloudpickle has it, so another version ships as it did:

    * the ``overdub`` module (a task function's global ``od``) carries the snapshot (its Pickler's
      ``_dispatch_table`` entry for modules);
    * a def launched here as a kernel ships as its cached bytes (:func:`_kernel_bytes`; its Pickler's
      ``_dynamic_function_reduce``);
    * which of ``overdub``'s submodules a def names is read from a list kept per ``sys.modules``, not found
      by a walk over ``sys.modules`` for each def naming ``od`` (``_find_imported_submodules``: a Dask
      scheduler pickles each task's function on its own, and the walk is ~0.3 ms)."""
    pickler: typing.Any = getattr(module, "Pickler", None)
    table: typing.Any = getattr(pickler, "_dispatch_table", None)
    if isinstance(table, dict) and _unwrapped(table.get(pytypes.ModuleType)):
        reduce_module = table[pytypes.ModuleType]

        def reduce(obj: pytypes.ModuleType) -> tuple[object, ...]:
            if obj.__name__ == "overdub" and not getattr(_local, "building", False):
                return (_overdub_arriving, snapshot())
            return cast("tuple[object, ...]", reduce_module(obj))

        table[pytypes.ModuleType] = _wrapper(reduce, reduce_module)
    reduce_function: typing.Any = getattr(pickler, "_dynamic_function_reduce", None)
    if _unwrapped(reduce_function):

        def reduce_def(self: object, func: pytypes.FunctionType) -> tuple[object, ...]:
            if func in _kernels and not getattr(_local, "building", False):
                return (_def_arriving, (*snapshot(), *_kernel_bytes(func)))
            return cast("tuple[object, ...]", reduce_function(self, func))

        pickler._dynamic_function_reduce = _wrapper(reduce_def, reduce_function)
    find: typing.Any = getattr(module, "_find_imported_submodules", None)
    if _unwrapped(find):
        package = sys.modules[__name__.rpartition(".")[0]]

        def find_submodules(code: pytypes.CodeType, dependencies: typing.Iterable[object]) -> list[object]:
            dependencies = list(dependencies)
            if not any(value is package for value in dependencies):
                return cast("list[object]", find(code, dependencies))
            names = set(code.co_names)
            found = find(code, [value for value in dependencies if value is not package])
            return [*found, *(submodule for tokens, submodule in _submodules() if tokens <= names)]

        setattr(module, "_find_imported_submodules", _wrapper(find_submodules, find))  # noqa: B010


def _unwrapped(found: object) -> bool:
    return found is not None and not getattr(found, "__overdub__", False)


def _wrapper(function: typing.Callable[..., typing.Any], wrapped: object) -> typing.Callable[..., typing.Any]:
    function.__overdub__, function.__wrapped__ = True, wrapped  # type: ignore[attr-defined]
    return function


_loaded: dict[str, object] = {}  # "key": sys.modules' size and last name, "list": overdub's loaded submodules
runtime.register_cache(f"{__name__}._loaded", _loaded)


def _submodules() -> list[tuple[frozenset[str], pytypes.ModuleType]]:
    """``overdub``'s loaded submodules, each with the names a def's code must hold to reach it from ``od``
    (``overdub.cuda.random``: ``cuda`` and ``random``), as cloudpickle finds them."""
    modules = sys.modules
    key = (len(modules), next(reversed(modules)))
    if _loaded.get("key") != key:
        _loaded["list"] = [
            (frozenset(name.split(".")[1:]), module)
            for name, module in list(modules.items())
            if name.startswith("overdub.") and module is not None
        ]
        _loaded["key"] = key
    return cast("list[tuple[frozenset[str], pytypes.ModuleType]]", _loaded["list"])


if _cloudpickle is not None:
    _install_cloudpickle_hooks(_cloudpickle)


# --- kernels by value -------------------------------------------------------------------------------------

# The defs this process launched (or was asked to) as kernels: cloudpickle ships one of them by value (a task
# function of ``__main__`` naming it) as its cached bytes -- a scheduler pickles each task's function on its
# own, and cloudpickle's by-value reduce of a def costs ~0.4 ms -- and the receiving process finds it by
# their digest: one def, and one compiled kernel, per content.
_kernels: weakref.WeakSet[pytypes.FunctionType] = weakref.WeakSet()
_kernel_blobs: weakref.WeakKeyDictionary[pytypes.FunctionType, tuple[tuple[Watch, ...], str, bytes]] = (
    weakref.WeakKeyDictionary()
)
runtime.register_cache(f"{__name__}._kernels", _kernels, kept="which defs are kernels: a fact of each")
runtime.register_cache(f"{__name__}._kernel_blobs", _kernel_blobs)


def note_kernel(kernel: object) -> None:
    """``kernel`` is launched as a kernel here: where cloudpickle ships its def by value, it ships it as
    :func:`_kernel_bytes`."""
    if type(kernel) is pytypes.FunctionType:
        _kernels.add(kernel)


def _kernel_bytes(func: pytypes.FunctionType) -> tuple[str, bytes]:
    """``func`` pickled by value without the snapshot (which travels beside it, as it changes on its own), and
    the digest of those bytes; cached until something the pickle read changes (:class:`Watch`)."""
    cached = _kernel_blobs.get(func)
    if cached is None or not all(watch.unchanged() for watch in cached[0]):
        read: list[Watch] = []
        building, _local.building = getattr(_local, "building", False), True
        try:
            blob = dumps(func, read)
        finally:
            _local.building = building
        digest = "shipped-" + hashlib.blake2b(blob, digest_size=16).hexdigest()
        cached = _kernel_blobs[func] = (tuple(read), digest, blob)
    return cached[1], cached[2]


def _def_arriving(root: str, digest: str, blob: bytes, kernel_digest: str, kernel: bytes) -> pytypes.FunctionType:
    """A kernel's def shipped as :func:`_kernel_bytes`: the first def that arrived with these bytes, else
    these bytes unpickled (after the snapshot, whose generic functions the def names)."""
    adopt(root, digest, blob)
    found = _interned.get(kernel_digest)
    if found is None:
        found = _interned.setdefault(kernel_digest, interned(pickle.loads(kernel)))
        # shipped on from here (a Dask scheduler pickles each task on its own) as the same bytes
        _kernels.add(found)
        values = {
            name: found.__globals__[name] for name in rewrite.global_names(found.__code__) if name in found.__globals__
        }
        _kernel_blobs.setdefault(found, ((Watch(found, values),), kernel_digest, kernel))
    return found


_interned: dict[str, pytypes.FunctionType] = {}  # content digest -> the first def of that content
# a def -> (the def it is interned to, its namespace's version tag then)
_interned_by_id: weakref.WeakKeyDictionary[pytypes.FunctionType, tuple[pytypes.FunctionType, int]] = (
    weakref.WeakKeyDictionary()
)
_shipped_here: weakref.WeakSet[pytypes.FunctionType] = weakref.WeakSet()  # the defs Shipper's pickles made
runtime.register_cache(f"{__name__}._shipped_here", _shipped_here, kept="which defs arrived by value: a fact of each")
runtime.register_cache(f"{__name__}._interned", _interned)
runtime.register_cache(f"{__name__}._interned_by_id", _interned_by_id)


def arrived_by_value(func: pytypes.FunctionType) -> bool:
    """Was ``func`` made by unpickling a def shipped by value: by :class:`Shipper`, or by cloudpickle from
    another process's ``__main__`` (its globals are not this process's ``__main__``)?"""
    if func in _shipped_here:
        return True
    main = sys.modules.get("__main__")
    return func.__module__ == "__main__" and (main is None or vars(main) is not func.__globals__)


def interned(func: pytypes.FunctionType) -> pytypes.FunctionType:
    """``func``, or the first def of the same content (code, defaults, closure, and everything it reads,
    transitively) where ``func`` arrived by value: each task's copy of a shipped kernel then finds the
    kernel compiled for the first. (A launch of an interned copy is not added to the launch table: its own
    namespace is re-checked here at each launch, through its version tag.)"""
    if not arrived_by_value(func):
        return func
    version = bindings.dict_version(func.__globals__)
    found = _interned_by_id.get(func)
    if found is not None and found[1] == version:
        return found[0]
    with world.lock:  # the digest asks numba's typing registries, as a compile does (under this lock)
        try:
            digest = fingerprint.embedded_digest(func, typing=False)[0]
        except fingerprint.Uncacheable:  # holds something with no content digest: compiled as it is
            canonical = func
        else:
            canonical = _interned.setdefault(digest, func)
        _interned_by_id[func] = (canonical, version)
    return canonical


# --- a kernel as a task ships it ----------------------------------------------------------------------------


class Shipped:
    """A kernel as a task holds it: it pickles by value (its def, as :class:`Shipper` ships defs) with the
    snapshot, so the receiving process runs the kernel and the methods the sender has now; it arrives as its
    def, :func:`interned`. A kernel of an installed package travels by reference."""

    __slots__ = ("kernel",)

    def __init__(self, kernel: object) -> None:
        self.kernel = kernel

    def __reduce__(self) -> tuple[object, ...]:
        func = bridge.python_function(self.kernel) or self.kernel
        if isinstance(func, pytypes.FunctionType) and not fingerprint.is_library_module(func.__module__):
            return _shipped_def_arriving, (*snapshot(), *_kernel_bytes(func))
        return _kernel_arriving, (*snapshot(), pickle.dumps(self.kernel))

    def __repr__(self) -> str:
        return f"Shipped({self.kernel!r})"


def _kernel_arriving(root: str, digest: str, blob: bytes, kernel: bytes) -> Shipped:
    adopt(root, digest, blob)
    return Shipped(pickle.loads(kernel))


def _shipped_def_arriving(root: str, digest: str, blob: bytes, kernel_digest: str, kernel: bytes) -> Shipped:
    return Shipped(_def_arriving(root, digest, blob, kernel_digest, kernel))
