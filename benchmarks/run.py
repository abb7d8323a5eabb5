"""overdub benchmark suite: one command runs every part the machine can run.

    python benchmarks/run.py [--quick] [--out DIR] [--parts 1,2,3,4,5,6,7,8,9] [--check] [--compile-only]

Parts 1-4 need a usable GPU (numba.cuda.is_available()) with cupy and cuda.core (and part 1's C floor a C
compiler, $CC or cc); part 5 (CPU target vs
numba.njit), part 6 (memory kept per re-run of a notebook cell) and part 7 (disk cache cold/warm/edited
against numba's cache=True, host calls against plum; its CUDA half only with a GPU) and part 8 (Dask: per-task
cost, shipping definitions; cupy chunks with a GPU) run anywhere. Writes DIR/results.json, DIR/results.md and DIR/*.png (when matplotlib is
importable) and prints the markdown at the end. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))  # the checkout's overdub, when it is not installed

from _common import Part, error_text  # noqa: E402

# Parts 1-6 measure compiling, not loading: the disk cache is off for them (and for the processes they start).
# Part 7 measures the cache itself and turns it on, with directories of its own, in the processes it starts.
os.environ["OVERDUB_CACHE"] = "0"

ALL_PARTS = ["1", "2", "3", "4", "5", "6", "7", "8", "9"]
TITLES = {
    "1": "Launch overhead",
    "2": "Validity-check scaling",
    "3": "Generated-code quality",
    "4": "Recompile selectivity and cost",
    "5": "CPU target vs numba.njit",
    "6": "Memory kept per re-run of a notebook cell",
    "7": "Starting fast: the disk cache and host calls",
    "8": "Scaling out with Dask: per-task cost, shipping definitions",
    "9": "CUDA graphs: replay per kernel, staying valid",
    "ptx": "PTX compile check (no GPU needed)",
}


def _version(module: str):
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return None


def _overdub_version() -> str | None:
    try:
        import overdub

        return overdub.__version__
    except Exception:
        return None


def _git() -> str | None:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "overdub"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        return rev + ("+dirty" if dirty else "") if rev else os.environ.get("OVERDUB_COMMIT")
    except Exception:
        return os.environ.get("OVERDUB_COMMIT")  # a copy of the tree without its git history


def gpu_usable() -> tuple[bool, str]:
    try:
        from numba import cuda

        if not cuda.is_available():
            return False, "numba.cuda.is_available() is False"
        return True, ""
    except Exception as exc:
        return False, f"numba.cuda unusable: {error_text(exc)}"


def environment(has_gpu: bool) -> dict:
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "numba": _version("numba"),
        "numba_cuda": _version("numba-cuda"),
        "cuda_core": _version("cuda-core"),
        "cupy": _version("cupy-cuda13x") or _version("cupy-cuda12x") or _version("cupy"),
        "torch": _version("torch"),
        "numpy": _version("numpy"),
        "overdub": _version("overdub") or _overdub_version(),
        "git": _git(),
        "gpu": None,
    }
    if has_gpu:
        try:
            from numba import cuda

            dev = cuda.get_current_device()
            name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
            env["gpu"] = f"{name} (cc {dev.compute_capability[0]}.{dev.compute_capability[1]})"
        except Exception as exc:
            env["gpu"] = f"? ({error_text(exc)})"
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer iterations")
    ap.add_argument("--out", default=str(HERE / "results"), help="output directory (default benchmarks/results)")
    ap.add_argument("--parts", default=",".join(ALL_PARTS), help="comma-separated parts to run (default all)")
    ap.add_argument(
        "--check",
        action="store_true",
        help="correctness only: run every kernel at tiny sizes, compare with numpy/cupy, time nothing",
    )
    ap.add_argument(
        "--compile-only",
        action="store_true",
        help="compile the GPU parts' kernels to PTX (no GPU needed) instead of running them",
    )
    args = ap.parse_args(argv)

    warnings.filterwarnings("ignore", module="numba")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in ALL_PARTS]
    if unknown:
        ap.error(f"unknown part(s) {unknown}: choose from {ALL_PARTS}")

    started = datetime.datetime.now().isoformat(timespec="seconds")
    t_start = time.perf_counter()
    has_gpu, why = gpu_usable()
    mode = "check" if args.check else ("quick" if args.quick else "full")
    if args.compile_only:
        mode = "compile-only"
    results = {
        "started": started,
        "mode": mode,
        "argv": sys.argv[1:],
        "gpu_usable": has_gpu,
        "environment": environment(has_gpu),
        "parts": [],
        "skipped": [],
    }
    print(
        f"overdub benchmarks: mode {mode}; GPU {'usable: ' + str(results['environment']['gpu']) if has_gpu else 'not usable (' + why + ')'}",
        flush=True,
    )

    import cache_part
    import cpu_part
    import gpu_parts
    import memory_part

    cfg = gpu_parts.check_settings() if args.check else gpu_parts.settings(args.quick)

    def run_part(key: str, fn):
        part = Part(key, TITLES[key])
        print(f"\n== part {key}: {part.title} ...", flush=True)
        t0 = time.perf_counter()
        try:
            fn(part)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the suite goes on
            part.status = "error"
            part.errors.append(error_text(exc))
        part.seconds = time.perf_counter() - t0
        d = part.as_dict()
        results["parts"].append(d)
        failed = [c["name"] for c in d["checks"] if not c["ok"]]
        print(
            f"   {d['status']} in {part.seconds:.1f} s; {len(d['measurements'])} measurements; "
            f"{len(d['checks']) - len(failed)}/{len(d['checks'])} checks passed",
            flush=True,
        )
        for e in d["errors"]:
            print(f"   ! {e}", flush=True)
        _write(results, out, t_start, plots=False)  # keep what we have if a later part hangs

    if args.compile_only:
        import compile_check

        run_part("ptx", lambda part: compile_check.run(part, args.quick))

    gpu = None
    gpu_error = None
    for key in wanted:
        if key == "5":
            if args.compile_only:
                continue
            run_part("5", lambda part: cpu_part.run(part, args.quick, check_only=args.check))
            continue
        if key == "6":
            if not args.compile_only:
                run_part("6", lambda part: memory_part.run(part, args.quick, check_only=args.check))
            continue
        if key == "8":
            if not args.compile_only:
                import dask_part

                run_part("8", lambda part: dask_part.run(part, args.quick, has_gpu))
            continue
        if key == "7":
            if not args.compile_only:
                run_part("7", lambda part: cache_part.run(part, args.quick, has_gpu, check_only=args.check))
            continue
        if args.compile_only:
            continue
        if not has_gpu:
            part = Part(key, TITLES[key])
            part.status = "skipped"
            part.notes.append(f"needs a GPU: {why}")
            results["parts"].append(part.as_dict())
            results["skipped"].append(f"part {key} ({TITLES[key]})")
            continue
        if gpu is None and gpu_error is None:
            try:
                gpu = gpu_parts.GPU()
            except Exception as exc:  # cupy / cuda.core missing or broken
                gpu_error = exc
        _title, fn = gpu_parts.PARTS[key]

        def body(part, fn=fn, gpu=gpu, gpu_error=gpu_error):
            if gpu_error is not None:
                raise RuntimeError(f"GPU setup failed: {error_text(gpu_error)}")
            fn(part, gpu, cfg, args.check)

        run_part(key, body)

    if results["skipped"]:
        print(f"\nskipped (no usable GPU): {', '.join(results['skipped'])}", flush=True)
    md = _write(results, out, t_start, plots=True)
    print("\n" + md)
    print(
        f"\nwrote {out / 'results.json'}, {out / 'results.md'}"
        + (f", {', '.join(results.get('plots', []))}" if results.get("plots") else "")
    )
    return 0


def _write(results: dict, out: Path, t_start: float, plots: bool) -> str:
    import report

    results["seconds"] = time.perf_counter() - t_start
    if plots:
        try:
            results["plots"] = report.plots(results, out)
        except ImportError as exc:
            results["plots"] = []
            results["plot_note"] = f"no plots: matplotlib is not importable ({exc})"
            print(f"\n{results['plot_note']}", flush=True)
        except Exception as exc:  # a broken plot must not lose the results
            results["plots"] = []
            results["plot_note"] = f"plotting failed: {error_text(exc)}"
            print(f"\n{results['plot_note']}", flush=True)
    md = report.markdown(results)
    if results.get("plot_note"):
        md += f"\n_{results['plot_note']}_\n"
    (out / "results.json").write_text(json.dumps(results, indent=2, default=_json_default))
    (out / "results.md").write_text(md + "\n")
    return md


def _json_default(value):
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
    except Exception:
        pass
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
