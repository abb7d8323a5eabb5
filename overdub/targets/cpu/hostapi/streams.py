"""numba-cuda's streams and events on the CPU target.

A CPU-target launch returns when its grid is done, and copies are numpy copies: whatever is given to a stream
has happened, in order, by the time the call returns. So a stream here is a handle a launch accepts
(``kernel[blocks, threads, stream]``, ``od.cuda(..., stream=s)``), whose ``synchronize`` flushes the kernels'
printf output, and whose callbacks run at once; an event records the host's clock, so ``elapsed_time`` is the
wall time between two records, in milliseconds, as numba-cuda's is the GPU's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Iterator

from ... import get_target

__all__ = [
    "Stream",
    "Event",
    "stream",
    "default_stream",
    "legacy_default_stream",
    "per_thread_default_stream",
    "external_stream",
    "event",
    "event_elapsed_time",
    "synchronize",
]

_handles = itertools.count(0x1000)  # CUDA's default streams are 0, 1 (legacy) and 2 (per thread)


def synchronize() -> None:
    """Wait for the launched work: on the CPU target it is done; device printf output is flushed."""
    get_target("cpu").synchronize()


class Stream:
    """A stream of the CPU target: launches and copies given to it are done when they return, in order."""

    __slots__ = ("handle", "external")

    def __init__(self, handle: int, external: bool = False):
        self.handle, self.external = handle, external

    def __int__(self) -> int:
        return self.handle

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        names = {0: "<Default CUDA stream>", 1: "<Legacy default CUDA stream>", 2: "<Per-thread default CUDA stream>"}
        if self.handle in names:
            return names[self.handle]
        return f"<{'External ' if self.external else ''}CUDA stream {self.handle} (CPU target)>"

    def synchronize(self) -> None:
        """Everything given to the stream is done; device printf output is flushed."""
        synchronize()

    @contextlib.contextmanager
    def auto_synchronize(self) -> Iterator[Stream]:
        yield self
        self.synchronize()

    def add_callback(self, callback: Callable[[Stream, int, object], object], arg: object = None) -> None:
        """Call ``callback(stream, status, arg)`` once the work before it is done: now."""
        callback(self, 0, arg)

    def async_done(self) -> asyncio.Future[Stream]:
        """An awaitable resolved when the work before it is done: already."""
        future: asyncio.Future[Stream] = asyncio.get_running_loop().create_future()
        future.set_result(self)
        return future


def stream() -> Stream:
    """A new stream."""
    return Stream(next(_handles))


def default_stream() -> Stream:
    return Stream(0)


def legacy_default_stream() -> Stream:
    return Stream(1)


def per_thread_default_stream() -> Stream:
    return Stream(2)


def external_stream(ptr: int) -> Stream:
    """A stream made elsewhere, known by its handle."""
    return Stream(int(ptr), external=True)


class Event:
    """An event of the CPU target: ``record`` notes the host's clock (the work before it is done)."""

    __slots__ = ("timing", "recorded")

    def __init__(self, timing: bool = True):
        self.timing = timing
        self.recorded: float | None = None

    def record(self, stream: object = 0) -> None:
        self.recorded = time.perf_counter()

    def query(self) -> bool:
        """Is the work before the last record done? Always, here."""
        return True

    def synchronize(self) -> None:
        """Wait for the work before the last record: it is done."""

    def wait(self, stream: object = 0) -> None:
        """Make ``stream`` wait for this event: work is done in order on the CPU target."""

    def elapsed_time(self, evtend: Event) -> float:
        return event_elapsed_time(self, evtend)


def event(timing: bool = True) -> Event:
    """A new event; ``timing=False`` makes one ``elapsed_time`` refuses, as numba-cuda's."""
    return Event(timing)


def event_elapsed_time(evtstart: Event, evtend: Event) -> float:
    """Milliseconds between the records of two events."""
    start, end = evtstart.recorded, evtend.recorded
    if not (evtstart.timing and evtend.timing):
        raise ValueError("elapsed_time of an event made with timing=False")
    if start is None or end is None:
        raise ValueError("elapsed_time of an event never recorded")
    return (end - start) * 1e3
