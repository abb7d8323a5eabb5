"""Compile options: how a target compiles, as numba-cuda's ``cuda.jit`` options say it.

A target compiles with one :class:`CompileOptions` value, and a target with other options is another target
(``target.configured(options)``) with its own root context, so kernels and method instances compiled with
different options are different cache entries -- GPUCompiler puts such settings in its target and params for
the same reason. A launch picks the configured target: ``od.jit(debug=True)`` does, ``od.cuda(..., debug=True)``
and ``OVERDUB_DEBUG=1`` do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any, Self

from .. import settings

__all__ = ["CompileOptions", "Configurable", "debug_default"]


@dataclass(frozen=True)
class CompileOptions:
    """The options that change the code a target makes (all targets accept all; each applies those it has).

    * ``debug`` -- checked kernels: array indices are bounds-checked and an error in a kernel is raised on
      the host naming the thread, the block and the kernel line (CPU: IndexError with the array and index;
      CUDA: numba-cuda's debug mode -- exceptions reported after the launch, debug info, no optimisation);
    * ``lineinfo`` -- source line information in the PTX (CUDA);
    * ``fastmath`` -- LLVM's fast-math flags (both targets) and NVVM's approximate division, square root and
      flush-to-zero (CUDA);
    * ``opt`` -- NVVM optimisation (CUDA; True is ``-opt=3``);
    * ``max_registers`` -- the register limit per thread (CUDA);
    * ``link`` -- files (PTX, cubin, fatbin, object, archive, CUDA C++) linked into the kernel's module (CUDA);
    * ``launch_bounds`` -- the maximum threads per block the kernel is compiled for, and optionally the
      minimum blocks per SM and the maximum blocks per cluster (CUDA);
    * ``lto`` -- link-time optimisation: the kernel and what it links are kept as LTO-IR and optimised together
      by nvJitLink when loaded (CUDA);
    * ``shared_memory_carveout`` -- the share of the unified L1/shared memory the kernel prefers as shared
      memory: a percentage (0-100, -1 the driver's default) or numba-cuda's ``"MaxL1"``, ``"MaxShared"``,
      ``"default"`` (CUDA; set on the kernel when it loads).
    """

    debug: bool = False
    lineinfo: bool = False
    fastmath: bool = False
    opt: bool = True
    max_registers: int | None = None
    link: tuple[str, ...] = ()
    launch_bounds: tuple[int, ...] | None = None
    lto: bool = False
    shared_memory_carveout: int | None = None

    @classmethod
    def of(cls, **options: Any) -> CompileOptions:
        """Options from numba-cuda's keyword arguments, checked: an unknown name or a wrong value is a
        TypeError naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown compile options {unknown}: overdub's are {sorted(known)}")
        values: dict[str, Any] = {}
        for name, value in options.items():
            if value is None and name in ("debug", "opt"):
                continue  # numba-cuda's None: the default
            values[name] = _checked(name, value)
        return cls(**values)

    def replaced(self, **changes: Any) -> CompileOptions:
        return replace(self, **{name: _checked(name, value) for name, value in changes.items()})

    def describe(self) -> str:
        """The options that differ from the defaults, as ``debug, max_registers=32`` (empty for defaults)."""
        default = CompileOptions()
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value != getattr(default, f.name):
                parts.append(f.name if value is True else f"{f.name}={value!r}")
        return ", ".join(parts)


def _checked(name: str, value: Any) -> Any:  # the user's value, checked: of the type of the field ``name``
    if name in ("debug", "lineinfo", "fastmath", "opt", "lto"):
        if not isinstance(value, bool) and value not in (0, 1):  # numba-cuda takes 0 and 1 too (opt=0)
            raise TypeError(f"compile option {name} must be True or False, not {value!r}")
        return bool(value)
    if name == "max_registers":
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise TypeError(f"compile option max_registers must be a positive int or None, not {value!r}")
        return value
    if name == "link":
        files = (value,) if isinstance(value, (str, os.PathLike)) else tuple(value or ())
        return tuple(os.fspath(f) if isinstance(f, os.PathLike) else f for f in files)
    if name == "launch_bounds":
        bounds = (value,) if isinstance(value, int) else tuple(value) if value is not None else None
        if bounds is not None and len(bounds) > 3:  # numba-cuda's error and the start of its message
            raise ValueError(
                f"Got {len(bounds)} launch bounds: {bounds}. A maximum of three are supported: (max threads per "
                f"block, min blocks per SM, max blocks per cluster)"
            )
        if bounds is not None and (
            not bounds or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in bounds)
        ):
            raise TypeError(
                f"compile option launch_bounds must be a positive int or a tuple of 1-3 of them "
                f"(max threads per block, min blocks per SM, max blocks per cluster), not {value!r}"
            )
        return bounds
    if name == "shared_memory_carveout":
        return _carveout(value)
    raise TypeError(f"unknown compile option {name!r}")


_CARVEOUTS = {"default": -1, "maxl1": 0, "maxshared": 100}  # numba-cuda's names for them


def _carveout(value: Any) -> int | None:
    """numba-cuda's ``shared_memory_carveout`` as the percentage the driver takes (its errors and messages)."""
    if value is None:
        return None
    if isinstance(value, str):
        if value.lower() not in _CARVEOUTS:
            raise ValueError(
                f"Invalid carveout value: {value!r} (an int from -1 to 100, 'MaxL1', 'MaxShared' or 'default')"
            )
        return _CARVEOUTS[value.lower()]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"shared_memory_carveout must be an int or a string, not {value!r}")
    if not -1 <= value <= 100:
        raise ValueError(f"Carveout value {value} must be between -1 and 100")
    return value


def debug_default() -> bool:
    """``OVERDUB_DEBUG=1`` turns debug on for every launch that does not say otherwise (read once per process,
    at the first launch that asks)."""
    debug: bool = settings.DEBUG.value()
    return debug


class Configurable:
    """A target that can be configured: ``configured(options)`` is the same target compiling with other
    options -- one object per options value, sharing the plain target's meaning of names (its root's
    forwards and replacements)."""

    options = CompileOptions()
    _plain: Self  # set on a configuration (``configured``): the plain target it configures

    @property
    def plain(self) -> Self:
        """The target with the default options, of which this one is a configuration."""
        plain: Self = self.__dict__.get("_plain", self)
        return plain

    def configured(self, options: CompileOptions) -> Self:
        if options == self.options:
            return self
        plain = self.plain
        if options == plain.options:
            return plain
        variants: dict[CompileOptions, Self] = plain.__dict__.setdefault("_variants", {})
        variant = variants.get(options)
        if variant is None:
            made = plain._with_options(options)
            made._plain = plain
            variant = variants.setdefault(options, made)
        return variant

    def _with_options(self, options: CompileOptions) -> Self:
        raise NotImplementedError

    def _label(self, base: str) -> str:
        described = self.options.describe()
        return f"{base} ({described})" if described else base
