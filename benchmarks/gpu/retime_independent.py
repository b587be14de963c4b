"""Re-time search winners with a harness that shares no timing code with mage-tune's.

For each search run directory: the winner's config (best/best.json) is rebuilt by its family, and its cubin's sha256
is compared with the one the search recorded: where they differ (the template changed since), the row says so and
the exit status is 1. The winner is launched by a plain cupy launch on torch's stream, checked against the family's
float64 reference, and timed as single launches between CUDA events, each after a read of 256 MiB (four times the
L2) that evicts the inputs and leaves only clean lines behind; the torch baseline (cuBLAS FP32 with TF32 off, or
torch's layer norm) is timed the same way, in turns, in the same process. mage-tune's own harness times CUDA-graph
replays over rotating buffer sets, so a launch's fixed cost (about a microsecond) weighs on kernels of a few
microseconds here and not there; for longer kernels the two ratios (ours / torch) should agree.

usage: python benchmarks/gpu/retime_independent.py RUN_DIR... [--rounds 3] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from mage_tune.arch import get_arch
from mage_tune.kernels.registry import load_family
from mage_tune.measure.device import environment
from mage_tune.measure.streams import torch_stream

FLUSH_BYTES = 256 * 2**20
WARMUP = 10
REPS = 200
HARNESS = "single launches between CUDA events, each after a 256 MiB read (L2 evicted, left clean)"


def _torch_baseline(family, bufs: dict, shape: dict):
    """The family's own torch baseline (cuBLAS for matmul, F.layer_norm for layer norm) on these buffers, or None."""
    torch_baselines = [b for b in family.baseline_kernels(shape) if b.kind == "torch"]
    if not torch_baselines:
        return None
    launch = family.launcher(torch_baselines[0], shape)
    return lambda: launch(bufs)


def _time_cold(fn, evict, reps: int) -> float:
    """Median µs of `reps` single launches of fn, each between two events, each after `evict` read the L2 clean."""
    import torch

    for _ in range(WARMUP):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        evict()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True))


def _search_time(run: Path, key: str) -> float | None:
    """The search's own median for the torch baseline, from baselines.jsonl (its first session's)."""
    for line in (run / "baselines.jsonl").read_text().splitlines():
        result = json.loads(line).get("result", {})
        if result.get("kind") == key and result.get("ok"):
            return result["timings"][0]["median_us"]
    return None


def retime(run: Path, rounds: int) -> dict:
    import cupy
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    meta = json.loads((run / "run.json").read_text())
    best = json.loads((run / "best" / "best.json").read_text())
    family = load_family(meta["family"])
    shape, arch = meta["shape"], get_arch(meta["arch"])  # the record keeps the name
    config = family.with_defaults(best["config"])  # a run recorded before a knob existed ran its default
    variant = family.build(config, shape, arch)
    sha = variant.artifact.cubin_sha256
    same_binary = sha == best["cubin_sha256"]  # False where the template changed since the search: timed, flagged

    made = family.make_inputs(shape, np.random.default_rng(1))
    bufs = {k: torch.from_numpy(v).cuda() for k, v in made.items()}
    bufs["__out__"] = torch.full(family.output_shape(shape), float("nan"), device="cuda")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(variant.artifact.cubin)
        f.flush()
        kernel = cupy.RawModule(path=f.name).get_function(variant.kernel_name)
    launch = variant.launch
    if launch.dynamic_shared:  # the opt-in, as mage-tune's harness asks for it
        kernel.max_dynamic_shared_size_bytes = launch.dynamic_shared
    args = [bufs.get(name, bufs["__out__"]).data_ptr() for name in variant.param_names]  # the one not made: out
    args = tuple(np.uint64(p) for p in args) + family.packed_scalars(shape)
    stream = torch_stream()

    def ours():
        kernel(launch.grid, launch.block, args, shared_mem=launch.dynamic_shared, stream=stream)

    ours()
    torch.cuda.synchronize()
    expected = family.reference(made, shape)
    got = bufs["__out__"].double().cpu().numpy()
    rel_err = float(np.linalg.norm(got - expected) / np.linalg.norm(expected))  # NaN where a value was not written
    tolerance = family.tolerance_for(shape)
    baseline = _torch_baseline(family, bufs, shape)
    ours_us, torch_us = [], []
    flush = torch.empty(FLUSH_BYTES // 4, device="cuda")
    total = torch.empty((), device="cuda")

    def evict():
        torch.sum(flush, 0, out=total)

    for _ in range(rounds):  # in turns, so drift between the two is shared
        ours_us.append(_time_cold(ours, evict, REPS))
        if baseline:
            torch_us.append(_time_cold(baseline, evict, REPS))
    ours_med = statistics.median(ours_us)
    torch_med = statistics.median(torch_us) if torch_us else None
    search_torch = _search_time(run, "torch")
    out = {
        "run": str(run),
        "family": meta["family"],
        "shape": shape,
        "config": config,
        "cubin_sha256": sha,
        "same_binary": same_binary,
        "rel_err": rel_err,
        "tolerance": tolerance,
        "ok": bool(rel_err <= tolerance),
        "ours_us": ours_med,
        "torch_us": torch_med,
        "ours_over_torch": ours_med / torch_med if torch_med else None,
        "rounds_ours_us": ours_us,
        "rounds_torch_us": torch_us,
        "search_ours_us": best["value"],
        "search_torch_us": search_torch,
        "search_ours_over_torch": best["value"] / search_torch if search_torch else None,
    }
    if out["ours_over_torch"] and out["search_ours_over_torch"]:
        out["ratio_change"] = out["ours_over_torch"] / out["search_ours_over_torch"] - 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for run in args.runs:
        row = retime(run, args.rounds)
        rows.append(row)
        change = row.get("ratio_change")
        print(
            f"{row['family']} {row['shape']}: ok={row['ok']} (err {row['rel_err']:.2e}) ours {row['ours_us']:.2f} µs, "
            f"torch {row['torch_us'] or float('nan'):.2f} µs, ratio {row['ours_over_torch'] or float('nan'):.3f} "
            f"(search {row['search_ours_over_torch'] or float('nan'):.3f}"
            + (f", {change:+.1%})" if change is not None else ")")
            + ("" if row["same_binary"] else "; NOT the binary the search timed: the template changed since"),
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"environment": environment(), "harness": HARNESS, "winners": rows}, indent=1))
    return 0 if all(r["ok"] and r["same_binary"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
