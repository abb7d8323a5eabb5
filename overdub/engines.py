"""Where the work leaves this process: the picklers of ``multiprocessing``, ``concurrent.futures``, Dask,
joblib's loky and Ray, taught to ship the user's code as :mod:`overdub.travel` says.

Each engine pickles its tasks with one of a few picklers; each gets one hook, :func:`reduce_for_engine`,
asked first for every object it pickles: a def of the user's code that reaches overdub or numba ships by
value with the client's token, a struct class by value, plain code and a task that is no def (a method, a
callable instance, a ``Process``) as the engine did, with the token first; everything else as before.

Work runs the definitions of its submission: a pool's submission pins its function (``Pool.apply_async``,
``imap``..., ``ProcessPoolExecutor.submit``), Dask's pure keys add the client's definitions, and a Dask
worker starts each task in the world its def came with.

* ``multiprocessing`` (every start method, ``Pool``, ``Process``) and ``concurrent.futures``: their
  ``ForkingPickler`` gets a ``reducer_override``.
* cloudpickle (Dask's ``__main__`` functions, loky, and Ray's own copy ``ray.cloudpickle``): its
  ``Pickler.reducer_override`` is wrapped, and the ``overdub`` module carries the token.
* Dask's ``distributed.protocol.pickle.dumps`` tries the standard ``pickle.dumps`` first, which no hook
  reaches: it is given a pickle module whose ``dumps`` is a hooked Pickler's.
* Ray pickles a remote function once, at its first call, and an actor's class once, at its creation: a
  remote function whose token changed since is exported again under a new id (the workers load the new
  export), and an actor whose process has not seen the current token is sent it (``__ray_call__``, which
  runs before the method called after it: one caller's calls of an actor run in order).

Each hook is installed when its module is imported (:func:`overdub.postimport.when_imported`), once; a
version of an engine without the internal a hook wraps ships as it did. This module is imported with the first
of those modules (``overdub/__init__.py`` watches :data:`overdub.postimport.ENGINE_MODULES`), which may be
cloudpickle imported by :mod:`overdub.byvalue` itself: the modules that ship (the user's code by value,
:mod:`overdub.travel`) are imported at the first pickle.
"""

from __future__ import annotations

import importlib
import io
import pickle
import sys
import types as pytypes
import typing
import uuid
import weakref
from typing import TYPE_CHECKING, cast

from . import postimport
from .postimport import ENGINE_MODULES
from .runtime import runtime

if TYPE_CHECKING:
    from . import byvalue, libraries
    from .travel import arrival, defs, shipped, snapshots, structclasses, tasks
    from .travel.snapshots import Token

__all__ = ["reduce_for_engine"]


class _OnFirstUse:
    """A module of overdub's imported at the first read of one of its attributes, then bound in its place in this
    module: ``import overdub`` installs the hooks below, which run as their engines' modules are imported --
    cloudpickle's while :mod:`overdub.byvalue` imports it, say -- and use these modules only when they pickle."""

    def __init__(self, variable: str, module: str) -> None:
        self._variable, self._module = variable, module

    def __getattr__(self, name: str) -> object:
        importlib.import_module("overdub.travel").load()  # with its reducers of generic functions, contexts, structs
        module = importlib.import_module(self._module)
        globals()[self._variable] = module
        return getattr(module, name)


if not TYPE_CHECKING:
    byvalue = _OnFirstUse("byvalue", "overdub.byvalue")
    libraries = _OnFirstUse("libraries", "overdub.libraries")
    arrival = _OnFirstUse("arrival", "overdub.travel.arrival")
    defs = _OnFirstUse("defs", "overdub.travel.defs")
    shipped = _OnFirstUse("shipped", "overdub.travel.shipped")
    snapshots = _OnFirstUse("snapshots", "overdub.travel.snapshots")
    structclasses = _OnFirstUse("structclasses", "overdub.travel.structclasses")
    tasks = _OnFirstUse("tasks", "overdub.travel.tasks")


def reduce_for_engine(obj: object) -> tuple[object, ...] | None:
    """How an engine's pickler ships ``obj`` (None: as it would)."""
    kind = type(obj)
    if kind is pytypes.FunctionType:
        module = obj.__module__
        if libraries.is_library_module(module):
            return None
        return tasks.reduce_def(cast("pytypes.FunctionType", obj))
    if isinstance(obj, type):
        return structclasses.reduce_struct_class(obj)
    if kind is pytypes.MethodType:  # a bound or class method of the user's code, as a task
        func = getattr(obj, "__func__", None)
        if type(func) is pytypes.FunctionType and not libraries.is_library_module(func.__module__):
            return tasks.reduce_task_object(obj)
        return None
    task_class = _task_classes.get(kind)
    if task_class is None:
        task_class = _task_classes[kind] = _is_task_class(kind)
    return tasks.reduce_task_object(obj) if task_class else None


def _is_task_class(kind: type) -> bool:
    """Are instances of ``kind`` tasks of the user's code: callable, or a ``Process`` to run (their code calls
    the user's definitions)? Asked once per class."""
    if libraries.is_library_module(kind.__module__):
        return False
    process = sys.modules.get("multiprocessing.process")
    base = getattr(process, "BaseProcess", None)
    callable_instances = any("__call__" in vars(c) for c in kind.__mro__[:-1])  # (object's is not)
    return callable_instances or (isinstance(base, type) and issubclass(kind, base))


_task_classes: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._task_classes", _task_classes, kept="which classes' instances are tasks: a fact")


def _reducer_override(self: object, obj: object) -> object:
    reduced = reduce_for_engine(obj)
    return NotImplemented if reduced is None else reduced


_reducer_override.__overdub__ = True  # type: ignore[attr-defined]


def _wrapper(function: typing.Callable[..., typing.Any], wrapped: object) -> typing.Callable[..., typing.Any]:
    function.__overdub__, function.__wrapped__ = True, wrapped  # type: ignore[attr-defined]
    return function


def _unwrapped(found: object) -> bool:
    return found is not None and not getattr(found, "__overdub__", False)


# --- multiprocessing and concurrent.futures ---------------------------------------------------------------


def _install_forking_pickler(module: pytypes.ModuleType) -> None:
    pickler = getattr(module, "ForkingPickler", None)
    if pickler is not None and not getattr(getattr(pickler, "reducer_override", None), "__overdub__", False):
        pickler.reducer_override = _reducer_override
        if _unwrapped(pickler.dumps):  # a task's pickle ends: unpinned (Pinned)
            pickler.dumps = staticmethod(_task_dumps(pickler.dumps))


# --- cloudpickle (Dask, loky, Ray's copy) -----------------------------------------------------------------


def _overdub_arriving(token: Token) -> pytypes.ModuleType:
    arrival.adopt(*token)
    return sys.modules["overdub"]


def _install_cloudpickle(module: pytypes.ModuleType) -> None:
    """Wrap a cloudpickle's ``Pickler.reducer_override`` (asked first for every object) and its reduce of
    modules (the ``overdub`` module, a task function's global ``od``, carries the token)."""
    pickler: typing.Any = getattr(module, "Pickler", None)
    override: typing.Any = getattr(pickler, "reducer_override", None)
    if _unwrapped(override):

        def reducer_override(self: object, obj: object) -> object:
            reduced = None if isinstance(self, byvalue.Shipper) else reduce_for_engine(obj)
            return override(self, obj) if reduced is None else reduced

        pickler.reducer_override = _wrapper(reducer_override, override)
    table: typing.Any = getattr(pickler, "_dispatch_table", None)
    if isinstance(table, dict) and _unwrapped(table.get(pytypes.ModuleType)):
        reduce_module = table[pytypes.ModuleType]

        def reduce(obj: pytypes.ModuleType) -> tuple[object, ...]:
            if obj.__name__ == "overdub" and not snapshots.building():
                return (_overdub_arriving, (snapshots.snapshot(),))
            return cast("tuple[object, ...]", reduce_module(obj))

        table[pytypes.ModuleType] = _wrapper(reduce, reduce_module)


# --- Dask ---------------------------------------------------------------------------------------------------


class _Hooked(pickle.Pickler):
    reducer_override = _reducer_override  # type: ignore[assignment]


def _hooked_dumps(
    obj: object, protocol: int | None = None, *, fix_imports: bool = True, buffer_callback: typing.Any = None
) -> bytes:
    buffer = io.BytesIO()
    _Hooked(buffer, protocol, fix_imports=fix_imports, buffer_callback=buffer_callback).dump(obj)
    return buffer.getvalue()


class _PickleModule(pytypes.ModuleType):
    """``pickle`` with a hooked ``dumps``, for a module that calls ``pickle.dumps``."""

    def __getattr__(self, name: str) -> object:
        return getattr(pickle, name)


def _install_dask(module: pytypes.ModuleType) -> None:
    if getattr(module, "pickle", None) is pickle:
        shim = _PickleModule("pickle")
        shim.dumps = _hooked_dumps  # type: ignore[attr-defined]
        module.pickle = shim  # type: ignore[attr-defined]


# Dask names a pure task by a token of its function and arguments (``client.submit``, ``client.map``,
# ``delayed(pure=True)``, ``map_blocks``): where a key is already known (a future still held, a persisted
# collection), the new work gets the old result. A module function tokenizes by its name, so a redefinition
# the task reaches -- a generic function redefined by ``exec`` or ``%autoreload``, the function's own code, a
# global or an array it reads -- must change its token: a def of the user's code that reaches overdub or numba
# tokenizes as its content (:func:`overdub.travel.defs.def_bytes`) and the client's definitions (the snapshot's
# digest), both cached until something changes; any other function tokenizes as Dask did.


def _dask_token(func: object) -> tuple[str, ...] | None:
    """What a Dask token of ``func`` adds to (or, for a def, is instead of) Dask's (None: nothing)."""
    func = getattr(func, "__func__", func)  # a bound method: its def
    if type(func) is not pytypes.FunctionType or libraries.is_library_module(func.__module__):
        return None
    try:
        digest, _, reaches = defs.def_bytes(func)
        return ("overdub", digest, snapshots.snapshot()[1]) if reaches else None
    except Exception:  # it fails as Dask tokenizes or pickles it, with Dask's error
        return None


def _install_dask_tokenize(module: pytypes.ModuleType) -> None:
    """Wrap ``normalize_token``'s handlers of functions and bound methods (``dask.tokenize``)."""
    normalize: typing.Any = getattr(module, "normalize_token", None)
    if not callable(getattr(normalize, "dispatch", None)) or not callable(getattr(normalize, "register", None)):
        return
    try:
        function, method = normalize.dispatch(pytypes.FunctionType), normalize.dispatch(pytypes.MethodType)
    except TypeError:
        return
    if _unwrapped(function):

        def normalize_def(func: pytypes.FunctionType) -> object:
            added = _dask_token(func)
            return function(func) if added is None else (func.__module__, func.__qualname__, *added)

        normalize.register(pytypes.FunctionType, _wrapper(normalize_def, function))
    if _unwrapped(method):

        def normalize_method(meth: pytypes.MethodType) -> object:
            added = _dask_token(meth)
            return method(meth) if added is None else (method(meth), *added)

        normalize.register(pytypes.MethodType, _wrapper(normalize_method, method))


def _install_dask_delayed(module: pytypes.ModuleType) -> None:
    """``delayed(func, pure=True)`` tokenizes ``func`` once; each call's key adds what it reaches now."""
    call: typing.Any = getattr(module, "call_function", None)
    if not _unwrapped(call):
        return

    def call_function(func: object, func_token: object, *args: object, **kwargs: object) -> object:
        added = _dask_token(func)
        return call(func, func_token if added is None else (func_token, *added), *args, **kwargs)

    module.call_function = _wrapper(call_function, call)  # type: ignore[attr-defined]


# --- Ray ----------------------------------------------------------------------------------------------------


def _ray_key(func: object) -> tuple[str, str] | None:
    if type(func) is not pytypes.FunctionType or libraries.is_library_module(func.__module__):
        return None
    try:
        return snapshots.snapshot()[1], defs.def_bytes(func)[0]
    except Exception:  # it fails as Ray pickles it, with Ray's error
        return None


def _install_ray_remote(module: pytypes.ModuleType) -> None:
    remote_function: typing.Any = getattr(module, "RemoteFunction", None)
    remote: typing.Any = getattr(remote_function, "_remote", None)
    if not _unwrapped(remote):
        return

    def _remote(self: typing.Any, *args: object, **kwargs: object) -> object:
        key = _ray_key(getattr(self, "_function", None))
        seen = self.__dict__.get("_overdub_key", key)
        if key != seen and hasattr(self, "_uuid"):  # exported already: export again, under a new id
            self._uuid, self._last_export_cluster_and_job = uuid.uuid4(), None
        self._overdub_key = key
        return remote(self, *args, **kwargs)

    remote_function._remote = _wrapper(_remote, remote)


def _adopt_on_actor(actor: object, token: Token) -> None:
    arrival.adopt(*token)


_actors_synced: dict[object, str] = {}  # an actor's id -> the digest it was last sent
runtime.register_cache(f"{__name__}._actors_synced", _actors_synced, kept="what each actor was sent: its state")


def _install_ray_actor(module: pytypes.ModuleType) -> None:
    handle: typing.Any = getattr(module, "ActorHandle", None)
    call: typing.Any = getattr(handle, "_actor_method_call", None)
    if not _unwrapped(call):
        return

    def _actor_method_call(self: typing.Any, method_name: str, *args: object, **kwargs: object) -> object:
        if method_name != "__ray_call__":
            token = snapshots.snapshot()
            actor = getattr(self, "_actor_id", None)
            if actor is not None and _actors_synced.get(actor) != token[1]:
                self.__ray_call__.remote(_adopt_on_actor, token)
                _actors_synced[actor] = token[1]
        return call(self, method_name, *args, **kwargs)

    handle._actor_method_call = _wrapper(_actor_method_call, call)


# --- the definitions of a task's submission -----------------------------------------------------------------
# A pool pickles a task in a thread of its own, after ``apply_async`` or ``submit`` returned: the task's function
# is pinned when it is submitted (:class:`overdub.travel.tasks.Pinned`), and the pickle of the task, wherever it runs,
# uses the definitions of that moment. A Dask worker unpickles the tasks it is sent before it runs them: each
# starts in the world of its submission (the token its def came with).


def _pinning(
    method: typing.Callable[..., typing.Any], unpickled: type | None = None
) -> typing.Callable[..., typing.Any]:
    """``method`` (a pool's submission, its function first) with the function pinned, but in a pool of
    ``unpickled`` kind (threads: nothing is pickled)."""

    def submit(self: object, *args: object, **kwargs: object) -> object:
        if args and not (unpickled is not None and isinstance(self, unpickled)):
            args = (tasks.Pinned(args[0]), *args[1:])
        return method(self, *args, **kwargs)

    return _wrapper(submit, method)


def _install_pool(module: pytypes.ModuleType) -> None:
    pool: typing.Any = getattr(module, "Pool", None)
    for name in ("apply_async", "_map_async", "imap", "imap_unordered"):
        method: typing.Any = getattr(pool, name, None)
        if _unwrapped(method):
            setattr(pool, name, _pinning(method, getattr(module, "ThreadPool", None)))


def _install_process_pool(module: pytypes.ModuleType) -> None:
    executor: typing.Any = getattr(module, "ProcessPoolExecutor", None)
    submit: typing.Any = getattr(executor, "submit", None)
    if _unwrapped(submit):
        executor.submit = _pinning(submit)


def _task_dumps(dumps: typing.Callable[..., bytes]) -> typing.Callable[..., bytes]:
    def task_dumps(obj: object, protocol: int | None = None) -> bytes:
        return tasks.pickling_task(dumps, obj, protocol)

    return _wrapper(task_dumps, dumps)


def _task_token(task: object, depth: int = 0) -> Token | None:
    """The token of the def a Dask task runs (its function, a partial's, a kernel it ships), if it came by
    value."""
    for part in (getattr(task, "func", None), *(getattr(task, "args", None) or ())):
        found = defs.token_of(getattr(part, "kernel", part))
        if found is None and depth < 2 and (hasattr(part, "func") or isinstance(part, shipped.Shipped)):
            found = _task_token(part, depth + 1)
        if found is not None:
            return found
    return None


def _install_dask_worker(module: pytypes.ModuleType) -> None:
    run: typing.Any = getattr(module, "_run_task_simple", None)
    if not _unwrapped(run):
        return

    def _run_task_simple(task: object, *args: object, **kwargs: object) -> object:
        token = _task_token(task)
        if token is not None:
            arrival.adopt(*token, starting=True)
        return run(task, *args, **kwargs)

    module._run_task_simple = _wrapper(_run_task_simple, run)  # type: ignore[attr-defined]


_HOOKS: dict[str, typing.Callable[[pytypes.ModuleType], None]] = {
    "multiprocessing.reduction": _install_forking_pickler,
    "multiprocessing.pool": _install_pool,
    "concurrent.futures.process": _install_process_pool,
    "distributed.worker": _install_dask_worker,
    "cloudpickle.cloudpickle": _install_cloudpickle,
    "ray.cloudpickle.cloudpickle": _install_cloudpickle,
    "distributed.protocol.pickle": _install_dask,
    "dask.tokenize": _install_dask_tokenize,
    "dask.delayed": _install_dask_delayed,
    "ray.remote_function": _install_ray_remote,
    "ray.actor": _install_ray_actor,
}
assert tuple(_HOOKS) == ENGINE_MODULES, "postimport.ENGINE_MODULES names each hook's module"


def install() -> None:
    """Install every hook, each when its module is imported: now for those imported already, after its code
    for one importing now."""
    for name, hook in _HOOKS.items():
        postimport.when_imported(name, hook)


install()
