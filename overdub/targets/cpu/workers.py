"""How many of the runner's workers a launch uses: all of them, unless fewer were measured faster -- a small
grid, where waking the workers and waiting for them costs more than the work (tens of microseconds on a
loaded machine, against a microsecond for a 1,024-thread loop; on a host of many cores, waking every worker
for a grid of a few blocks can cost more than the whole grid run on a handful).

Each launch function keeps a :class:`Workers` policy, deciding per grid size from the launches it times:
a grid size's first launch runs on every worker; where it took less than :data:`PROBE_NS` -- or the next
one did: the first may have paid for waking sleeping workers (on a virtual machine, idle cores take
milliseconds to wake) -- the next ones probe fewer workers, halving the count (every, every/2, ... 1) while each is faster than the one before,
and from then on the fastest measured serves -- the count in use is timed at one launch in :data:`SAMPLE`
(timing every launch would cost a third of a small one), and another takes over where it was measured
faster -- all measured again every :data:`RECHECK` launches (the work a kernel does may change with its
data). A longer parallel launch is work, not waiting, and stays on every worker.
The choice changes how long a launch takes, never what it computes: blocks run independently however many
workers take them (a kernel synchronizing its grid keeps every worker).
"""

from __future__ import annotations

__all__ = ["Workers", "PROBE_NS", "RECHECK", "SAMPLE"]

PROBE_NS = 1_000_000
"""A launch on every worker shorter than this (ns) is timed against fewer workers."""
RECHECK = 1024
"""Launches of one grid size between two measurements."""
SAMPLE = 32
"""Once probing is done, one launch in this many is timed (RECHECK is a multiple of it)."""


class Workers:
    """One launch function's choice of workers, by grid size (blocks): ``use`` before a launch, then where
    ``timing`` says so, ``ran`` after it with the time it took."""

    __slots__ = ("_sizes", "timing")

    def __init__(self) -> None:
        self._sizes: dict[int, _GridSize] = {}
        self.timing = True
        """Whether the launch ``use`` was last asked about is to be timed (and ``ran`` told)."""

    def use(self, blocks: int, workers: int) -> int:
        """The workers the next launch of ``blocks`` blocks runs on: ``workers`` (every one), or fewer; sets
        ``timing``."""
        state = self._sizes.get(blocks)
        if state is None or state.left <= 0 or state.every != workers:
            state = self._sizes[blocks] = _GridSize(workers)
        left = state.left = state.left - 1
        self.timing = state.probing or not left % SAMPLE
        return state.choice

    def ran(self, blocks: int, used: int, ns: int) -> None:
        """A launch of ``blocks`` blocks on ``used`` workers took ``ns``."""
        state = self._sizes.get(blocks)
        if state is not None:
            state.ran(used, ns)


class _GridSize:
    """The measurements of one grid size since its last recheck: each worker count's latest time."""

    __slots__ = ("every", "choice", "times", "left", "probing", "woken")

    def __init__(self, every: int) -> None:
        self.every, self.choice, self.left, self.probing, self.woken = every, every, RECHECK, True, False
        self.times: dict[int, int] = {}  # worker count -> its latest launch's ns, in the order probed

    def ran(self, used: int, ns: int) -> None:
        if self.probing:
            if used == self.every and ns >= PROBE_NS and not self.woken:
                self.woken = True  # long, maybe for waking the workers: is the next one on every worker too?
                return
            before = next(reversed(self.times.values()), None)  # the count probed last, halved into this one
            self.times[used] = ns
            waiting = self.times.get(self.every, PROBE_NS) < PROBE_NS
            if waiting and used > 1 and (before is None or ns < before):
                self.choice = used // 2  # faster with fewer: fewer again next
                return
            self.probing = False
        else:
            self.times[used] = ns
        self.choice = min(self.times, key=self.times.__getitem__)
