"""Every ``OVERDUB_*`` environment variable the library reads, declared once, and read only here.

Each setting is one :class:`Setting` record: its variable, its default, how its text is parsed and checked
(a bad value raises ``ValueError`` naming the variable and what to set it to), a line of documentation,
whether it changes the code a compile makes, and when it is read:

* ``EACH_USE``: at every use, so a change of the environment takes effect at the next use (the tests give
  each test its own ``OVERDUB_CACHE_DIR``);
* ``ONCE``: once per process, at the first use; the value then holds for the process (``process_value``,
  which a test may replace with ``monkeypatch.setattr(settings.REROUTE, "process_value", ...)``).

A setting that changes what a compile job compiles to, beyond what the job itself says, is part of the disk
cache's key: :func:`code_settings` is what the key reads, so a new such setting needs only ``changes_code``.
(``OVERDUB_DEBUG`` changes code through the target's compile options, which are part of the job and so of the
key already.) docs/settings.md documents them in one table, which a test compares with :data:`SETTINGS`.

This module imports nothing of overdub: every layer may read a setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Setting", "SETTINGS", "EACH_USE", "ONCE", "code_settings"]

EACH_USE = "each use"
ONCE = "once per process"
_UNREAD = object()


@dataclass(eq=False)
class Setting:
    """One ``OVERDUB_*`` variable: ``parse`` turns its text (None when unset) into its value, or raises."""

    name: str
    default: str  # the default as the documentation says it
    parse: Callable[[str | None], Any]
    doc: str
    changes_code: bool = False
    read: str = EACH_USE
    process_value: Any = field(default=_UNREAD, repr=False)

    def value(self) -> Any:
        """The setting's value: parsed from the environment now (``EACH_USE``), or as first read (``ONCE``)."""
        if self.read == EACH_USE:
            return self.parse(os.environ.get(self.name))
        if self.process_value is _UNREAD:
            self.process_value = self.parse(os.environ.get(self.name))
        return self.process_value


def _target(text: str | None) -> str | None:
    """A target's name (the registry of targets, ``overdub.targets.registry``, checks it is one)."""
    return text.strip() or None if text else None


def _cpu_threads(text: str | None) -> int:
    if not text:
        return os.cpu_count() or 1
    if not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"the environment variable OVERDUB_CPU_THREADS is {text!r}: set it to a positive number of "
            f"threads, or unset it to use every core"
        )
    return int(text)


def _debug(text: str | None) -> bool:
    if text not in (None, "", "0", "1"):
        raise ValueError(f"the environment variable OVERDUB_DEBUG is {text!r}: set it to 1 (checked kernels) or 0")
    return text == "1"


def _cache(text: str | None) -> bool:
    return (text or "1").strip().lower() not in ("0", "false", "no", "off")


def _cache_dir(text: str | None) -> str:
    if text:
        return text
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "overdub")


def _cache_size(text: str | None) -> int:
    """Bytes; a value that is no number means the default (the cache must not fail a launch)."""
    try:
        return int(float(text or "1024") * 2**20)
    except (ValueError, OverflowError):
        return 2**30


_REROUTE_MODES = ("when-extended", "always", "never")


def _reroute(text: str | None) -> str:
    if text and text not in _REROUTE_MODES:
        raise ValueError(
            f"the environment variable OVERDUB_REROUTE is {text!r}: set it to 'when-extended' (the default), "
            f"'always' or 'never'"
        )
    return text or "when-extended"


_CUDA_COMPILERS = ("numba-cuda", "numba-cuda-mlir")


def _cuda_compiler(text: str | None) -> str:
    if text and text not in _CUDA_COMPILERS:
        raise ValueError(
            f"the environment variable OVERDUB_CUDA_COMPILER is {text!r}: set it to 'numba-cuda' (the default) or "
            f"'numba-cuda-mlir'"
        )
    return text or "numba-cuda"


def _errors(text: str | None) -> str:
    if text and text not in ("short", "full"):
        raise ValueError(
            f"the environment variable OVERDUB_ERRORS is {text!r}: set it to 'short' (the default) or 'full'"
        )
    return text or "short"


TARGET = Setting(
    "OVERDUB_TARGET",
    "`cuda` when a GPU is usable, else `cpu`",
    _target,
    "the target of launches that name none: `cpu` or `cuda` (the default target is fixed at its first use)",
)
CUDA_COMPILER = Setting(
    "OVERDUB_CUDA_COMPILER",
    "`numba-cuda`",
    _cuda_compiler,
    "what compiles for `target=\"cuda\"` (and the default target on a GPU): `numba-cuda`, or `numba-cuda-mlir` "
    "(the `cuda-mlir` target, installed with `overdub[mlir]`)",
    read=ONCE,
)
CPU_THREADS = Setting(
    "OVERDUB_CPU_THREADS",
    "every core",
    _cpu_threads,
    "how many threads run a CPU grid's blocks (`overdub.targets.get_target('cpu').workers` changes it later)",
)
DEBUG = Setting(
    "OVERDUB_DEBUG",
    "`0`",
    _debug,
    "`1`: every launch that does not say otherwise compiles checked kernels (`debug=True`)",
    read=ONCE,
)
ERRORS = Setting(
    "OVERDUB_ERRORS",
    "`short`",
    _errors,
    "`full`: a compile failure's message, where it gives a plain account (a dict in a kernel, an undefined "
    "name...), ends with numba's whole report too (always in the error's `details`)",
)
CACHE = Setting("OVERDUB_CACHE", "`1`", _cache, "`0` (or `false`, `no`, `off`) turns the disk cache off")
CACHE_DIR = Setting(
    "OVERDUB_CACHE_DIR",
    "`$XDG_CACHE_HOME/overdub`, else `~/.cache/overdub`",
    _cache_dir,
    "the disk cache's directory",
)
CACHE_SIZE = Setting(
    "OVERDUB_CACHE_SIZE",
    "`1024`",
    _cache_size,
    "megabytes the disk cache keeps, least recently used entries removed first (not a number: the default)",
)
REROUTE = Setting(
    "OVERDUB_REROUTE",
    "`when-extended`",
    _reroute,
    "which operators in kernels become calls: `when-extended` (those some table of the chain has a method for), "
    "`always` or `never`; for measuring rerouting and testing that it changes no code, not an API",
    changes_code=True,
    read=ONCE,
)

SETTINGS = (TARGET, CUDA_COMPILER, CPU_THREADS, DEBUG, ERRORS, CACHE, CACHE_DIR, CACHE_SIZE, REROUTE)
"""Every setting of the library, in the order docs/settings.md lists them."""


def code_settings() -> list[tuple[str, Any]]:
    """(name, value) of each setting that changes the code a compile job compiles to: part of the disk
    cache's key."""
    return [(setting.name, setting.value()) for setting in SETTINGS if setting.changes_code]
