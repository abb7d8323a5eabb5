"""Where the work leaves this process: the picklers of ``multiprocessing``, ``concurrent.futures``, Dask,
joblib's loky and Ray, taught to ship the user's code as :mod:`overdub.travel` says.

Each engine pickles its tasks with one of a few picklers; each gets one hook, :func:`reduce_for_engine`,
asked first for every object it pickles: a def of the user's code that reaches overdub or numba ships by
value with the client's token, a struct class by value, everything else as the engine did before.

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
version of an engine without the internal a hook wraps ships as it did.
"""

from __future__ import annotations

import io
import pickle
import sys
import types as pytypes
import typing
import uuid
from typing import cast

from . import byvalue, fingerprint, postimport, travel
from .runtime import runtime

__all__ = ["reduce_for_engine"]


def reduce_for_engine(obj: object) -> tuple[object, ...] | None:
    """How an engine's pickler ships ``obj`` (None: as it would)."""
    kind = type(obj)
    if kind is pytypes.FunctionType:
        module = obj.__module__
        if fingerprint.is_library_module(module):
            return None
        return travel.reduce_def(cast("pytypes.FunctionType", obj))
    if isinstance(obj, type):
        return travel.reduce_struct_class(obj)
    return None


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


# --- cloudpickle (Dask, loky, Ray's copy) -----------------------------------------------------------------


def _overdub_arriving(token: travel.Token) -> pytypes.ModuleType:
    travel.adopt(*token)
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
            if obj.__name__ == "overdub" and not travel._building():
                return (_overdub_arriving, (travel.snapshot(),))
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


# --- Ray ----------------------------------------------------------------------------------------------------


def _ray_key(func: object) -> tuple[str, str] | None:
    if type(func) is not pytypes.FunctionType or fingerprint.is_library_module(func.__module__):
        return None
    try:
        return travel.snapshot()[1], travel.def_bytes(func)[0]
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


def _adopt_on_actor(actor: object, token: travel.Token) -> None:
    travel.adopt(*token)


_actors_synced: dict[object, str] = {}  # an actor's id -> the digest it was last sent
runtime.register_cache(f"{__name__}._actors_synced", _actors_synced, kept="what each actor was sent: its state")


def _install_ray_actor(module: pytypes.ModuleType) -> None:
    handle: typing.Any = getattr(module, "ActorHandle", None)
    call: typing.Any = getattr(handle, "_actor_method_call", None)
    if not _unwrapped(call):
        return

    def _actor_method_call(self: typing.Any, method_name: str, *args: object, **kwargs: object) -> object:
        if method_name != "__ray_call__":
            token = travel.snapshot()
            actor = getattr(self, "_actor_id", None)
            if actor is not None and _actors_synced.get(actor) != token[1]:
                self.__ray_call__.remote(_adopt_on_actor, token)
                _actors_synced[actor] = token[1]
        return call(self, method_name, *args, **kwargs)

    handle._actor_method_call = _wrapper(_actor_method_call, call)


def install() -> None:
    """Install every hook, each when its module is imported."""
    postimport.when_imported("multiprocessing.reduction", _install_forking_pickler)
    postimport.when_imported("cloudpickle.cloudpickle", _install_cloudpickle)
    postimport.when_imported("ray.cloudpickle.cloudpickle", _install_cloudpickle)
    postimport.when_imported("distributed.protocol.pickle", _install_dask)
    postimport.when_imported("ray.remote_function", _install_ray_remote)
    postimport.when_imported("ray.actor", _install_ray_actor)


install()
