"""How many of the runner's workers a launch uses: all of them, unless running the grid on the launching
thread alone was measured faster -- a small grid, where waking the workers and waiting for them costs more
than the work (tens of microseconds on a loaded machine, against a microsecond for a 1,024-thread loop).

Each launch function keeps a :class:`Workers` policy, deciding per grid size from the launches it times:
a grid size's first launch runs on every worker; where it took less than :data:`PROBE_NS`, the next runs on
the launching thread alone, and from then on the faster of the two serves, measured again every
:data:`RECHECK` launches (the work a kernel does may change with its data). A longer parallel launch is work,
not waiting, and stays parallel. The choice changes how long a launch takes, never what it computes: blocks
run independently either way (a kernel synchronizing its grid keeps every worker).
"""

from __future__ import annotations

__all__ = ["Workers", "PROBE_NS", "RECHECK"]

PROBE_NS = 200_000
"""A parallel launch shorter than this (ns) is timed against the launching thread alone."""
RECHECK = 1024
"""Launches of one grid size between two measurements."""


class Workers:
    """One launch function's choice of workers, by grid size (blocks): ``use`` before a launch, ``ran`` after
    it with the time it took."""

    __slots__ = ("_sizes",)

    def __init__(self) -> None:
        # blocks -> [workers chosen, parallel ns, serial ns (-1: not measured), launches until the next
        # measurement, the workers there are]
        self._sizes: dict[int, list[int]] = {}

    def use(self, blocks: int, workers: int) -> int:
        """The workers the next launch of ``blocks`` blocks runs on: ``workers`` (every one), or 1."""
        state = self._sizes.get(blocks)
        if state is None or state[3] <= 0 or state[4] != workers:
            state = self._sizes[blocks] = [workers, -1, -1, RECHECK, workers]
        state[3] -= 1
        return state[0]

    def ran(self, blocks: int, used: int, ns: int) -> None:
        """A launch of ``blocks`` blocks on ``used`` workers took ``ns``."""
        state = self._sizes.get(blocks)
        if state is None:
            return
        every = state[4]
        state[1 if used == every else 2] = ns
        parallel, serial = state[1], state[2]
        if serial < 0:  # a short parallel launch: timed on this thread alone next
            state[0] = 1 if 0 <= parallel < PROBE_NS else every
        else:
            state[0] = 1 if parallel < 0 or serial <= parallel else every
