"""The records the native launch path (``overdub/_fastlaunch.c``) is made with that more than one target gives it:
how a scalar and a pointer argument are guarded and packed. Each record's ``kind`` is the extension's letter for
it and its fields, in order, the extension's ``SPEC_FIELDS`` for that letter (tests/test_fastlaunch.py checks
both); the CUDA target's other records are in :mod:`overdub.targets.cuda.abi`, the CPU target's in
:mod:`overdub.targets.cpu.native`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

__all__ = ["ScalarSpec", "PointerSpec"]


@dataclass(frozen=True, slots=True)
class ScalarSpec:
    """A scalar converted to ``code`` (one of the extension's ``SCALAR_CODES``): one CUDA parameter slot, or its
    width in the CPU target's launch tuple."""

    kind: ClassVar[str] = "s"
    code: str


@dataclass(frozen=True, slots=True)
class PointerSpec:
    """An :class:`overdub.Pointer` of element ``dtype`` into device (``device``) or host memory: its address."""

    kind: ClassVar[str] = "p"
    dtype: np.dtype[Any]
    device: bool
