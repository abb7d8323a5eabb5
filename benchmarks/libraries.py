"""Real libraries unchanged but for the import: one realistic call of each, under numba-cuda and switched to
overdub (``python -m overdub.switch --package LIB``), each run in a fresh process.

For each library the row gives the first call (compiling its kernels: the user's wait) and the median of the
warm calls after it, with overdub's time over numba-cuda's. The libraries' own GPU test suites are timed by
whoever runs them (``benchmarks/compat.py``'s companion commands in docs/from-numba-cuda.md); ``--suite`` adds
their wall times given as ``LIB=A,B`` (seconds under numba-cuda, then switched).

    python benchmarks/libraries.py --out DIR                 # every library installed here, on the GPU
    python benchmarks/libraries.py --only stumpy --repeat 5
    python benchmarks/libraries.py --cpu                     # the CPU target against the library's own CPU code
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Call:
    library: str  # the package switched
    what: str  # the call, as the table names it
    setup: str  # Python run once before timing (imports, data)
    call: str  # the statement timed
    gpu: bool = True  # the call waits for the GPU after it (numba-cuda's synchronize)


CALLS = (
    Call(
        "stumpy",
        "gpu_stump(T, 50), T of 10,000",
        "import numpy as np, stumpy\nT = np.random.default_rng(0).random(10_000)",
        "stumpy.gpu_stump(T, 50)",
    ),
    Call(
        "sgkit",
        "pairwise_distance(x, device='gpu'), x 2,000 x 1,000, Dask chunks of 500 rows",
        "import numpy as np, dask.array as da\nfrom sgkit.distance.api import pairwise_distance\n"
        "x = da.from_array(np.random.default_rng(0).random((2_000, 1_000)), chunks=(500, 1_000))",
        "pairwise_distance(x, metric='euclidean', device='gpu').compute()",
    ),
    Call(
        "warprnnt_numba",
        "RNNTLossNumba forward and backward, B 8, T 100, U 20, V 64 (torch on the GPU)",
        "import torch\nfrom warprnnt_numba.rnnt_loss import RNNTLossNumba\n"
        "g = torch.Generator().manual_seed(0)\n"
        "acts = torch.randn(8, 100, 21, 64, generator=g).cuda().requires_grad_()\n"
        "labels = torch.randint(1, 64, (8, 20), generator=g, dtype=torch.int32).cuda()\n"
        "act_lens = torch.full((8,), 100, dtype=torch.int32).cuda()\n"
        "label_lens = torch.full((8,), 20, dtype=torch.int32).cuda()\nloss = RNNTLossNumba(blank=0)",
        "loss(acts, labels, act_lens, label_lens).backward(); torch.cuda.synchronize()",
    ),
)

# the CPU target against the library's own CPU code (numba.njit, parallel) on the same machine: the first of each
# pair runs switched with OVERDUB_TARGET=cpu, the second as the library ships it (``--cpu``)
_CPU_SETUP = "import numpy as np, stumpy\nT = np.random.default_rng(0).random(5_000)"
CPU_CALLS = (
    (
        Call(
            "stumpy", "gpu_stump(T, 50) on the CPU target, T of 5,000", _CPU_SETUP, "stumpy.gpu_stump(T, 50)", gpu=False
        ),
        Call("stumpy", "stump(T, 50), its njit(parallel=True) code", _CPU_SETUP, "stumpy.stump(T, 50)", gpu=False),
    ),
)

_RUNNER = """
import json, time
{setup}
def _sync():
    if {gpu}:
        from numba import cuda
        cuda.synchronize()
start = time.perf_counter(); {call}; _sync(); first = time.perf_counter() - start
warm = []
for _ in range({repeat}):
    start = time.perf_counter(); {call}; _sync(); warm.append(time.perf_counter() - start)
print("RESULT " + json.dumps({{"first": first, "warm": warm}}))
"""


def measure(call: Call, switched: bool, repeat: int, cpu_target: bool = False) -> dict[str, object]:
    """One fresh process running ``call`` (switched to overdub or not, on its CPU target where
    ``cpu_target``): its first and warm times."""
    program = _RUNNER.format(setup=call.setup, call=call.call, repeat=repeat, gpu=call.gpu)
    env = dict(os.environ, OVERDUB_TARGET="cpu") if cpu_target else None
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / f"{call.library}_call.py"
        script.write_text(program)
        switch = ["-m", "overdub.switch", "--package", call.library] if switched else []
        done = subprocess.run(
            [sys.executable, *switch, str(script)], capture_output=True, text=True, timeout=900, env=env
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        return {"error": (done.stderr or done.stdout)[-1500:]}
    result: dict[str, object] = json.loads(lines[-1][len("RESULT ") :])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated libraries (default: every one installed)")
    parser.add_argument("--repeat", type=int, default=5, help="warm calls timed after the first")
    parser.add_argument(
        "--suite",
        action="append",
        default=[],
        help="LIB=A,B (seconds under numba-cuda, then switched): a test suite's times",
    )
    parser.add_argument("--out", type=Path, help="directory for libraries.json and libraries.md")
    parser.add_argument("--cpu", action="store_true", help="the CPU target against each library's own CPU code")
    options = parser.parse_args()
    chosen = set(options.only.split(",")) if options.only else None
    if options.cpu:
        return cpu_rows(chosen, options.repeat, options.out)
    suites = {k: tuple(map(float, v.split(","))) for k, v in (s.split("=", 1) for s in options.suite)}
    rows = []
    for call in CALLS:
        if (chosen and call.library not in chosen) or importlib.util.find_spec(call.library) is None:
            continue
        numba_cuda, overdub = measure(call, False, options.repeat), measure(call, True, options.repeat)
        rows.append({"library": call.library, "call": call.what, "numba-cuda": numba_cuda, "overdub": overdub})
        print(json.dumps(rows[-1])[:2000], flush=True)
    lines = [
        "| library | call | first call: numba-cuda / overdub (s) | warm: numba-cuda / overdub (ms) | warm ratio | suite: numba-cuda / overdub (s) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        a, b = row["numba-cuda"], row["overdub"]
        if "error" in a or "error" in b:
            lines.append(f"| {row['library']} | {row['call']} | error | error | -- | -- |")
            continue
        wa, wb = statistics.median(a["warm"]), statistics.median(b["warm"])
        suite = suites.get(row["library"])
        suite_text = f"{suite[0]:.1f} / {suite[1]:.1f}" if suite else "--"
        lines.append(
            f"| {row['library']} | {row['call']} | {a['first']:.2f} / {b['first']:.2f} | "
            f"{wa * 1e3:.1f} / {wb * 1e3:.1f} | {wb / wa:.2f}x | {suite_text} |"
        )
    table = "\n".join(lines)
    print(table)
    if options.out:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "libraries.json").write_text(json.dumps(rows, indent=1))
        (options.out / "libraries.md").write_text(table + "\n")


def cpu_rows(chosen: set[str] | None, repeat: int, out: Path | None) -> None:
    """``--cpu``: each library's GPU call switched to overdub's CPU target against the library's own CPU code."""
    lines = [
        "| library | overdub's CPU target | the library's CPU code | first call (s) | warm (ms) | warm ratio |",
        "|---|---|---|---:|---:|---:|",
    ]
    rows = []
    for ours, theirs in CPU_CALLS:
        if (chosen and ours.library not in chosen) or importlib.util.find_spec(ours.library) is None:
            continue
        a, b = measure(ours, True, repeat, cpu_target=True), measure(theirs, False, repeat)
        rows.append({"library": ours.library, "overdub cpu": a, "native": b})
        if "error" in a or "error" in b:
            lines.append(f"| {ours.library} | {ours.what} | {theirs.what} | error | error | -- |")
            continue
        wa, wb = statistics.median(a["warm"]), statistics.median(b["warm"])
        lines.append(
            f"| {ours.library} | {ours.what} | {theirs.what} | {a['first']:.2f} / {b['first']:.2f} | "
            f"{wa * 1e3:.1f} / {wb * 1e3:.1f} | {wa / wb:.2f}x |"
        )
    table = "\n".join(lines)
    print(table)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "libraries_cpu.json").write_text(json.dumps(rows, indent=1))
        (out / "libraries_cpu.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
