"""overdub's promise across process boundaries, on every engine installed here: tests/travel_run.py (a notebook's
definitions in ``__main__``, changed step by step) must find that work run in another process -- process pools,
Dask, loky, Ray -- computes exactly what the client computes after each change (docs/scaling-out.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from helpers import ROOT, run_python

SCRIPT = Path(__file__).with_name("travel_run.py")
CHANGES = (
    "redef-main",
    "redef-module",
    "method-added",
    "context",
    "struct",
    "global",
    "table",
    "module-attr",
    "code-swap",
    "closure",
    "reload",
)
NEEDS = {  # the package each engine needs beyond the standard library
    "dask-processes": "distributed",
    "dask-threads": "distributed",
    "loky": "joblib",
    "ray-task": "ray",
    "ray-actor": "ray",
}
ENGINES = ("mp-fork", "mp-spawn", "mp-forkserver", "cf-fork", "cf-spawn", *NEEDS)


def installed_engines() -> list[str]:
    """The engines whose package is installed (the others are left out, as importorskip would skip them)."""
    engines = [e for e in ENGINES if e not in NEEDS or importlib.util.find_spec(NEEDS[e]) is not None]
    if not engines:
        pytest.skip("no engine is installed")
    return engines


def travel_run(seed: int, steps: int, engines: list[str], timeout: float) -> dict:
    """tests/travel_run.py in a fresh process (its definitions are __main__'s, as a notebook's are)."""
    argv = (SCRIPT, seed, steps, "--engines", ",".join(engines), "--timeout", 60)
    done = run_python(*argv, cwd=ROOT, timeout=timeout, check=False)
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        pytest.fail(f"travel_run.py printed no result (exit {done.returncode}):\n{done.stderr[-4000:]}")
    result["returncode"] = done.returncode
    return result


def check(result: dict, engines: list[str], steps: int, per_engine: int) -> None:
    assert result["skipped"] == {}, result["skipped"]  # an installed engine that cannot start is a failure here
    assert result["steps"] == steps
    assert all(result["engines"].get(e, 0) >= per_engine for e in engines), result["engines"]
    assert set(result["changes"]) == set(CHANGES), result["changes"]
    assert result["unobservable_changes"] == 0  # the run's own check: every change changed what was compared
    failed = {k: result[k] for k in ("mismatches", "hangs", "errors", "client_wrong")}
    assert failed == dict.fromkeys(failed, 0), json.dumps(
        {"failed": failed, "failing": result["failing"], "failures": result["failures"]}, indent=1
    )
    assert result["returncode"] == 0


@pytest.mark.soak
def test_every_engine_runs_what_the_client_defines_now_after_each_kind_of_change():
    engines = installed_engines()
    result = travel_run(seed=20260, steps=60, engines=engines, timeout=900)
    check(result, engines, steps=60, per_engine=3)


@pytest.mark.slow
def test_every_engine_randomized_thousand_steps():
    engines = installed_engines()
    result = travel_run(seed=2027, steps=1200, engines=engines, timeout=5400)
    check(result, engines, steps=1200, per_engine=60)
