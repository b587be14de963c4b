"""Tables of benchmarks/gpu/template_ceiling.sh's bench records: each matmul variant over cuBLAS FP32, each layer-norm
reduction over Triton's best num_warps with its share of Triton's distance to the same-bytes copy, all from the
same run as the variant (cold regime, medians).

    python analysis/template_ceiling.py runs/h200-2026-12-01-template-ceiling/ceiling [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tabulate import tabulate

from mage_tune.measure.saved import result_time

MATMUL_KNOBS = ("split_k", "a_trans", "a_vec", "pipe")


def fastest(results: list[dict], kind: str) -> float | None:
    times = [result_time(r) for r in results if r["kind"] == kind and r["ok"]]
    return min((t for t in times if t is not None), default=None)


def matmul_rows(record: dict) -> list[list]:
    results = record["results"]
    cublas = fastest(results, "torch")
    rows = []
    for r in results:
        if r["kind"] != "variant":
            continue
        t = result_time(r) if r["ok"] else None
        knobs = ", ".join(f"{k}={r['config'][k]}" for k in MATMUL_KNOBS)
        rows.append([knobs, f"{t:.1f}" if t else r.get("error", "failed"), f"{t / cublas:.3f}" if t else "-"])
    return rows


def layernorm_rows(record: dict) -> list[list]:
    results = record["results"]
    triton, copy = fastest(results, "triton"), fastest(results, "copy")
    rows = []
    for r in results:
        if r["kind"] != "variant":
            continue
        t = result_time(r) if r["ok"] else None
        gap = (t - copy) / (triton - copy) if t and triton > copy else None
        rows.append(
            [
                r["config"]["reduce"],
                f"{t:.2f}" if t else r.get("error", "failed"),
                f"{t / triton:.3f}" if t else "-",
                f"{gap:.2f}" if gap is not None else "-",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--markdown", type=Path, default=None, help="Also write the tables here.")
    args = parser.parse_args()
    out = []
    for path in sorted(args.folder.glob("*.json")):
        if path.name.endswith((".configs.json", ".winner.json")) or path.name.startswith("ncu-"):
            continue
        record = json.loads(path.read_text())
        shape = ",".join(f"{k}={v}" for k, v in record["shape"].items())
        if record["family"] == "matmul":
            cublas = fastest(record["results"], "torch")
            out.append(f"### matmul {shape} (cuBLAS FP32 {cublas:.1f} µs)\n")
            out.append(tabulate(matmul_rows(record), ["variant", "µs", "/cuBLAS"], tablefmt="github"))
        else:
            triton, copy = fastest(record["results"], "triton"), fastest(record["results"], "copy")
            out.append(f"### layernorm {shape} (Triton best {triton:.2f} µs, copy {copy:.2f} µs)\n")
            headers = ["reduce", "µs", "/Triton", "(ours-copy)/(Triton-copy)"]
            out.append(tabulate(layernorm_rows(record), headers, tablefmt="github"))
        out.append("")
    text = "\n".join(out)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
