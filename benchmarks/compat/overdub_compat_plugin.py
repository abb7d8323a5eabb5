"""pytest plugin for benchmarks/compat.py, loaded with ``-p overdub_compat_plugin``.

It records every test's outcome (with the exception type and message of a failure) as JSON lines in the file
named by ``OVERDUB_COMPAT_RECORD``, flushing each line, so a run that crashes still says which test it was in.

``OVERDUB_COMPAT_PATCH`` says how the tests are switched to overdub, before any test module is imported:

- ``0`` (or unset): not at all, numba-cuda's tests as shipped;
- ``jit`` (or ``1``): ``numba.cuda.jit`` (and the ``jit`` names already bound in ``numba.cuda.decorators`` and
  ``numba.cuda.device_init``) is replaced by ``overdub.jit``. Calls from numba-cuda's own library code
  (``numba.*`` outside ``numba.cuda.tests``: device-array assignment kernels, reductions, vectorize, the random
  module...) keep numba's jit, so only the kernels the tests write themselves go through overdub -- what a user
  who swapped ``@cuda.jit`` for ``@od.jit`` would get;
- ``import``: the one-import switch. overdub.switch's import hook (:func:`switched_tests`, first on
  ``sys.meta_path``) loads each test module (``numba.cuda.tests.cudapy.test_*``) from its source with its
  imports switched as a user switches a program (:func:`overdub.switch.switched_source`: ``from overdub import
  cuda``, ``from overdub.cuda[.X] import ...``), compiled under its own file name, line for line. numba-cuda's harness
  (``numba.cuda.testing``, ``numba.cuda.tests.*`` helpers) and library are loaded as shipped; nothing of numba
  is patched. The test modules' ``cuda`` is ``overdub.cuda``: their kernels, their ``cuda.to_device`` and the
  rest are overdub's namespace. (pytest's assertion rewriting, a hook behind this one, does not reach them:
  a bare ``assert`` fails with a plain message.)

Either way each call of overdub's jit from a test is counted (``od_calls`` of each report).

``OVERDUB_COMPAT_HARNESS=simulator`` (the CPU run, compared with numba-cuda's simulator): once overdub has
imported numba-cuda, numba-cuda's ``config.ENABLE_CUDASIM`` is set, so its harness (``skip_on_cudasim``, the
test modules' ``if config.ENABLE_CUDASIM:`` branches) answers as in the simulator run.
"""

from __future__ import annotations

import json
import os
import sys

_RECORD = os.environ.get("OVERDUB_COMPAT_RECORD")
_out = open(_RECORD, "a", buffering=1) if _RECORD else None  # noqa: SIM115 -- open for the whole run
_calls = [0]  # od.jit calls since the current test started (module level: before any test)
_current = {"nodeid": None}
SWITCHES = {"0": None, "": None, "1": "jit", "jit": "jit", "import": "import"}
"""``OVERDUB_COMPAT_PATCH``'s values: the switch each means (None: the tests as shipped)."""
TEST_MODULES = "numba.cuda.tests.cudapy.test_"
"""The modules the import switch rewrites: numba-cuda's test modules, by name prefix."""


def _write(**event):
    if _out is not None:
        _out.write(json.dumps(event) + "\n")
        _out.flush()


_CALL = "__od_compat_r = __od_compat_jit(*__od_compat_a, **__od_compat_k)"


def counting(od_jit, numba_jit=None):
    """``od_jit``, each call counted; with ``numba_jit``, a call from numba-cuda's library code (``numba.*``
    outside ``numba.cuda.tests``) goes there instead, uncounted."""

    def jit(*args, **kwargs):
        caller = sys._getframe(1)
        module = caller.f_globals.get("__name__", "")
        if numba_jit is not None and module.startswith("numba.") and not module.startswith("numba.cuda.tests"):
            return numba_jit(*args, **kwargs)
        _calls[0] += 1
        # od.jit reads the scope its caller's def runs in (sys._getframe(1).f_locals): run the call in a frame
        # whose locals are a copy of the caller's, so device functions see the names the test defined.
        ns = dict(caller.f_locals)
        ns.update(__od_compat_jit=od_jit, __od_compat_a=args, __od_compat_k=kwargs)
        exec(_CALL, caller.f_globals, ns)
        return ns["__od_compat_r"]

    jit.__doc__ = od_jit.__doc__
    jit.__wrapped__ = od_jit
    return jit


def _install_jit():
    import numba.cuda
    import numba.cuda.decorators as decorators

    import overdub

    # numba-cuda's library modules that decorate with jit at import time keep numba's jit: import them first.
    for name in ("numba.cuda.random", "numba.cuda.kernels.reduction", "numba.cuda.kernels.transpose"):
        try:
            __import__(name)
        except Exception:
            pass
    numba_jit = decorators.jit
    jit = counting(overdub.jit, numba_jit)
    numba.cuda.jit = jit
    decorators.jit = jit
    dev = sys.modules.get("numba.cuda.device_init")
    if dev is not None and getattr(dev, "jit", None) is numba_jit:
        dev.jit = jit
    sim = sys.modules.get("numba.cuda.simulator_init")
    if sim is not None and hasattr(sim, "jit"):
        sim.jit = jit
    _write(event="patched", switch="jit", overdub=getattr(overdub, "__file__", "?"))


def switched_tests():
    """overdub.switch's import hook over numba-cuda's test modules (:data:`TEST_MODULES`), each recorded."""
    from overdub.switch import SwitchedFinder

    return SwitchedFinder(
        lambda name, origin: name.startswith(TEST_MODULES),
        note=lambda name, lines: _write(event="switched", module=name, lines=lines),
    )


_READ_THE_FLAG_ON_IMPORT = ("numba.cuda.random", "numba.cuda.kernels.reduction", "numba.cuda.kernels.transpose")


def _install_import():
    import overdub.cuda

    overdub.cuda.jit = counting(overdub.cuda.jit)  # `cuda.jit` and `from overdub.cuda import jit` alike
    sys.meta_path.insert(0, switched_tests())
    if os.environ.get("OVERDUB_COMPAT_HARNESS") == "simulator":
        from numba.cuda.core import config

        for name in _READ_THE_FLAG_ON_IMPORT:  # these modules jit as the simulator where they see the flag
            __import__(name)
        config.ENABLE_CUDASIM = 1
    _write(event="patched", switch="import", overdub=getattr(overdub.cuda, "__file__", "?"))


SWITCH = SWITCHES.get(os.environ.get("OVERDUB_COMPAT_PATCH", "0"), "?")
if SWITCH is not None:
    try:
        if SWITCH not in ("jit", "import"):
            raise ValueError(f"OVERDUB_COMPAT_PATCH={os.environ['OVERDUB_COMPAT_PATCH']!r}: 0, jit or import")
        (_install_jit if SWITCH == "jit" else _install_import)()
    except Exception as exc:  # recorded; the harness reports a run that could not patch
        _write(event="patch_failed", exc_type=type(exc).__name__, message=str(exc)[:500])
        raise


def _exc(report, call_excinfo=None):
    """(type name, message) of a failed report."""
    if call_excinfo is not None:
        return call_excinfo.typename, str(call_excinfo.value)[:500]
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None:
        text = crash.message
    else:  # a collection error: its text, the exception on the last "E   " line
        text = str(getattr(report, "longrepr", ""))
        lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
        text = lines[-1] if lines else text[-500:]
    head, _, rest = text.partition(":")
    head = head.strip().rsplit(".", 1)[-1]
    if head.isidentifier() and (head.endswith(("Error", "Exception", "Warning")) or head in ("Failed", "Skipped")):
        return head, rest.strip()[:500]
    return "", text[:500]


def pytest_collectreport(report):
    if report.failed:
        etype, message = _exc(report)
        _write(event="collect_error", nodeid=report.nodeid, exc_type=etype, message=message, od_calls=_calls[0])


def pytest_runtest_logstart(nodeid, location):
    _calls[0] = 0
    _current["nodeid"] = nodeid
    _write(event="start", nodeid=nodeid)


try:
    import pytest

    @pytest.fixture(scope="class")
    def initialize_from_pytest_config(request):
        """What numba-cuda's own conftest (not shipped in the wheel) gives ``CUDATestCase``."""
        if request.cls is not None:
            request.cls._dump_failed_filechecks = False

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        if call.excinfo is not None and report.failed:
            report._od_exc = _exc(report, call.excinfo)
except ImportError:  # imported outside pytest
    pass


def pytest_runtest_logreport(report):
    event = dict(event="report", nodeid=report.nodeid, when=report.when, outcome=report.outcome, od_calls=_calls[0])
    if type(report).__name__ != "TestReport":  # a subtest's report (pytest >= 9, or pytest-subtests)
        event["subtest"] = True
    if report.failed:
        etype, message = getattr(report, "_od_exc", None) or _exc(report)
        event.update(exc_type=etype, message=message)
    elif report.skipped:
        longrepr = report.longrepr
        event["message"] = (longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr))[:300]
    _write(**event)


def pytest_sessionfinish(session, exitstatus):
    _write(event="finish", exitstatus=int(exitstatus))
