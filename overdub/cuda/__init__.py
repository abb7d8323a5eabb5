"""``from overdub import cuda``: numba-cuda's ``cuda`` namespace, launched the overdub way -- and ``od.cuda``.

A numba-cuda program switches to overdub by one import: ``from overdub import cuda`` in place of ``from numba
import cuda`` (and ``overdub.cuda.random``, ``overdub.cuda.libdevice``, ... in place of ``numba.cuda.random``,
...). What the program then names is:

- ``cuda.jit``: overdub's drop-in decorator (:func:`overdub.jit`): eager signatures, ``device=True``, the
  options, ``kernel[blocks, threads(, stream(, shmem))]``, ``kernel.forall(n)``; every launch is an
  ``od.cuda`` launch (edges, contexts, either target);
- the kernel language -- ``cuda.grid``, ``threadIdx``, ``atomic``, ``shared``, ``local``, ``const``,
  ``syncthreads``, ``cg``, ``libdevice``, ``fp16``, the types --: numba-cuda's own objects, which each target
  compiles (the CPU target substitutes its own code for them);
- the host API -- ``to_device``, ``device_array(_like)``, ``pinned_array``, ``mapped_array``, streams, events,
  ``synchronize``, ``select_device``/``gpus``, ``reduce``, ``vectorize``, ``random``'s states --: numba-cuda's own where launches
  run on the CUDA target, and on the CPU target (no usable GPU, or ``OVERDUB_TARGET=cpu``) the stand-ins of
  :mod:`overdub.targets.cpu.hostapi`, which behave the same on host memory;
- everything else numba-cuda exports (``compile_ptx``, ``declare_device``, ...): numba-cuda's.

Names are looked up when first read (a module ``__getattr__``, then kept in this module's globals), so importing
the namespace costs nothing more; ``overdub.cuda.X`` for any submodule ``numba.cuda.X`` overdub does not
replace is that module itself (:class:`_NumbaCudaSubmodules`).

The namespace is also the launch: ``cuda(kernel, *args, blocks=, threads=, ...)`` -- and ``od.cuda(...)`` -- is
:func:`overdub.launch.cuda`. The module's class, :class:`CudaNamespace`, has that launch function as its
``__call__``: the C launch function where it is built, which CPython calls without binding the module (a
builtin has no ``__get__``), so a call costs one type-slot lookup more than calling the function itself.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types as pytypes
from typing import TYPE_CHECKING, Any

from .. import dropin, launch, postimport
from ..targets import get_target, registry

if TYPE_CHECKING:
    from collections.abc import Sequence

jit = dropin.jit

_OWN_SUBMODULES = ("random", "launchconfig")  # overdub.cuda.X that are modules of overdub, not numba-cuda's
_NUMBA_CUDA = "numba.cuda"
__overdub_reexports__ = _NUMBA_CUDA  # compiled code types the names read through here as numba-cuda's own


def _numba_cuda() -> pytypes.ModuleType:
    import numba.cuda  # on the first name read, not with overdub (the targets' hooks run as it is imported)

    return numba.cuda


def _host_api() -> dict[str, object] | None:
    """The default target's stand-ins for numba-cuda's host API (the CPU target's), or None where numba-cuda's
    own is the one."""
    return registry.entry(get_target(None).name).stand_ins(_NUMBA_CUDA)


def __getattr__(name: str) -> object:
    """numba-cuda's ``name``, or the CPU target's stand-in for it; kept in this module's globals once asked."""
    if name == "__all__":  # `from overdub.cuda import *`: the names `from numba.cuda import *` gives, as meant here
        return sorted(n for n in dir(_numba_cuda()) if not n.startswith("_"))
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _OWN_SUBMODULES:
        value: object = importlib.import_module(f"{__name__}.{name}")
    else:
        host_api = _host_api() if name in _HOST_API_NAMES else None
        value = host_api[name] if host_api is not None else _numba_cuda_attribute(name)
    globals()[name] = value
    return value


def _numba_cuda_attribute(name: str) -> object:
    numba_cuda = _numba_cuda()
    try:
        return getattr(numba_cuda, name)
    except AttributeError:
        if importlib.util.find_spec(f"{_NUMBA_CUDA}.{name}") is None:
            raise AttributeError(f"module {__name__!r} (numba-cuda's namespace) has no attribute {name!r}") from None
        return importlib.import_module(f"{_NUMBA_CUDA}.{name}")  # a submodule not imported yet


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_numba_cuda())) | set(_OWN_SUBMODULES))


_HOST_API_NAMES = frozenset(
    [
        *("to_device", "device_array", "device_array_like", "pinned_array", "pinned_array_like", "mapped_array"),
        *("mapped_array_like", "managed_array", "pinned", "mapped", "is_cuda_array", "as_cuda_array"),
        *("from_cuda_array_interface", "In", "Out", "InOut", "stream", "default_stream", "legacy_default_stream"),
        *("per_thread_default_stream", "external_stream", "event", "event_elapsed_time", "synchronize", "gpus"),
        *("select_device", "get_current_device", "list_devices", "current_context", "require_context", "close"),
        *("detect", "is_available", "is_supported_version", "cuda_error", "is_float16_supported"),
        *("is_bfloat16_supported", "is_fp8_supported", "defer_cleanup", "profiling", "profile_start"),
        *("profile_stop", "Reduce", "reduce", "vectorize", "guvectorize"),
    ]
)
"""The names whose meaning depends on the target: :data:`overdub.targets.cpu.hostapi.HOST_API` has each (a test checks)."""


# --- the namespace is the launch --------------------------------------------------------------------------


class CudaNamespace(launch.Namespace):  # type: ignore[misc]  # a class held in a variable
    """The class of the module ``overdub.cuda``: a module whose call is ``od.cuda``'s launch (the extension's
    class of modules calls it from C; without the extension, ``__call__`` is the Python definition)."""

    if TYPE_CHECKING:  # what a type checker reads: od.cuda's signature, and numba-cuda's names
        __call__ = staticmethod(launch.cuda)

        def __getattr__(self, name: str) -> Any: ...

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled by name, as modules are (cloudpickle ships kernels whose globals name it)."""
        return importlib.import_module, (self.__name__,)


sys.modules[__name__].__class__ = CudaNamespace


def _typed_as_numba_cuda(numba_cuda: pytypes.ModuleType) -> None:
    """A function numba-cuda compiles itself (``numba.cuda.compile_ptx``, a library's own ``cuda.jit``) that
    names this namespace types it as numba-cuda's module: the names read through it are numba-cuda's."""
    module_type: Any = numba_cuda.types.Module
    typeof_impl: Any = importlib.import_module(f"{_NUMBA_CUDA}.typing.typeof").typeof_impl  # numba-cuda's typeof
    typeof_impl.register(CudaNamespace)(lambda value, c: module_type(numba_cuda))


postimport.when_imported(_NUMBA_CUDA, _typed_as_numba_cuda)


# --- overdub.cuda.X is numba.cuda.X -----------------------------------------------------------------------


class _NumbaCudaSubmodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``overdub.cuda.X`` (``X`` not a module of overdub's) as numba-cuda's ``numba.cuda.X`` itself, so
    that ``from overdub.cuda.libdevice import exp`` names numba-cuda's function. Consulted before the path
    finders: ``overdub.cuda.np`` is numba-cuda's package, on whose path they would find ``numba_cuda``'s files
    and run a second copy of them as ``overdub.cuda.np.numpy_support``. Overdub's own modules
    (``overdub.cuda.random``) are left to them."""

    prefix = f"{__name__}."

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: pytypes.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.prefix) or fullname.split(".")[2] in _OWN_SUBMODULES:
            return None
        numba_name = _NUMBA_CUDA + fullname[len(__name__) :]
        try:
            found = importlib.util.find_spec(numba_name)
        except ModuleNotFoundError:
            return None
        return None if found is None else importlib.machinery.ModuleSpec(fullname, self, loader_state=numba_name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> pytypes.ModuleType:
        module = importlib.import_module(spec.loader_state)
        spec.loader_state = (spec.loader_state, module.__spec__)  # the import system overwrites __spec__
        return module

    def exec_module(self, module: pytypes.ModuleType) -> None:
        """numba-cuda's module ran when it was imported; its own spec is put back."""
        module.__spec__ = module.__spec__.loader_state[1]  # type: ignore[union-attr]


if not any(isinstance(finder, _NumbaCudaSubmodules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _NumbaCudaSubmodules())
