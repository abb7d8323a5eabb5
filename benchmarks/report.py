"""results.md (markdown tables) and the PNG plots from the results dict."""

from __future__ import annotations

import math
import re
from pathlib import Path


def fmt(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value == 0:
            return "0"
        a = abs(value)
        if a >= 1000:
            return f"{value:,.0f}"
        return f"{value:.4g}"
    return str(value)


def _holds(holds) -> str:
    return {True: "yes", False: "**NO**", None: "not measured"}[holds]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(results: dict) -> str:
    env = results["environment"]
    lines = [f"# overdub benchmark results ({results['mode']})", ""]
    lines.append(f"- when: {results['started']} ({results['seconds']:.0f} s)")
    lines.append(
        f"- machine: {env.get('gpu') or 'no usable GPU'}; {env.get('cpu_count')} CPUs; "
        f"python {env.get('python')}; numba {env.get('numba')}; numba-cuda {env.get('numba_cuda')}; "
        f"cupy {env.get('cupy')}; cuda.core {env.get('cuda_core')}; overdub {env.get('overdub')} "
        f"({env.get('git', '?')})"
    )
    if results.get("skipped"):
        lines.append(f"- skipped: {', '.join(results['skipped'])}")
    lines.append("")

    targets = [(p, t) for p in results["parts"] for t in p["targets"]]
    if targets:
        lines += ["## Targets", "", "| Part | Target | Value | Threshold | Holds |", "|---|---|---:|---|---|"]
        for p, t in targets:
            lines.append(
                f"| {p['key']} | {_cell(t['name'])} | {fmt(t['value'])} | {t['op']} {fmt(t['threshold'])} "
                f"| {_holds(t['holds'])} |"
            )
        lines.append("")

    for p in results["parts"]:
        lines.append(f"## Part {p['key']}: {p['title']} — {p['status']}")
        lines.append("")
        if p["status"] == "skipped":
            lines += [f"Skipped: {'; '.join(p['notes'])}", ""]
            continue
        if p["measurements"]:
            lines += ["| Measurement | Value | Unit | Detail |", "|---|---:|---|---|"]
            for m in p["measurements"]:
                detail = ", ".join(
                    f"{k}={fmt(v) if isinstance(v, float) else v}"
                    for k, v in m.items()
                    if k not in ("name", "value", "unit", "case", "impl")
                )
                lines.append(f"| {_cell(m['name'])} | {fmt(m['value'])} | {m['unit']} | {_cell(detail)} |")
            lines.append("")
        failed = [c for c in p["checks"] if not c["ok"]]
        lines.append(f"Correctness checks: {len(p['checks']) - len(failed)}/{len(p['checks'])} passed.")
        for c in failed:
            lines.append(f"- FAILED {_cell(c['name'])}: {_cell(c.get('detail', ''))}")
        for e in p["errors"]:
            if not e.startswith("check "):
                lines.append(f"- ERROR {_cell(e)}")
        if p["notes"]:
            lines.append("")
            lines += [f"> {n}" for n in p["notes"]]
        lines.append("")
    return "\n".join(lines)


# --- plots ----------------------------------------------------------------------------------------------


def plots(results: dict, out: Path) -> list[str]:
    """Write one PNG per part that has something to plot; returns the file names (raises ImportError
    when matplotlib is missing)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    parts = {p["key"]: p for p in results["parts"] if p["measurements"]}

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        written.append(name)

    p = parts.get("1")
    if p:
        rows = [m for m in p["measurements"] if m["unit"] == "us/launch"]
        cases = sorted({m["case"] for m in rows})
        impls = ["C floor", "overdub", "overdub od.jit", "cuda.core", "cupy RawKernel", "numba-cuda"]
        if rows:
            fig, ax = plt.subplots(figsize=(11, 4.5))
            width = 0.8 / len(impls)
            for j, impl in enumerate(impls):
                at = {m["case"]: m["value"] for m in rows if m["impl"] == impl}  # a launcher may miss a case
                xs = [i + j * width for i, c in enumerate(cases) if c in at]
                bars = ax.bar(xs, [at[c] for c in cases if c in at], width, label=impl)
                ax.bar_label(bars, fmt="%.1f", fontsize=6)
            labels = {
                "a": "(a) no args",
                "b": "(b) 1 array + 1 scalar",
                "c": "(c) 8 arrays + 4 scalars",
                "d": "(d) a struct",
                "e": "(e) a record array",
            }
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))], [labels.get(c, c) for c in cases])
            ax.set_ylabel("host µs per launch (log)")
            ax.set_yscale("log")
            ax.set_title("Part 1: launch overhead of an empty kernel")
            ax.legend()
            save(fig, "part1_launch_overhead.png")

    p = parts.get("2")
    if p:
        rows = [m for m in p["measurements"] if m["unit"] == "us/launch"]
        if rows:
            fig, ax = plt.subplots(figsize=(6, 4))
            ax.plot([m["edges"] for m in rows], [m["value"] for m in rows], "o-")
            ax.set_xscale("log")
            ax.set_xlabel("edges of the kernel (len(od.explain))")
            ax.set_ylabel("host µs per launch")
            lo = min(m["value"] for m in rows)
            ax.axhline(lo * 1.05, color="red", ls="--", lw=0.8, label="target: min + 5%")
            ax.set_ylim(0, max(m["value"] for m in rows) * 1.3)
            ax.set_title("Part 2: launch time vs edges")
            ax.legend()
            save(fig, "part2_edges.png")

    p = parts.get("3")
    if p:
        rows = [m for m in p["measurements"] if m["unit"] == "ms" and "[" in m["name"]]
        groups = {}
        for m in rows:
            groups.setdefault(m["name"].split(" ", 1)[0], []).append(m)
        if groups:
            fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 3.8), squeeze=False)
            for ax, ms in zip(axes[0], groups.values()):
                labels = [m["name"].split("[", 1)[1].rstrip("]") for m in ms]
                bars = ax.bar(
                    labels,
                    [m["value"] for m in ms],
                    color=[
                        "tab:blue" if label == "overdub" else "tab:orange" if label == "numba-cuda" else "tab:gray"
                        for label in labels
                    ],
                )
                ax.bar_label(bars, fmt="%.3f", fontsize=7)
                ax.set_title(ms[0]["name"].split("[", 1)[0].strip(), fontsize=9)
                ax.set_ylabel("device ms (median, CUDA events)")
                ax.tick_params(axis="x", labelsize=7, rotation=20)
            fig.suptitle("Part 3: generated-code quality")
            save(fig, "part3_device_time.png")

    p = parts.get("4")
    if p:
        rows = [m for m in p["measurements"] if m["unit"] == "s" and ("overdub" in m["name"] or "numba" in m["name"])]
        if rows:
            fig, ax = plt.subplots(figsize=(7, 3))
            bars = ax.barh(
                [re.sub(r"^4 ", "", m["name"]) for m in rows],
                [m["value"] for m in rows],
                color=["tab:blue", "tab:orange"][: len(rows)],
            )
            ax.bar_label(bars, fmt="%.3f s", fontsize=8)
            ax.set_xlabel("seconds (best of repeats)")
            ax.set_title("Part 4: recompile after redefining a leaf")
            save(fig, "part4_recompile.png")

    p = parts.get("5")
    if p:
        rows = [m for m in p["measurements"] if m["unit"] == "ms"]
        if rows:
            fig, ax = plt.subplots(figsize=(7, 3.5))
            bars = ax.barh(
                [m["name"] for m in rows],
                [m["value"] for m in rows],
                color=["tab:blue" if "od" in m["name"] else "tab:orange" for m in rows],
            )
            ax.bar_label(bars, fmt="%.2f ms", fontsize=8)
            ax.set_xscale("log")
            ax.invert_yaxis()
            ax.set_xlabel("wall ms (best of N, log)")
            ax.set_title("Part 5: CPU target vs numba.njit")
            save(fig, "part5_cpu.png")
    return written
