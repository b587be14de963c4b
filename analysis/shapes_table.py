"""Layer norm over seven widths and two heights, matmul over four sizes: the tables, rebuilt from the records alone.

The records are records/h200-2026-11-29-shapes.tar.xz (analysis/archives.py: an archive, or an extracted folder).

Per shape, from the second, separate run (rerun/): the best variant, its knobs and census, Triton at its best
config, torch (cuBLAS FP32 for matmul), the same-bytes copy, the floor and % of it, each target met or not; beside it
the first run's time for the same config (ln/, matmul/, matmul_k_unroll/) and the agreement of the two runs. Then
the seed-style table: Triton's kernel against ours, property by property, from the offline compare records.

    python analysis/shapes_table.py [--runs records/h200-2026-11-29-shapes.tar.xz] [--markdown] [--figure out.png]

The shapes are those of the second run's records (rerun/ln_mM_dD.json, rerun/mm_S.json); a first-run record that
is missing reads as no first-run winner ("-").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from tabulate import tabulate

from mage_tune.kernels import get_family
from mage_tune.measure.saved import best_result, floor_us, result_time

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis/archives.py
from archives import RecordsError, local_one

CUBLAS_BOUND = {1024: 1.00, 2048: 1.10, 4096: 1.10}  # target for ours/cuBLAS (none set at 1000)
TRITON_BOUND = 0.85  # ours/Triton at its best config, every matmul size


def _first_winner(family: str, paths: list[Path]) -> tuple[dict, float] | None:
    """The first run's fastest variant (over its records) and its time."""
    timed = []
    for path in paths:
        if path.exists():
            record = json.loads(path.read_text())
            best = best_result(record, "variant")
            if best:
                timed.append((result_time(best), get_family(family).with_defaults(best["config"])))
    return (min(timed, key=lambda pair: pair[0])[1], min(timed, key=lambda pair: pair[0])[0]) if timed else None


def _agreement(family: str, first_paths: list[Path], second: dict) -> str:
    """The first run's winner, measured again in the second run: both times and their difference."""
    found = _first_winner(family, first_paths)
    if not found:
        return "-"
    config, t1 = found
    again = [
        result_time(r)
        for r in second["results"]
        if r["kind"] == "variant" and r["ok"] and get_family(family).with_defaults(r["config"]) == config
    ]
    return f"{t1:.2f} → {again[0]:.2f} ({again[0] / t1 - 1:+.1%})" if again else f"{t1:.2f} → not re-measured"


def _knobs(config: dict, keys: tuple[str, ...]) -> str:
    return ",".join(f"{k}={config[k]}" for k in keys)


def _census_text(record: dict, label: str) -> str:
    c = record["census"].get(label)
    if not c:
        return "-"
    occ = c["occupancy"]
    flight = c["sass"]["bytes_in_flight"]
    return f"{c['registers']} regs, {occ['fraction']:.0%} occ ({occ['limiter']}), {flight} B in flight"


def ln_shapes(runs: Path) -> list[tuple[int, int]]:
    """(M, d) of every layer-norm record of the second run, by M then d."""
    found = (re.fullmatch(r"ln_m(\d+)_d(\d+)\.json", p.name) for p in (runs / "rerun").glob("ln_m*_d*.json"))
    return sorted((int(f[1]), int(f[2])) for f in found if f)


def mm_sizes(runs: Path) -> list[int]:
    """M = N = K of every matmul record of the second run, smallest first."""
    found = (re.fullmatch(r"mm_(\d+)\.json", p.name) for p in (runs / "rerun").glob("mm_*.json"))
    return sorted(int(f[1]) for f in found if f)


def ln_rows(runs: Path) -> tuple[list[list[str]], list[tuple[str, float]]]:
    rows, ratios = [], []
    for m, d in ln_shapes(runs):
        path = runs / "rerun" / f"ln_m{m}_d{d}.json"
        record = json.loads(path.read_text())
        ours, tri, torch, copy = (best_result(record, k) for k in ("variant", "triton", "torch", "copy"))
        t, tt, floor = result_time(ours), result_time(tri), floor_us(record)
        need = floor + 0.5 * (tt - floor)
        ratios.append((f"{m}×{d}", t / tt))
        rows.append(
            [
                f"{m} × {d}",
                f"{t:.2f}",
                _knobs(ours["config"], ("threads", "rows", "vec", "full_occupancy")),
                _census_text(record, ours["label"]),
                f"{tt:.2f} ({tri['config']['num_warps']}w)",
                f"{result_time(torch):.2f}",
                f"{result_time(copy):.2f}" if copy else "-",
                f"{floor:.2f}",
                f"{floor / t:.0%}",
                f"{t / tt:.2f}",
                f"{(t - floor) / (tt - floor):.2f} (≤{need:.2f})",
                "yes" if t < tt else "no",
                "yes" if t <= need else "no",
                _agreement("layernorm", [runs / "ln" / f"ln_m{m}_d{d}.json"], record),
            ]
        )
    return rows, ratios


LN_HEADERS = [
    "M × d",
    "ours µs",
    "knobs (regs, shfl, approx, cs)",
    "census",
    "Triton best µs",
    "torch µs",
    "same-bytes copy µs",
    "floor µs",
    "% floor",
    "ours/Triton",
    "distance ratio (need ≤0.5: µs)",
    "faster",
    "halved",
    "1st-run winner: 1st → 2nd run µs",
]


def mm_rows(runs: Path) -> tuple[list[list[str]], list[tuple[str, float]]]:
    rows, ratios = [], []
    keys = ("bm", "bn", "bk", "tm", "tn", "stages", "a_trans", "pipe", "k_unroll")
    for s in mm_sizes(runs):
        record = json.loads((runs / "rerun" / f"mm_{s}.json").read_text())
        ours, tri, cublas = (best_result(record, k) for k in ("variant", "triton", "torch"))
        t, tt, tc, floor = result_time(ours), result_time(tri), result_time(cublas), floor_us(record)
        first = [runs / "matmul" / f"mm_{s}.json", runs / "matmul_k_unroll" / f"mm_{s}.json"]
        bound = CUBLAS_BOUND.get(s)
        ratios.append((f"{s}³", t / tt))
        rows.append(
            [
                f"{s}³",
                f"{t:.1f}",
                _knobs({k: ours["config"].get(k, 0) for k in keys}, keys),
                _census_text(record, ours["label"]),
                f"{tc:.1f}",
                f"{tt:.1f}",
                f"{floor:.1f}",
                f"{floor / t:.0%} ({record['flops'] / t / 1e6:.1f} TFLOP/s)",
                f"{t / tc:.2f}" + (f" (≤{bound:.2f}: {'yes' if t / tc <= bound else 'no'})" if bound else ""),
                f"{t / tt:.2f} (≤{TRITON_BOUND}: {'yes' if t / tt <= TRITON_BOUND else 'no'})",
                _agreement("matmul", first, record),
            ]
        )
    return rows, ratios


MM_HEADERS = [
    "M=N=K",
    "ours µs",
    "knobs (a_vec/b_vec 4|16/16, pad 4, smem_vec 1)",
    "census",
    "cuBLAS µs",
    "Triton best µs",
    "FMA floor µs",
    "% floor",
    "ours/cuBLAS",
    "ours/Triton",
    "1st-run winner: 1st → 2nd run µs",
]

PROPERTIES = (  # (row, function of (kernel entry, census))
    ("grid × block", lambda k, c: f"{'×'.join(map(str, k['grid']))} × {k['block']}"),
    ("registers", lambda k, c: c["registers"]),
    ("shared memory (static + dynamic)", lambda k, c: (c["shared_bytes"] or 0) + c["dynamic_shared_bytes"]),
    ("spills (bytes stored)", lambda k, c: c["spill_store_bytes"]),
    ("global loads by bits (SASS)", lambda k, c: c["sass"]["global_loads"]),
    ("global stores by bits (SASS)", lambda k, c: c["sass"]["global_stores"]),
    ("shared loads by bits (SASS)", lambda k, c: c["sass"]["shared_loads"]),
    ("cp.async by bytes", lambda k, c: c["sass"]["cp_async"]),
    ("barriers", lambda k, c: c["sass"]["barriers"]),
    ("shuffles", lambda k, c: c["sass"]["shuffles"]),
    ("special-function ops", lambda k, c: c["sass"]["special"]),
    (
        "loads / bytes in flight per thread",
        lambda k, c: f"{c['sass']['loads_in_flight']} / {c['sass']['bytes_in_flight']}",
    ),
    ("occupancy (limiter)", lambda k, c: f"{c['occupancy']['fraction']:.0%} ({c['occupancy']['limiter']})"),
    ("SASS instructions", lambda k, c: c["sass"]["instructions"]),
)


def property_table(path: Path) -> tuple[list[str], list[list[str]]]:
    record = json.loads(path.read_text())
    kernels = record["kernels"]
    headers = ["property"] + [f"{k['role']}: {k['kernel']}" for k in kernels]
    rows = []
    for name, get in PROPERTIES:
        values = [str(get(k, k["census"])) for k in kernels]
        rows.append([name + (" ≠" if len(set(values)) > 1 else ""), *values])
    return headers, rows


def figure(ln: list[tuple[str, float]], mm: list[tuple[str, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 3.6))
    labels = [name for name, _ in ln + mm]
    values = [ratio for _, ratio in ln + mm]
    ax.bar(range(len(values)), values, color=["tab:blue"] * len(ln) + ["tab:orange"] * len(mm))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(TRITON_BOUND, color="tab:orange", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(values)), labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("ours / Triton best (cold)")
    ax.set_title("H200, second run: layer norm (blue), FP32 matmul (orange); dashed: the matmul target")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        default=str(Path(__file__).resolve().parent.parent / "records" / "h200-2026-11-29-shapes.tar.xz"),
        help="the campaign: its archive (or ARCHIVE:FOLDER), or a folder on disk",
    )
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--figure", type=Path, default=None, help="Also draw ours/Triton per shape to this PNG.")
    args = parser.parse_args()
    fmt = "github" if args.markdown else "simple"
    try:
        runs = local_one(args.runs)
    except RecordsError as error:
        raise SystemExit(f"shapes_table.py: {error}") from None
    ln, ln_ratios = ln_rows(runs)
    mm, mm_ratios = mm_rows(runs)
    print("Layer norm (FP32, cold; second run; floor = bytes / best 256 MB copy bandwidth of the same session)\n")
    print(tabulate(ln, headers=LN_HEADERS, tablefmt=fmt, disable_numparse=True))
    print("\nMatmul (FP32, cold; second run; floor = FLOPs / FMA rate measured in the same session)\n")
    print(tabulate(mm, headers=MM_HEADERS, tablefmt=fmt, disable_numparse=True))
    for name in ("compare_ln_4096x768.json", "compare_mm_2048.json"):
        headers, rows = property_table(runs / name)
        print(f"\nTriton's kernel against ours, property by property (offline census, {name})\n")
        print(tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True))
    if args.figure:
        figure(ln_ratios, mm_ratios, args.figure)
        print(f"\nwrote {args.figure}")


if __name__ == "__main__":
    main()
