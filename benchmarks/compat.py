"""numba-cuda's own kernel-language tests, run as shipped and switched to overdub.

    python benchmarks/compat.py [--switch jit|import] [--target cuda|cpu] [--quick] [--files test_math,...]
                                [--timeout 240] [--jobs N] [--out DIR]

Every test file of ``numba.cuda.tests.cudapy`` (found through importlib, wherever numba-cuda is installed) but
those of :data:`EXCLUDED` runs twice, each run in its own pytest subprocess (so a segfault or abort is attributed
to its file): (1) as shipped; (2) switched to overdub by the plugin ``benchmarks/compat/overdub_compat_plugin.py``,
in one of two ways (``--switch``; ``OVERDUB_COMPAT_PATCH`` tells the plugin):
  jit    -- (the default) ``numba.cuda.jit`` (and the ``jit`` bound in ``numba.cuda.decorators`` /
            ``numba.cuda.device_init``) replaced by ``overdub.jit`` before the test modules import it -- they use
            ``from numba import cuda`` then ``@cuda.jit``. numba-cuda's library code keeps numba's jit;
  import -- the one-import switch a user makes: each test module (``numba.cuda.tests.cudapy.test_*``) is loaded
            by an import hook from its source with its imports switched (``from overdub import cuda``, ``from
            overdub.cuda[.X] import ...``; overdub.switch), under its own file name; numba-cuda's harness
            (``numba.cuda.testing``, ``numba.cuda.tests.*``) and library are as shipped, nothing is patched. The
            tests' whole ``cuda`` namespace is then overdub's: host API as well as jit.
The plugin records each test's outcome, exception type and message as JSON lines.

Every test that passes as shipped but not with overdub is classified:
  api    -- API surface overdub does not provide: AttributeError (``.specialize``, ``.overloads``, ...),
            a TypeError about a missing/unsupported attribute, option, signature form (numba type objects as
            signatures) or call form, host numpy arrays refused
            ("lives in host memory"), NotImplementedError;
  wrong  -- wrong result: AssertionError (numpy.testing mismatches; also "X not raised", overdub accepting
            what numba rejects);
  crash  -- the subprocess died (signal, abort) or ran past the timeout before the test finished;
  other  -- any other exception, counted by type (overdub's CompileError, numba's TypingError, ...).
The ratio is overdub passes / numba-cuda passes over the tests numba-cuda passes; the measure is the same
ratio over the tests that launch through overdub (a test both runs pass without calling od.jit is left out). Writes DIR/compat.json and
DIR/compat.md (default benchmarks/results/) and prints the markdown.

``--target`` says where both runs execute:
  cuda -- (the default) the GPU: numba-cuda as shipped against overdub's CUDA target;
  cpu  -- no GPU: numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``) against overdub's CPU target
          (``OVERDUB_TARGET=cpu``, always with ``--switch import``: the tests' host API must be overdub's too).
          The overdub run's harness answers as the simulator's does (``config.ENABLE_CUDASIM`` set once overdub
          has imported numba-cuda), so both runs skip the same tests and take the same branches.
Excluded (:data:`EXCLUDED`, each with its reason); TestLibdeviceCompilation (in test_libdevice) is deselected:
hundreds of generated ``compile_ptx`` tests that never call jit and would pass identically in both runs. A file
named with ``--files`` and missing from the installed numba-cuda is reported as missing. ``--files
kernel-language`` runs :data:`KERNEL_LANGUAGE`, the first table's 15 files; --quick runs test_localmem,
test_constmem, test_random (small, fast). The per-test count of od.jit calls is
recorded (with either switch, the tests' calls of overdub's jit); tests that pass in both runs without calling
od.jit are reported (they measure nothing). compat.json and compat.md name the switch; with ``--switch import``
each file's entry lists the modules the hook switched (the file's own, and any test module it imports).

Without a GPU the shipped tests fail with CudaSupportError (or skip); NUMBA_ENABLE_CUDASIM=1 exercises the
harness only.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PLUGIN_DIR = HERE / "compat"

KERNEL_LANGUAGE = [
    "test_math",
    "test_intrinsics",
    "test_atomics",
    "test_sync",
    "test_warp_ops",
    "test_record_dtype",
    "test_complex",
    "test_libdevice",
    "test_operator",
    "test_cooperative_groups",
    "test_random",
    "test_array",
    "test_sm",
    "test_localmem",
    "test_constmem",
]
QUICK = ["test_localmem", "test_constmem", "test_random"]
EXCLUDED = {
    "test_fastmath": "it checks the fast-math flags numba-cuda writes into the PTX of `fastmath=True` and half "
    "its tests call `compile_ptx` (no jit): the option's plumbing inside numba-cuda, not the kernel language",
}
"""Files left out of every run, with the reason docs/compat.md gives."""
TARGETS = {
    "cuda": "the GPU: numba-cuda as shipped against overdub's CUDA target",
    "cpu": "no GPU: numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) against overdub's CPU target",
}
DESELECT = {"test_libdevice": "not TestLibdeviceCompilation"}
CLASSES = ("api", "wrong", "crash", "other")
SWITCHES = {
    "jit": "numba.cuda.jit replaced by od.jit",
    "import": "the one-import switch: the test modules' imports switched to `from overdub import cuda`",
}
"""How the second run switches the tests to overdub (the plugin's ``OVERDUB_COMPAT_PATCH``)."""

_API_TYPEERROR = re.compile(
    r"lives in host memory|has no attribute|unexpected (keyword|option)|got an unexpected|not subscriptable|"
    r"is not callable|launch the kernel|positional argument|not supported|unsupported|does not support|"
    r"invalid signature",
    re.I,
)


def tests_dir() -> Path:
    spec = importlib.util.find_spec("numba.cuda.tests.cudapy")
    return Path(next(iter(spec.submodule_search_locations)))


def every_file() -> list[str]:
    """Every test file of the installed numba-cuda's cudapy suite but :data:`EXCLUDED`."""
    return sorted(p.stem for p in tests_dir().glob("test_*.py") if p.stem not in EXCLUDED)


def run_file(name: str, switch: str | None, timeout: float, workdir: Path, target: str = "cuda") -> dict:
    """One pytest subprocess over numba.cuda.tests.cudapy.<name>, switched to overdub by ``switch`` (one of
    :data:`SWITCHES`; None: as shipped) on ``target`` (one of :data:`TARGETS`): its events, return code, time."""
    record = workdir / f"{name}.{'overdub' if switch else 'numba'}.jsonl"
    record.unlink(missing_ok=True)
    env = dict(os.environ, OVERDUB_COMPAT_RECORD=str(record), OVERDUB_COMPAT_PATCH=switch or "0")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if target == "cpu" and switch:
        env.update(OVERDUB_TARGET="cpu", OVERDUB_COMPAT_HARNESS="simulator")
    elif target == "cpu":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    paths = [str(PLUGIN_DIR), str(ROOT)]
    if importlib.util.find_spec("filecheck") is None:
        paths.append(str(PLUGIN_DIR / "stubs"))  # numba.cuda.testing imports it at module level
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "overdub_compat_plugin",
        "-c",
        str(workdir / "pytest.ini"),
        "--rootdir",
        str(workdir),
        "-q",
        "-p",
        "no:randomly",
        "--pyargs",
        f"numba.cuda.tests.cudapy.{name}",
    ]
    if name in DESELECT:
        cmd += ["-k", DESELECT[name]]
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    events = []
    if record.exists():
        for line in record.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short by a crash
    return {
        "returncode": proc.returncode,
        "timed_out": timed_out,
        "seconds": time.perf_counter() - start,
        "events": events,
        "tail": out.decode(errors="replace")[-2000:],
    }


def outcomes(run: dict) -> dict:
    """nodeid -> {outcome: passed/failed/error/skipped/crash, exc_type, message, od_calls}."""
    tests: dict = {}
    for ev in run["events"]:
        if ev["event"] == "start":
            tests.setdefault(ev["nodeid"], {"outcome": None, "exc_type": "", "message": "", "od_calls": 0})
        elif ev["event"] == "report":
            t = tests.setdefault(ev["nodeid"], {"outcome": None, "exc_type": "", "message": "", "od_calls": 0})
            t["od_calls"] = max(t["od_calls"], ev.get("od_calls", 0))
            if ev["outcome"] == "failed":
                bad = "error" if ev["when"] != "call" else "failed"
                if t["outcome"] not in ("failed", "error"):
                    t.update(outcome=bad, exc_type=ev.get("exc_type", ""), message=ev.get("message", ""))
            elif ev["outcome"] == "skipped" and t["outcome"] is None:
                t.update(outcome="skipped", message=ev.get("message", ""))
            elif ev["when"] == "call" and t["outcome"] is None and not ev.get("subtest"):
                t["outcome"] = "passed"
    finished = any(ev["event"] == "finish" for ev in run["events"])
    died = run["timed_out"] or not finished or run["returncode"] not in (0, 1, 2, 3, 4, 5)
    why = (
        "timeout"
        if run["timed_out"]
        else f"exit status {run['returncode']}"
        + (f" (signal {-run['returncode']})" if (run["returncode"] or 0) < 0 else "")
    )
    for t in tests.values():
        if t["outcome"] is None:  # started, never finished: the process died in it
            t.update(
                outcome="crash" if died else "passed", exc_type="crash" if died else "", message=why if died else ""
            )
    run["died"], run["why"] = died, why
    run["collect_errors"] = [ev for ev in run["events"] if ev["event"] == "collect_error"]
    run["patch_failed"] = next((ev for ev in run["events"] if ev["event"] == "patch_failed"), None)
    return tests


def classify(t: dict | None, run: dict) -> tuple[str, str, str]:
    """(class, exception type, message) of a test that did not pass with overdub."""
    if t is None and run.get("patch_failed"):  # overdub (or the patch) did not even import: not a crash
        ev = run["patch_failed"]
        return "other", f"overdub import: {ev['exc_type']}", ev["message"]
    if t is None:  # never ran: a collection error, or the process died before it
        if run["collect_errors"]:
            ev = run["collect_errors"][0]
            return _by_exception(ev.get("exc_type", ""), ev.get("message", "")) + (ev.get("message", ""),)
        return "crash", "crash", f"not run: {run['why']}" if run["died"] else "not run"
    if t["outcome"] == "crash":
        return "crash", "crash", t["message"]
    if t["outcome"] == "skipped":
        return "other", "skipped", t["message"]
    return _by_exception(t["exc_type"], t["message"]) + (t["message"],)


def _by_exception(etype: str, message: str) -> tuple[str, str]:
    if etype in ("AttributeError", "NotImplementedError"):
        return "api", etype
    if etype == "TypeError" and _API_TYPEERROR.search(message):
        return "api", etype
    if etype == "AssertionError":
        return "wrong", etype
    return "other", etype or "?"


def count(tests: dict) -> dict:
    c = collections.Counter(t["outcome"] for t in tests.values())
    return {k: c.get(k, 0) for k in ("passed", "failed", "error", "skipped", "crash")}


def measure(
    names: list[str], timeout: float, log=print, jobs: int = 1, switch: str = "jit", target: str = "cuda"
) -> dict:
    try:
        available = {p.stem for p in tests_dir().glob("test_*.py")}
    except Exception as exc:  # numba-cuda's tests not importable at all
        available = set()
        log(f"cannot find numba.cuda.tests.cudapy: {exc!r}")
    result = {
        "python": sys.version.split()[0],
        "timeout_s": timeout,
        "switch": switch,
        "target": target,
        "files": {},
        "missing": [],
    }
    try:
        from importlib.metadata import version

        result["numba_cuda"] = version("numba-cuda")
    except Exception:
        result["numba_cuda"] = "?"
    with tempfile.TemporaryDirectory(prefix="overdub-compat-") as tmp:
        workdir = Path(tmp)
        # namespace packages: numba-cuda ships numba/ without __init__.py, so pytest must not stop at numba/cuda
        (workdir / "pytest.ini").write_text("[pytest]\nconsider_namespace_packages = true\n")
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:  # each run is its own subprocess
            runs = {
                (name, mode): pool.submit(
                    run_file, name, switch if mode == "overdub" else None, timeout, workdir, target
                )
                for name in names
                if name in available
                for mode in ("numba", "overdub")
            }
            for name in names:
                if name not in available:
                    result["missing"].append(name)
                    log(f"{name}: not in this numba-cuda")
                    continue
                result["files"][name] = _compare(
                    name, runs[name, "numba"].result(), runs[name, "overdub"].result(), log
                )
    return result


def _compare(name: str, nb: dict, od: dict, log) -> dict:
    """One file's two runs: each run's counts, and every test numba-cuda passes that overdub does not."""
    for run in (nb, od):
        run["tests"] = outcomes(run)
    failures = []
    for nodeid, t in nb["tests"].items():
        if t["outcome"] != "passed":
            continue
        o = od["tests"].get(nodeid)
        if o is not None and o["outcome"] == "passed":
            continue
        cls, etype, message = classify(o, od)
        failures.append({"test": name + nodeid, "class": cls, "exc_type": etype, "message": message[:500]})
    no_jit = sum(
        1
        for nodeid, o in od["tests"].items()
        if o["outcome"] == "passed" and o["od_calls"] == 0 and nb["tests"].get(nodeid, {}).get("outcome") == "passed"
    )
    entry: dict = {
        mode: {
            "counts": count(r["tests"]),
            "returncode": r["returncode"],
            "timed_out": r["timed_out"],
            "died": r["died"],
            "seconds": round(r["seconds"], 1),
            "collect_errors": r["collect_errors"],
            "patch_failed": r["patch_failed"],
            "patched": any(ev["event"] == "patched" for ev in r["events"]),
            "switched": sorted({ev["module"] for ev in r["events"] if ev["event"] == "switched"}),
            "tail": r["tail"] if r["died"] or r["collect_errors"] else "",
        }
        for mode, r in (("numba", nb), ("overdub", od))
    }
    entry["overdub_only_failures"] = failures
    entry["passed_without_od_jit"] = no_jit
    c = collections.Counter(f["class"] for f in failures)
    log(
        f"{name}: numba-cuda {count(nb['tests'])['passed']} passed, overdub {count(od['tests'])['passed']}"
        f" passed; overdub-only failures {dict(c)} ({nb['seconds']:.0f}s + {od['seconds']:.0f}s)"
    )
    return entry


def totals(result: dict) -> dict:
    tot = {
        "numba": collections.Counter(),
        "overdub": collections.Counter(),
        "classes": collections.Counter(),
        "both_passed": 0,
        "numba_passed": 0,
        "passed_without_od_jit": 0,
    }
    for f in result["files"].values():
        for mode in ("numba", "overdub"):
            tot[mode].update(f[mode]["counts"])
        tot["classes"].update(x["class"] for x in f["overdub_only_failures"])
        tot["numba_passed"] += f["numba"]["counts"]["passed"]
        tot["passed_without_od_jit"] += f["passed_without_od_jit"]
    tot["both_passed"] = tot["numba_passed"] - sum(tot["classes"].values())
    tot["ratio"] = tot["both_passed"] / tot["numba_passed"] if tot["numba_passed"] else None
    # the measure: only the tests that launch through overdub (those both pass without calling od.jit
    # measure nothing, and are left out of both counts)
    tot["counted"] = tot["numba_passed"] - tot["passed_without_od_jit"]
    tot["counted_passed"] = tot["both_passed"] - tot["passed_without_od_jit"]
    tot["counted_ratio"] = tot["counted_passed"] / tot["counted"] if tot["counted"] else None
    return {k: dict(v) if isinstance(v, collections.Counter) else v for k, v in tot.items()}


def markdown(result: dict) -> str:
    def pfe(c):
        return (
            f"{c['passed']}/{c['failed']}/{c['error']}"
            + (f" ({c['skipped']} skip)" if c["skipped"] else "")
            + (f" ({c['crash']} crash)" if c["crash"] else "")
        )

    switch = result.get("switch", "jit")
    target = result.get("target", "cuda")
    lines = [
        "# overdub vs numba-cuda's cudapy tests",
        "",
        f"numba-cuda {result['numba_cuda']}, Python {result['python']}, per-file timeout "
        f"{result['timeout_s']:.0f} s. Target `{target}`: {TARGETS[target]}. "
        f"Overdub run: `--switch {switch}`, {SWITCHES[switch]}. "
        f"Counts are passed/failed/errored. Overdub-only failures: tests "
        f"numba-cuda passes and overdub does not -- api (API surface overdub does not provide), wrong "
        f"(wrong result), crash, other (by exception type).",
        "",
        "| file | numba-cuda p/f/e | overdub p/f/e | api | wrong | crash | other |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in result["files"].items():
        c = collections.Counter(x["class"] for x in f["overdub_only_failures"])
        others = collections.Counter(x["exc_type"] for x in f["overdub_only_failures"] if x["class"] == "other")
        other = f"{c['other']}" + (
            " (" + ", ".join(f"{k} {v}" for k, v in others.most_common()) + ")" if others else ""
        )
        notes = []
        for mode in ("numba", "overdub"):
            if f[mode]["died"] and not f[mode].get("patch_failed"):
                notes.append(
                    f"{mode} run died: " + ("timeout" if f[mode]["timed_out"] else f"rc {f[mode]['returncode']}")
                )
            if f[mode]["collect_errors"]:
                ev = f[mode]["collect_errors"][0]
                notes.append(f"{mode} collection error: {ev.get('exc_type')}: {ev.get('message', '')[:80]}")
        if f["overdub"].get("patch_failed"):
            ev = f["overdub"]["patch_failed"]
            notes.append(f"overdub did not load: {ev['exc_type']}: {ev['message'][:80]}")
        elif f["overdub"].get("patched") is False:
            notes.append("jit NOT patched" if switch == "jit" else "import hook NOT installed")
        elif switch == "import" and f"numba.cuda.tests.cudapy.{name}" not in f["overdub"].get("switched", []):
            notes.append("imports NOT switched")
        label = name + (" (" + "; ".join(notes) + ")" if notes else "")
        lines.append(
            f"| {label} | {pfe(f['numba']['counts'])} | {pfe(f['overdub']['counts'])} | {c['api']} | "
            f"{c['wrong']} | {c['crash']} | {other} |"
        )
    tot = totals(result)
    nb, od, cl = tot["numba"], tot["overdub"], tot["classes"]
    g = lambda d, k: d.get(k, 0)  # noqa: E731
    lines.append(
        f"| **total** | {g(nb, 'passed')}/{g(nb, 'failed')}/{g(nb, 'error')} | "
        f"{g(od, 'passed')}/{g(od, 'failed')}/{g(od, 'error')} | {g(cl, 'api')} | {g(cl, 'wrong')} | "
        f"{g(cl, 'crash')} | {g(cl, 'other')} |"
    )
    ratio = "n/a (numba-cuda passed nothing)" if tot["ratio"] is None else f"{tot['ratio']:.3f}"
    lines += [
        "",
        f"**Ratio** (overdub passes / numba-cuda passes, on the {tot['numba_passed']} tests numba-cuda "
        f"passes): {tot['both_passed']}/{tot['numba_passed']} = {ratio}. "
        f"Of the tests both pass, {tot['passed_without_od_jit']} never called od.jit.",
        "",
        f"**Ratio over the tests that launch through overdub** (a test both runs pass without od.jit left out): "
        f"{tot['counted_passed']}/{tot['counted']} = "
        + ("n/a" if tot["counted_ratio"] is None else f"{tot['counted_ratio']:.3f}")
        + ".",
    ]
    if result["missing"]:
        lines.append(f"\nNot in this numba-cuda: {', '.join(result['missing'])}.")
    fails = [x for f in result["files"].values() for x in f["overdub_only_failures"]]
    if fails:
        lines += ["", "## Overdub-only failures", "", "| test | class | exception | message |", "|---|---|---|---|"]
        for x in fails:
            msg = " ".join(x["message"].split())[:140].replace("|", "\\|")
            lines.append(f"| {x['test']} | {x['class']} | {x['exc_type']} | {msg} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--files",
        help="comma-separated test files (test_math,...; the test_ prefix optional), or kernel-language "
        "(default: every file but the excluded)",
    )
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per file and run (default 240)")
    ap.add_argument("--jobs", type=int, default=1, help="files run at once (each run its own subprocess)")
    ap.add_argument("--out", default=str(HERE / "results"), help="directory for compat.json and compat.md")
    ap.add_argument(
        "--switch",
        choices=sorted(SWITCHES),
        default="jit",
        help="how the overdub run switches: jit (numba.cuda.jit replaced, the default) or import (the one-import "
        "switch, the test modules' imports rewritten)",
    )
    ap.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="cuda",
        help="cuda (the GPU, the default) or cpu (numba-cuda's simulator against overdub's CPU target; implies "
        "--switch import)",
    )
    args = ap.parse_args(argv)
    if args.target == "cpu":
        args.switch = "import"
    names = QUICK if args.quick else every_file()
    if args.files == "kernel-language":
        names = KERNEL_LANGUAGE
    elif args.files:
        names = [n if n.startswith("test_") else "test_" + n for n in args.files.split(",") if n.strip()]
        names = [n[:-3] if n.endswith(".py") else n for n in names]
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    result = measure(names, args.timeout, log=log, jobs=args.jobs, switch=args.switch, target=args.target)
    result["totals"] = totals(result)
    md = markdown(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compat.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "compat.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
