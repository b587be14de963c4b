"""Re-time search winners with a harness that shares no timing code with mage-tune's.

For each search run directory, its best `--top` distinct measured configs (from trials.jsonl, read through the
records' reader; 1: the winner), or for each bench record (`mage-tune bench --out`), its `--top` fastest variants:
each is rebuilt by its family and its cubin's sha256 compared with the one the search or bench recorded: where they
differ (the template changed since), the row says so and the exit status is 1. A config
is launched by a plain cupy launch on torch's stream, or, for a family that launches its own variants (tensor maps,
clusters: matmul-bf16, the wgmma 3xTF32 family), by that launcher; it is checked against the family's float64
reference of the inputs as the device holds them (BF16-rounded where the family reads BF16), and timed as single
launches between CUDA events, each after a read of 256 MiB (four times the L2) that evicts the inputs and leaves
only clean lines behind; the torch baseline (cuBLAS in the family's precision, or torch's layer norm) is timed the
same way, in turns, in the same process. mage-tune's own harness times CUDA-graph replays over rotating buffer sets,
so a launch's fixed cost (about a microsecond) weighs on kernels of a few microseconds here and not there; for longer
kernels the two ratios (ours / torch) should agree.

usage: python benchmarks/gpu/retime_independent.py RUN_DIR_OR_BENCH_JSON... [--top 1] [--rounds 3] [--family FILE.py]
       [--json OUT.json]
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
from mage_tune.errors import MageError
from mage_tune.kernels.base import accuracy_baseline
from mage_tune.kernels.recorded import family_for
from mage_tune.measure import variant_job
from mage_tune.measure.device import environment
from mage_tune.measure.streams import torch_stream
from mage_tune.outputs import refuse_existing
from mage_tune.search import record, sources

FLUSH_BYTES = 256 * 2**20
WARMUP = 10
REPS = 200
HARNESS = "single launches between CUDA events, each after a 256 MiB read (L2 evicted, left clean)"
MEASURED = "measured"  # the outcome of a timed trial; a static run's winners (modelled) have no time to compare


def _torch_baseline(family, bufs: dict, shape: dict):
    """The family's own torch baseline (cuBLAS for matmul, F.layer_norm for layer norm) on these buffers, or None."""
    torch_baselines = [b for b in family.baseline_kernels(shape) if b.kind == "torch"]
    if not torch_baselines:
        return None
    launch = family.launcher(torch_baselines[0], shape)
    return lambda: launch(bufs)


def _triton_baseline(family, bufs: dict, shape: dict, recorded: dict[str, float]):
    """(label, launch) of the family's Triton baseline that ran fastest in the run (`recorded`: label -> µs, its own
    times), or None where the run timed none: the label picks one of the family's own baselines, whose launcher runs
    it (a record never says what code runs)."""
    triton = {b.label: b for b in family.baseline_kernels(shape) if b.kind == "triton"}
    timed = [(us, label) for label, us in recorded.items() if label in triton and us and us > 0]
    if not timed:
        return None
    label = min(timed)[1]
    launch = family.launcher(triton[label], shape)
    return label, lambda: launch(bufs)


def l2_evictor():
    """A callable that reads FLUSH_BYTES on the GPU (four times the L2), leaving only clean lines of other data."""
    import torch

    flush = torch.empty(FLUSH_BYTES // 4, device="cuda")
    total = torch.empty((), device="cuda")
    return lambda: torch.sum(flush, 0, out=total)


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


def _time_warm(fn, evict, reps: int) -> float:
    """As _time_cold without the evicting read: the inputs as the previous launch left them in the L2."""
    return _time_cold(fn, lambda: None, reps)


def _time_graph(fn, evict, reps: int) -> float:
    """As _time_cold, fn launched as a one-launch CUDA graph: the graph's launch path instead of the stream's."""
    import torch

    fn()  # a first launch outside the capture: what it loads and allocates, it does now
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return _time_cold(graph.replay, evict, reps)


def _time_batch(fn, evict, reps: int) -> float:
    """Per launch, BATCH launches back to back between two events after one evicting read: each launch's fixed cost
    (its start and drain) is paid as in a stream of launches; all but the first find the inputs in the L2 where they
    fit."""
    return _time_cold(lambda: [fn() for _ in range(BATCH)], evict, max(1, reps // BATCH)) / BATCH


BATCH = 10
REGIMES = {"cold": _time_cold, "warm": _time_warm, "graph": _time_graph, "batch": _time_batch}


def _search_times(run: Path) -> dict[str, tuple[str, float]]:
    """The search's own medians of its baselines, from baselines.jsonl (its first session's each): label -> (kind,
    µs)."""
    found: dict[str, tuple[str, float]] = {}
    for line in record.baselines(run):
        result = line.get("result", {})
        if result.get("ok") and result.get("timings") and result.get("label") not in found:
            found[result["label"]] = (result.get("kind", ""), result["timings"][0]["median_us"])
    return found


def winners(run: Path, top: int) -> list[dict]:
    """The run's `top` fastest distinct configs, best first: each one's fastest trial (measured, else modelled)."""
    scored = [t for t in record.trials(run) if t["outcome"] in (MEASURED, "modelled")]
    out: list[dict] = []
    for t in sorted(scored, key=lambda t: (t["outcome"] != MEASURED, t["value"])):
        if all(t["config"] != o["config"] for o in out):
            out.append(t)
    return out[:top]


def _what_to_retime(run: Path, top: int, named: str | None):
    """(family, shape, arch, the `top` configs to re-time as trials, the run's own torch median or None, its
    baselines' medians by label) of a search run directory or a bench record (read by the tuning database's reader
    of it)."""
    if run.is_dir():
        meta = record.read_identity(run / "run.json")
        if meta is None:
            raise MageError(f"{run}: no run.json (not a search run directory)")
        times = _search_times(run)
        best = winners(run, top)
        theirs = next((us for kind, us in times.values() if kind == "torch"), None)
        baselines = {label: us for label, (_, us) in times.items()}
    else:
        info, rows = sources.bench_record(run)
        meta = {"family": info.family, "origin": info.origin, "shape": info.shape, "arch": info.arch}
        best = []
        for row in sorted((r for r in rows if r["outcome"] == MEASURED), key=lambda r: r["value"]):
            if all(row["config"] != o["config"] for o in best):
                best.append(row)
        best, theirs, baselines = best[:top], None, dict(info.baselines)
    family, why = family_for(meta, named)
    if family is None:
        raise MageError(f"{run}: {why}")
    if not run.is_dir():
        label = next((b.label for b in family.baseline_kernels(meta["shape"]) if b.kind == "torch"), None)
        theirs = info.baselines.get(label)
    if not best:
        what = "measured or modelled trial" if run.is_dir() else "measured variant"  # a bench's: measured or failed
        raise MageError(f"{run}: no {what} to re-time")
    return family, meta, best, theirs, baselines


def _device_dtype(family, name: str):
    import torch

    return getattr(torch, family.device_dtype(name))


def _cupy_launch(variant, bufs: dict, family, shape: dict):
    """The variant's cubin loaded by cupy and launched with the pointers in its parameter order, on torch's stream."""
    import cupy

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
    return lambda: kernel(launch.grid, launch.block, args, shared_mem=launch.dynamic_shared, stream=stream)


def retime(run: Path, rounds: int, top: int = 1, named: str | None = None, regimes: tuple[str, ...] = ()) -> list[dict]:
    """One row per winner of `run` (its `top` best distinct configs; a bench record's fastest variants), each timed
    in turns with torch's baseline and the Triton config that was fastest in the run, where it timed Triton.
    `named`: the family file the run was made with, where it is not a built-in family (records never load code).
    `regimes`: other ways of timing ours and torch's (REGIMES: warm, graph, batch; Triton's only cold), in the row's
    "regimes", to tell which part of a launch makes a ratio differ from the search's. A winner is ok where its error
    is within the family's tolerance and, where the family names torch's baseline as its accuracy bar at the shape,
    no worse than torch's on the same inputs."""
    family, meta, best, search_torch, search_baselines = _what_to_retime(run, top, named)
    shape, arch = meta["shape"], get_arch(meta["arch"])  # the record keeps the name
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False

    made = family.make_inputs(shape, np.random.default_rng(1))
    bufs = {k: torch.from_numpy(v).cuda().to(_device_dtype(family, k)) for k, v in made.items()}
    bufs["__out__"] = torch.full(family.output_shape(shape), float("nan"), device="cuda").to(
        _device_dtype(family, "__out__")
    )
    held = {k: v.double().cpu().numpy() for k, v in bufs.items() if k != "__out__"}  # as the device rounded them
    expected = family.reference(held, shape)
    tolerance = family.tolerance_for(shape)
    baseline = _torch_baseline(family, bufs, shape)

    def error_of(launch) -> float:
        """Relative L2 error of what `launch` writes into C (NaN first: a value not written is NaN)."""
        bufs["__out__"].fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        got = bufs["__out__"].double().cpu().numpy()
        return float(np.linalg.norm(got - expected) / np.linalg.norm(expected))

    # the family's accuracy bar, where it names torch's baseline at this shape: its error on these same inputs
    held_to = accuracy_baseline(family, shape)
    bar = error_of(baseline) if baseline and held_to is not None and held_to.kind == "torch" else None
    if bar is not None and not bar <= tolerance:  # torch failing its own check holds nothing, as in the harness
        bar = None
    limit = min(tolerance, bar) if bar is not None else tolerance
    triton_label, triton = _triton_baseline(family, bufs, shape, search_baselines) or (None, None)
    evict = l2_evictor()
    rows = []
    for rank, trial in enumerate(best, 1):
        config = family.with_defaults(trial["config"])  # a run recorded before a knob existed ran its default
        variant = family.build(config, shape, arch)
        sha = variant.artifact.cubin_sha256
        own = family.launcher(variant_job(variant), shape)  # a family that launches its own variants (tensor maps)
        ours = (lambda own=own: own(bufs)) if own is not None else _cupy_launch(variant, bufs, family, shape)
        rel_err = error_of(ours)
        ours_us, torch_us, triton_us = [], [], []
        for _ in range(rounds):  # in turns, so drift between them is shared
            ours_us.append(_time_cold(ours, evict, REPS))
            if baseline:
                torch_us.append(_time_cold(baseline, evict, REPS))
            if triton:
                triton_us.append(_time_cold(triton, evict, REPS))
        other = {}
        for regime in regimes:  # after the cold rounds, which the row's ratio keeps
            timer = REGIMES[regime]
            other[regime] = {"ours_us": statistics.median(timer(ours, evict, REPS) for _ in range(rounds))}
            if baseline:
                other[regime]["torch_us"] = statistics.median(timer(baseline, evict, REPS) for _ in range(rounds))
        ours_med = statistics.median(ours_us)
        torch_med = statistics.median(torch_us) if torch_us else None
        triton_med = statistics.median(triton_us) if triton_us else None
        search_triton = search_baselines.get(triton_label) if triton_label else None
        measured = trial["outcome"] == MEASURED
        row = {
            "run": str(run),
            "family": meta["family"],
            "shape": shape,
            "rank": rank,
            "trial": trial["number"],
            "config": config,
            "cubin_sha256": sha,
            # False where the template changed since (flagged); None where the record kept no sha256 (unknown)
            "same_binary": sha == trial["cubin_sha256"] if trial.get("cubin_sha256") else None,
            "rel_err": rel_err,
            "tolerance": tolerance,
            "bar_rel_err": bar,  # torch's error on the same inputs, where the family holds variants to it
            "ok": bool(rel_err <= limit),
            "ours_us": ours_med,
            "torch_us": torch_med,
            "ours_over_torch": ours_med / torch_med if torch_med else None,
            "rounds_ours_us": ours_us,
            "rounds_torch_us": torch_us,
            "triton_label": triton_label,
            "triton_us": triton_med,
            "ours_over_triton": ours_med / triton_med if triton_med else None,
            "rounds_triton_us": triton_us,
            "search_ours_over_triton": trial["value"] / search_triton if measured and search_triton else None,
            "search_outcome": trial["outcome"],
            "search_ours_us": trial["value"] if measured else None,
            "search_torch_us": search_torch,
            "regimes": other,
        }
        row["search_ours_over_torch"] = row["search_ours_us"] / search_torch if measured and search_torch else None
        if row["ours_over_torch"] and row["search_ours_over_torch"]:
            row["ratio_change"] = row["ours_over_torch"] / row["search_ours_over_torch"] - 1
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="search run directories or bench records (JSON)")
    parser.add_argument("--top", type=int, default=1, help="re-time each run's best N distinct configs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--family", help="the family file the runs were made with, where it is not a built-in one")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--regimes",
        default="",
        help=f"also time both in these regimes, comma-separated ({', '.join(r for r in REGIMES if r != 'cold')})",
    )
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = parser.parse_args(argv)
    refuse_existing("retime_independent.py", args.json, force=args.force)
    regimes = tuple(r for r in args.regimes.split(",") if r)
    unknown = [r for r in regimes if r not in REGIMES or r == "cold"]
    if unknown:
        known = ", ".join(r for r in REGIMES if r != "cold")
        print(f"retime_independent: --regimes: {', '.join(unknown)} not among {known}", file=sys.stderr)
        return 2
    rows, skipped = [], []
    for run in args.runs:
        try:
            found = retime(run, args.rounds, args.top, args.family, regimes)
        except MageError as exc:  # one run that cannot be re-timed does not cost the others theirs
            print(f"retime_independent: {exc}", file=sys.stderr)
            skipped.append({"run": str(run), "why": str(exc)})
            continue
        for row in found:
            rows.append(row)
            change = row.get("ratio_change")
            nan = float("nan")
            bar = f", torch's {row['bar_rel_err']:.2e}" if row["bar_rel_err"] is not None else ""
            print(
                f"{row['family']} {row['shape']} #{row['rank']}: ok={row['ok']} (err {row['rel_err']:.2e}{bar}) ours "
                f"{row['ours_us']:.2f} µs, torch {row['torch_us'] or nan:.2f} µs, ratio "
                f"{row['ours_over_torch'] or nan:.3f} (search {row['search_ours_over_torch'] or nan:.3f}"
                + (f", {change:+.1%})" if change is not None else ")")
                + {True: "", None: "; the record kept no cubin sha256 to compare"}.get(
                    row["same_binary"], "; NOT the binary the record timed: the template changed since"
                ),
                flush=True,
            )
            if row["triton_us"]:
                print(
                    f"    {row['triton_label']}: {row['triton_us']:.2f} µs, ours / triton {row['ours_over_triton']:.3f}"
                    f" (search {row['search_ours_over_triton'] or nan:.3f})",
                    flush=True,
                )
            for regime, times in row["regimes"].items():
                theirs = times.get("torch_us")
                ratio = f", ratio {times['ours_us'] / theirs:.3f}" if theirs else ""
                print(f"    {regime}: ours {times['ours_us']:.2f} µs, torch {theirs or nan:.2f} µs{ratio}", flush=True)
    if args.json:
        record = {"environment": environment(), "harness": HARNESS, "winners": rows, "skipped": skipped}
        args.json.write_text(json.dumps(record, indent=1))
    if skipped:
        return 2
    return 0 if all(r["ok"] and r["same_binary"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
