"""Compilation targets: a registry of them, and what each provides to the driver.

Each target is one package under ``targets/`` -- ``cpu/`` (numba's machine code, a grid run on every core),
``cuda/`` (numba-cuda's PTX, loaded by the driver), ``cudamlir/`` (the CUDA target with numba-cuda-mlir as its
compiler, installed with the ``mlir`` extra) -- implementing :class:`Target` (:mod:`.interface`, where
the optional hooks have their defaults), and one entry of :mod:`.registry`, which gives it its name (what
users pass: ``od.cuda(..., target="cuda")``), its own context (``od.CUDA``) and the memory it holds. The
driver calls ``compile_method`` while numba types a caller (:mod:`overdub.instances`) and ``compile_kernel``
then ``link`` for a kernel (:mod:`overdub.compiler`); the launch path (:mod:`overdub.launch`) asks the kernel's launcher for a launch
function and caches it. A target's package is imported when the target is first asked for: the CUDA
target's imports numba-cuda, which takes longer to import than numba itself, and whether a GPU is usable is
answered without it where no NVIDIA driver is (:mod:`.gpu`).

Both targets compile with numba-cuda's typing and stubs (``cuda.grid``, ``cuda.atomic``...), which numba's CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``) replaces with Python that runs kernels itself: under it importing the
targets raises one ImportError saying so, and that the CPU target is what runs kernels without a GPU.
"""

from __future__ import annotations

import functools
import sys

from numba import config as numba_config

# numba sets its configuration's attributes at run time (config.reload_config), where mypy does not see them
if numba_config.ENABLE_CUDASIM:  # type: ignore[attr-defined]
    raise ImportError(
        "overdub does not run under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1): the simulator replaces "
        "numba.cuda, which overdub compiles kernels with. Unset NUMBA_ENABLE_CUDASIM; overdub's CPU target runs "
        "kernels without a GPU (od.cuda(kernel, ..., target='cpu'), or OVERDUB_TARGET=cpu)."
    )

from .. import bridge, settings
from ..runtime import runtime
from . import numbacuda as _numbacuda  # noqa: F401  (numba-cuda's pipeline joined once it is imported)
from . import registry
from .gpu import gpu_usable
from .interface import GraphCapture, Launcher, LaunchFunction, Target
from .options import CompileOptions, debug_default

__all__ = [
    "Target",
    "Launcher",
    "LaunchFunction",
    "GraphCapture",
    "CompileOptions",
    "get_target",
    "default_target",
    "gpu_usable",
]


def default_target() -> str:
    """``$OVERDUB_TARGET`` if set, else "cuda" when a GPU is usable, else "cpu"."""
    name = settings.TARGET.value()
    if name is None:
        return "cuda" if gpu_usable() else "cpu"
    try:
        registry.entry(name)
    except ValueError:
        raise ValueError(
            f"the environment variable OVERDUB_TARGET is {name!r}: set it to {registry.names()}, or unset it to "
            f"use the GPU when one is usable"
        ) from None
    return str(name)


def get_target(name: str | Target | None = None, debug: bool | None = None) -> Target:
    """The target called ``name`` (or ``name`` itself, a target object) for the device current on this thread;
    None means :func:`default_target` as it was when first asked, so that launches and ``synchronize`` agree
    on it. ``debug`` configures it for checked kernels; by default ``OVERDUB_DEBUG`` decides, as it was when
    first asked."""
    if name is None:
        name = _default()
    if name == "cuda" and settings.CUDA_COMPILER.value() == "numba-cuda-mlir":
        name = "cuda-mlir"
    if isinstance(name, str):
        target = registry.entry(name).target()
    elif isinstance(getattr(name, "options", None), CompileOptions):
        target = name.for_current_device()
    else:
        raise TypeError(f"target= takes {registry.names()}, not {name!r}")
    if debug is None:
        debug = target.options.debug or debug_default()
    return target.configured(target.options.replaced(debug=bool(debug)))


def _numba_cuda_registries() -> list[object]:
    """numba-cuda's typing registries of globals, where a program (or the CUDA target) imported numba-cuda:
    those of the CPU target's kernel idiom and of the CUDA target's typing context."""
    registries: list[object] = []
    templates = sys.modules.get("numba.cuda.typing.templates")
    if templates is not None:
        registries.append(templates.builtin_registry)
    descriptor = sys.modules.get("numba.cuda.descriptor")
    if descriptor is not None:
        registries += list(descriptor.cuda_target.typing_context._registries)
    return registries


bridge.add_typing_registries(_numba_cuda_registries)


@functools.cache
def _default() -> str:
    return default_target()


runtime.register_cache(f"{__name__}._default", _default, kept="fixed at first use: launches and synchronize agree")
