"""Launches never fail and never run stale code while another thread redefines what they call (and launches
right after each redefinition, as a re-run notebook cell does, seeing its own redefinition at once).

The soak runs for OVERDUB_SOAK_SECONDS (3 by default; the `slow` test, run with OVERDUB_SLOW=1, for 60) with
one redefiner and four launchers."""

import os
import threading
import time

import numpy as np
import pytest

import overdub as od
from helpers import CALLS_F, method_f


def soak(make_module, seconds: float) -> tuple[int, int]:
    """(launches, redefinitions) made in ``seconds``; fails on any error or any value never defined."""
    m = make_module(method_f("0") + CALLS_F)
    stop, errors, launches = threading.Event(), [], [0]
    defined = {0}

    def launcher():
        out = np.zeros(1, dtype=np.int64)
        try:
            while not stop.is_set():
                od.cuda(m.kernel, out)
                assert int(out[0]) in defined, f"launch ran {int(out[0])}, never defined"
                launches[0] += 1
        except BaseException as error:  # any error is the failure
            errors.append(error)

    threads = [threading.Thread(target=launcher) for _ in range(4)]
    for thread in threads:
        thread.start()
    version, deadline, own = 0, time.monotonic() + seconds, np.zeros(1, dtype=np.int64)
    try:
        while time.monotonic() < deadline and not errors:
            version += 1
            defined.add(version)
            m.run(
                f"@od.function\ndef f(x: od.Integer):\n    return {version}\n\ndef kernel(out):\n    out[0] = f(0)\n"
            )  # the cell redefines the kernel too
            od.cuda(m.kernel, own)  # as a re-run notebook cell does: the redefining thread launches too
            assert own[0] == version, f"the redefining thread ran {own[0]} right after defining {version}"
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out)
    assert out[0] == version
    return launches[0], version


def test_four_launchers_and_a_redefiner_never_fail(make_module):
    launches, redefinitions = soak(make_module, float(os.environ.get("OVERDUB_SOAK_SECONDS", 3)))
    assert launches > 0 and redefinitions > 0


@pytest.mark.slow
def test_four_launchers_and_a_redefiner_never_fail_for_a_minute(make_module):
    launches, redefinitions = soak(make_module, 60.0)
    print(f"60 s: {launches} launches, {redefinitions} redefinitions, no failure")
