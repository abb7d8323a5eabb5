"""Shared helpers for the benchmark suite: result records, timing, generated modules."""

from __future__ import annotations

import itertools
import math
import statistics
import time
import traceback
import types as pytypes

import numpy as np

_counter = itertools.count()


def fresh_module(prefix: str, source: str, **extra) -> pytypes.ModuleType:
    """Exec ``source`` into a brand-new module with a unique name.

    overdub names generic functions by (module, qualname), so every generated module gets a name of its own:
    two modules never share a generic function by accident. The source is compiled without this file's
    ``from __future__ import annotations``: its annotations are evaluated when its statements run, as a module's
    are (an ``@od.struct`` class reads its field types then, and the generated module is in no ``sys.modules``
    to look them up in later).
    """
    import numba
    from numba import cuda

    import overdub as od

    name = f"odbench_{prefix}_{next(_counter)}"
    mod = pytypes.ModuleType(name)
    mod.__dict__.update(od=od, cuda=cuda, numba=numba, math=math, np=np)
    mod.__dict__.update(extra)
    exec(compile(source, f"<{name}>", "exec", dont_inherit=True), mod.__dict__)
    return mod


def error_text(exc: BaseException) -> str:
    """A one-paragraph description of an exception: type, message and the innermost frames."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = "; ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in tb[-3:])
    message = str(exc).strip().replace("\n", " | ")
    if len(message) > 600:
        message = message[:600] + " ..."
    return f"{type(exc).__name__}: {message} (at {where})"


class CheckFailed(AssertionError):
    """A kernel produced a wrong result: the case is flagged and not timed."""


def check_close(name: str, got, expected, rtol=1e-5, atol=1e-6) -> None:
    got = np.asarray(got)
    expected = np.asarray(expected)
    if got.shape != expected.shape:
        raise CheckFailed(f"{name}: shape {got.shape} != expected {expected.shape}")
    if not np.allclose(got, expected, rtol=rtol, atol=atol):
        bad = np.argwhere(~np.isclose(got, expected, rtol=rtol, atol=atol))
        first = tuple(int(i) for i in bad[0])
        raise CheckFailed(
            f"{name}: {len(bad)} of {got.size} elements wrong; first at {first}: "
            f"got {got[first]!r}, expected {expected[first]!r}"
        )


class Part:
    """The record of one part of the suite: measurements, targets, correctness checks, errors."""

    def __init__(self, key: str, title: str):
        self.key, self.title = key, title
        self.status = "ok"
        self.measurements: list[dict] = []
        self.targets: list[dict] = []
        self.checks: list[dict] = []
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.config: dict = {}
        self.seconds = 0.0

    def measure(self, name: str, value, unit: str, **extra) -> None:
        self.measurements.append({"name": name, "value": value, "unit": unit, **extra})

    def value(self, name: str):
        for m in self.measurements:
            if m["name"] == name:
                return m["value"]
        return None

    def target(self, name: str, value, op: str, threshold) -> None:
        """Record a target: ``value op threshold`` (op one of <=, >=, ==). A missing value does not hold."""
        holds = None
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            holds = {"<=": value <= threshold, ">=": value >= threshold, "==": value == threshold}[op]
            holds = bool(holds)
        self.targets.append({"name": name, "value": value, "op": op, "threshold": threshold, "holds": holds})

    def check(self, name: str, fn) -> bool:
        """Run a correctness check; a failure (or error) is recorded and returns False."""
        try:
            fn()
        except Exception as exc:  # recorded, the suite goes on
            self.checks.append({"name": name, "ok": False, "detail": error_text(exc)})
            self.errors.append(f"check {name} failed: {error_text(exc)}")
            return False
        self.checks.append({"name": name, "ok": True})
        return True

    def guard(self, what: str):
        """Context manager: an exception inside is recorded against ``what`` and swallowed."""
        part = self

        class _Guard:
            def __enter__(self):
                return self

            def __exit__(self, exc_type, exc, tb):
                if exc is None:
                    return False
                if isinstance(exc, KeyboardInterrupt):
                    return False
                part.errors.append(f"{what}: {error_text(exc)}")
                return True

        return _Guard()

    def as_dict(self) -> dict:
        if self.status == "ok" and self.errors:
            self.status = "partial"
        return {
            "key": self.key,
            "title": self.title,
            "status": self.status,
            "seconds": round(self.seconds, 2),
            "config": self.config,
            "measurements": self.measurements,
            "targets": self.targets,
            "checks": self.checks,
            "errors": self.errors,
            "notes": self.notes,
        }


def best_of(fn, repeats: int) -> float:
    """The smallest of ``repeats`` calls of ``fn()`` (each returning a time)."""
    return min(fn() for _ in range(repeats))


def wall(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median(values):
    return statistics.median(values)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b
