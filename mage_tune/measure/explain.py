"""`mage-tune explain RECORD.json`: what a bench record's winner is, what it is measured against, and what its census
(and, given one, an Nsight Compute record) shows holding it back — from the committed records alone."""

from __future__ import annotations

import math

from mage_tune.arch import ARCHS, SM_COUNT_UNKNOWN_PART, Arch, nominal_bandwidth_gbs, peak_tflops
from mage_tune.census.features import diff, features_json, fmt, spearman
from mage_tune.census.model import census_from_json
from mage_tune.census.table import hopper_profile
from mage_tune.errors import InputError
from mage_tune.kernels import recorded
from mage_tune.kernels.base import output_tiles, shape_words, tile_area_inside
from mage_tune.measure.counters import pick
from mage_tune.measure.saved import best_result, floor_us, is_grid, result_time, timed_results
from mage_tune.textwidth import short_config, table


def explain_bench(record: dict, counters: dict | None = None, regime: str = "cold", family: str | None = None) -> str:
    """`family`: a family spec the user named, whose code may be loaded for this record (records never load one)."""
    session = record["sessions"][0]
    variants = timed_results(record, "variant", regime)
    if not variants:
        return "no passing, timed variant in this record"
    best = variants[0]
    t = result_time(best, regime)
    floor = floor_us(record)
    if record["flops"]:
        floor_text = f"(FLOPs at the measured FMA rate, {session['fp32_tflops']:.1f} TFLOP/s)"
        pipe = bound_fractions(record, best, t, family).get("pipe")
        # a tensor-core winner: its floor is the tensor pipe's peak over the products it makes per FLOP, not the FP32
        # FMA rate (TF32 only where that count is known: a 3xTF32 split makes three, a plain TF32 matmul one)
        known = pipe and (pipe["dtype"] in ("BF16", "FP16") or pipe["products_known"])
        if known and pipe["name"] == "tensor pipe" and pipe["peak_tflops"]:
            floor = record["flops"] * pipe["products"] / (pipe["peak_tflops"] * 1e12) * 1e6
            per = f" × {pipe['products']} products" if pipe["products"] > 1 else ""
            floor_text = f"(FLOPs{per} at the {pipe['dtype']} dense tensor peak, {pipe['peak_tflops']:.0f} TFLOP/s)"
    else:
        floor_text = f"(bytes over the best copy bandwidth, {session['copy_gbs'] / 1e3:.2f} TB/s)"
    env = record["environment"]
    lines = [
        f"{record['family']} {shape_words(record['shape'])} on {env.get('gpu', '?')} ({regime}, session 0 of this "
        "record)",
        f"winner: {best['label']} at {t:.2f} µs; floor {floor:.2f} µs {floor_text}: {floor / t:.0%} of the floor",
    ]
    for kind, name in (
        ("triton", "Triton at its best config"),
        ("torch", "torch"),
        ("copy", "the same-bytes copy"),
        ("shipped", "the config its authors ship"),
        ("context", "a context-only baseline (not held to the accuracy bound)"),
    ):
        other = best_result(record, kind, regime)
        if other:
            o = result_time(other, regime)
            gap = (t - floor) / (o - floor) if o > floor else math.nan
            lines.append(
                f"  vs {name}: {other['label']} {o:.2f} µs; ours/{kind} {t / o:.3f}; "
                f"our distance to the floor is {gap:.2f} of its"
            )
    lines.append(bound_line(record, best, t, family))
    lines += _held_back(record, best, family)
    lines += _hopper_profile(record, best)
    lines += _runner_ups(record, variants, regime)
    lines += _tracking(record, variants, regime)
    if counters:
        lines += _counter_lines(counters)
    return "\n".join(lines)


def _held_back(record: dict, best: dict, named: str | None = None) -> list[str]:
    """The census's account of the winner: occupancy and its limiter, bytes in flight, waves of blocks."""
    census = record["census"].get(best["label"])
    if not census or not census.get("occupancy"):
        return []
    occ, sass = census["occupancy"], census.get("sass") or {}
    sms = record["environment"].get("sm_count", SM_COUNT_UNKNOWN_PART)
    grid = _grid(record, best, named)
    lines = [
        f"census of the winner: {census['registers']} registers, {occ['blocks_per_sm']} block(s) of {occ['block']} "
        f"threads per SM ({occ['fraction']:.0%} occupancy, limited by {occ['limiter']}), "
        f"{sass.get('loads_in_flight', '?')} loads / {sass.get('bytes_in_flight', '?')} bytes in flight per thread "
        f"= {sass.get('bytes_in_flight', 0) * occ['block'] * occ['blocks_per_sm'] / 1024:.0f} KiB per SM"
        + (f", and {sass['cp_async_groups_in_flight']} cp.async groups in flight" if sass.get("cp_async") else "")
    ]
    bulk = sass.get("bulk") or {}
    bulk_loads = bulk.get("load", 0) + bulk.get("multicast", 0)
    if bulk_loads:
        lines.append(_bulk_line(record, best, named, bulk_loads, occ["blocks_per_sm"]))
    if grid and occ["blocks_per_sm"]:
        blocks = grid[0] * grid[1] * grid[2]
        cluster = cluster_size(census)
        slots, counted = resident_slots(best, occ, sms)
        most = sms * occ["blocks_per_sm"]
        # the driver's count, and the SMs' slots it leaves empty (a GPC whose SMs the cluster size does not divide)
        driver = "the driver's count" + (f"; {most - slots} of the SMs' {most} slots hold none" if slots < most else "")
        if blocks <= slots:  # one wave: what matters is how evenly the blocks spread over the SMs
            busiest = math.ceil(blocks / sms)
            if cluster == 1:
                resident = f"all resident at once ({slots} slots)"
            elif counted:
                resident = f"in clusters of {cluster}, {slots} resident at once ({driver})"
            else:
                resident = f"in clusters of {cluster}, at most {slots} resident at once"
            lines.append(
                f"  blocks: {blocks} on {sms} SMs, {resident}: {blocks / sms:.2f} an SM on average, {busiest} on the "
                f"busiest, so the SMs are {blocks / (sms * busiest):.0%} evenly loaded"
            )
        else:
            waves = math.ceil(blocks / slots)
            counts = f"{sms} SMs × {occ['blocks_per_sm']} = {slots} slots"
            over = f"{slots} resident blocks ({driver})" if counted else counts
            lines.append(
                f"  waves: {blocks} blocks over {over}: "
                f"{blocks / slots:.2f} waves, the last {blocks / slots - waves + 1:.0%} full (wave quantization "
                f"costs up to {1 - blocks / (waves * slots):.0%} of the SMs' time)"
            )
        if cluster > 1 and not counted:
            lines.append(
                f"  clusters of {cluster}: a cluster's blocks share one GPC, so a GPC whose SM count is not a multiple "
                f"of {cluster} leaves SMs out; the clusters resident at once are the driver's count "
                "(cuOccupancyMaxActiveClusters, which a persistent launcher fits its grid to), not in the record: the "
                "slots here are the most the SMs allow, so the waves the fewest"
            )
    return lines


def _hopper_profile(record: dict, best: dict) -> list[str]:
    """The winner's Hopper profile (TMA and bulk copies, wgmma by shape, mbarriers, setmaxnreg, cluster) from the
    census the record keeps of it, read back through its schema; a damaged one is said, not shown."""
    kept = record["census"].get(best["label"])
    if kept is None:
        return []
    try:
        census = census_from_json(kept, f"the record's census of {best['label']}")
    except InputError as exc:
        return [f"Hopper profile of the winner: not shown ({exc})"]
    return hopper_profile(census, "the winner")


def _bulk_line(record: dict, best: dict, named: str | None, copies: int, blocks_per_sm: int) -> str:
    """The winner's bulk tensor (TMA) loads, which the per-thread count above leaves out: a copy's size is its tensor
    map's box, set on the host, so the bytes come from the family's code (a built-in one or one the user named)."""
    head = f"  bulk tensor (TMA) loads: {copies} in the code, "
    family, _ = recorded.family_for(record, named)
    if family is None or "source" in best["config"]:
        return head + "their bytes set by tensor maps on the host, not in the binary"
    ring = family.bulk_bytes_in_flight(family.with_defaults(best["config"]))
    if not ring:
        return head + f"whose bytes {family.name} does not say"
    return head + (
        f"up to {ring / 1024:.0f} KiB a block in flight by the family's count (every stage of its ring filling) = "
        f"{ring * blocks_per_sm / 1024:.0f} KiB per SM"
    )


def resident_slots(best: dict, occupancy: dict, sms: int) -> tuple[int, bool]:
    """The blocks resident at once: the driver's count where the measurement kept it (a kernel in clusters, whose
    blocks share a GPC), with True; else the SMs times the census's blocks per SM, the most the SMs allow, with
    False."""
    counted = best.get("resident_blocks")
    if isinstance(counted, int) and not isinstance(counted, bool) and counted > 0:
        return counted, True
    return sms * occupancy["blocks_per_sm"], False


def cluster_size(census: dict) -> int:
    """Blocks in each of the variant's thread block clusters, from its census (1 without clusters)."""
    cluster = census.get("cluster")
    dims = cluster.get("dims") if isinstance(cluster, dict) else None
    if not isinstance(dims, list):
        return 1
    return math.prod(d for d in dims if isinstance(d, int) and not isinstance(d, bool) and d > 0)


PIPE_BOUND = 0.6  # a pipe or memory at this fraction of its peak or more bounds the kernel
TAIL_BOUND = 0.2  # otherwise a last wave that leaves this share of the SMs' time idle or more bounds it
EDGE_SHOWN = 0.005  # the share of the tiles' area past a ragged output's edges that the bound line names


def compute_dtype(census: dict) -> str | None:
    """The input type of a variant's math from its census: the tensor-core input type its matrix ops name ("BF16",
    "FP16", "TF32", "FP8"), "FP32" for a kernel without matrix ops, None where the census cannot say."""
    if not census:
        return None
    views = [census.get(name) or {} for name in ("ptx", "sass")]
    shapes = " ".join(key for view in views for key in (view.get("matrix_shapes") or {})).lower()
    for token, dtype in (("bf16", "BF16"), ("tf32", "TF32"), ("e4m3", "FP8"), ("e5m2", "FP8"), ("f16", "FP16")):
        if token in shapes:
            return dtype
    return None if any(view.get("matrix") for view in views) else "FP32"


def bound_fractions(record: dict, best: dict, t: float, named: str | None = None) -> dict:
    """What bounds the winner, with the numbers: `pipe` (the FLOPs' rate against the arch's peak for the variant's
    dtype; only where the family counts FLOPs), `memory` (bytes moved against the session's copy bandwidth, else the
    part's nominal one), `tail` (wave quantisation of tiles or blocks over the resident blocks) and `bound`."""
    census = record["census"].get(best["label"]) or {}
    arch = record_arch(record)
    out: dict = {}
    if record["flops"]:
        dtype = compute_dtype(census)
        tensor = dtype not in (None, "FP32")
        peak = peak_tflops(arch, dtype) if dtype and arch is not None else None  # None: an arch without facts
        rate = record["flops"] / t / 1e6  # TFLOP/s
        products, known = mma_passes(record, named) if tensor else (1, True)
        out["pipe"] = {
            "name": "tensor pipe" if tensor else "FMA pipe" if dtype else "math pipe",
            "dtype": dtype,
            "tflops": rate,
            "products": products,  # tensor-core products per FLOP (3xTF32: 3): the pipe does rate × products
            "products_known": known,
            "peak_tflops": peak,
            "fraction": rate * products / peak if peak else None,
        }
    session = record["sessions"][best.get("session", 0)]
    gbs, source = session.get("copy_gbs"), "copy"
    if not gbs:
        gbs, source = nominal_bandwidth_gbs(record["environment"].get("gpu")), "nominal"
    moved = record["bytes_moved"] / t / 1e3  # GB/s
    out["memory"] = {"gbs": moved, "peak_gbs": gbs, "source": source, "fraction": moved / gbs if gbs else None}
    out["tail"] = _tail(record, best, census, named)
    pipe = (out.get("pipe") or {}).get("fraction")
    limits = {(out["pipe"]["name"] if pipe is not None else "pipe"): pipe, "memory": out["memory"]["fraction"]}
    name, fraction = max(((k, v) for k, v in limits.items() if v is not None), key=lambda kv: kv[1], default=("", 0))
    if fraction >= PIPE_BOUND:
        out["bound"] = name
    elif out["tail"] and out["tail"]["idle"] >= TAIL_BOUND:
        out["bound"] = "tail"
    else:
        out["bound"] = "latency"
    return out


def mma_passes(record: dict, named: str | None = None) -> tuple[int, bool]:
    """(tensor-core products per FLOP of the record's variants, whether that is known): the record's own
    `mma_passes` (bench records write it), else the family's where its code may serve the record (a built-in or
    one named), else (1, False)."""
    passes = record.get("mma_passes")
    if isinstance(passes, int) and not isinstance(passes, bool) and passes >= 1:
        return passes, True
    family, _ = recorded.family_for(record, named)
    return (int(family.mma_passes), True) if family is not None else (1, False)


def _tail(record: dict, best: dict, census: dict, named: str | None) -> dict | None:
    """Waves of work: the family's work units where it counts them (work_units: tiles, or with stream-K the k-tiles
    the blocks share), else its tiles (a persistent grid walks them; without the family's code, ⌈m/bm⌉·⌈n/bn⌉ from
    bm / bn knobs, n and m with transposed=1), else the grid's blocks, over the blocks resident at once (the grid's
    blocks, at most SMs × blocks per SM from the census occupancy)."""
    occ = census.get("occupancy") or {}
    grid = _grid(record, best, named)
    if not grid or not occ.get("blocks_per_sm"):
        return None
    sms = record["environment"].get("sm_count", SM_COUNT_UNKNOWN_PART)
    blocks = grid[0] * grid[1] * grid[2]
    slots, counted = resident_slots(best, occ, sms)
    workers = min(blocks, slots)
    units, what = blocks, "blocks"
    family, _ = recorded.family_for(record, named)
    config, shape = best["config"], record["shape"]
    if family is not None and hasattr(family, "work_units") and "source" not in config:
        units, what = family.work_units(family.with_defaults(config), shape)  # e.g. k-tiles, where they are shared
    elif family is not None and hasattr(family, "tiles") and "source" not in config:
        units, what = family.tiles(family.with_defaults(config), shape), "tiles"
    elif output_tiles(config, shape) is not None:
        # a matmul's output tiles, read from the knobs where no family code says (a record never loads it)
        units, what = output_tiles(config, shape), "tiles"
    waves = math.ceil(units / workers)
    knobs = family.with_defaults(config) if family is not None and "source" not in config else config
    return {
        "units": units,
        "what": what,
        "workers": workers,
        "waves": units / workers,
        "last_full": units / workers - waves + 1,
        "idle": 1 - units / (waves * workers),
        "edge": _edge_share(knobs, shape),
        "cluster": cluster_size(census),
        "counted": counted,  # the resident blocks are the driver's count, not the SMs' most
    }


def _edge_share(config: dict, shape: dict) -> float | None:
    """The share of a matmul's output tiles (bm × bn knobs) that lies past C's M rows and N columns: work its blocks
    do on zeros at a ragged shape, beside the last wave's idle SMs; None where the knobs or dims do not say."""
    inside = tile_area_inside(config, shape)
    return None if inside is None else 1 - inside


def bound_line(record: dict, best: dict, t: float, named: str | None = None) -> str:
    """ "bound: tensor pipe; tensor pipe 72% of 989 TFLOP/s (BF16 dense); memory 18% of 4.25 TB/s (copy); last wave
    88% full (512 tiles over 132 resident blocks)"."""
    b = bound_fractions(record, best, t, named)
    cells = []
    pipe = b.get("pipe")
    if pipe:
        if pipe["fraction"] is not None:
            kind = "dense" if pipe["name"] == "tensor pipe" else "non-tensor"
            peak = pipe["peak_tflops"]
            shown = f"{peak:.0f}" if peak >= 100 else f"{peak:.1f}"
            per = f", {pipe['products']} products per FLOP" if pipe["products"] > 1 else ""
            cells.append(f"{pipe['name']} {pipe['fraction']:.0%} of {shown} TFLOP/s ({pipe['dtype']} {kind}{per})")
        else:
            arch = record_arch(record) or "an arch without facts"
            why = f"no known peak for {pipe['dtype']} on {arch}" if pipe["dtype"] else "dtype unknown"
            cells.append(f"{pipe['name']} {pipe['tflops']:.1f} TFLOP/s ({why})")
    mem = b["memory"]
    if mem["fraction"] is not None:
        cells.append(f"memory {mem['fraction']:.0%} of {mem['peak_gbs'] / 1e3:.2f} TB/s ({mem['source']})")
    else:
        cells.append(f"memory {mem['gbs'] / 1e3:.2f} TB/s (no known bandwidth)")
    tail = b["tail"]
    if tail:
        # in clusters, the resident blocks are the driver's count at launch: these are the most, so the fewest waves
        most, least = ("at most ", "at least ") if tail["cluster"] > 1 and not tail["counted"] else ("", "")
        cells.append(
            f"last wave {tail['last_full']:.0%} full ({tail['units']} {tail['what']} over {most}{tail['workers']} "
            f"resident blocks, {least}{tail['waves']:.2f} waves)"
        )
        if tail.get("edge") and tail["edge"] >= EDGE_SHOWN:
            cells.append(f"tiles {tail['edge']:.0%} past the output's edges")
    else:
        cells.append("waves unknown (no grid or occupancy)")
    return f"bound: {b['bound']}; " + "; ".join(cells)


def record_arch(record: dict) -> Arch | None:
    """The arch a bench record was measured on, from its GPU's compute capability ("9.0" -> sm_90); None for one
    mage-tune has no facts for."""
    cc = str(record["environment"].get("compute_capability") or "9.0")
    return ARCHS.get("sm_" + cc.replace(".", ""))


def _runner_ups(record: dict, variants: list[dict], regime: str) -> list[str]:
    best = variants[0]
    t = result_time(best, regime)
    f_best = features_json(record["census"][best["label"]]) if best["label"] in record["census"] else {}
    lines = []
    for other in variants[1:4]:
        o = result_time(other, regime)
        f_other = features_json(record["census"][other["label"]]) if other["label"] in record["census"] else {}
        knobs = diff(best["config"], other["config"])
        census = diff(f_best, f_other)
        lines.append(
            f"  vs {o:.2f} µs (+{o / t - 1:.1%}): knobs {'; '.join(knobs) or 'same'}; "
            f"census {'; '.join(census[:6]) or 'same'}"
        )
    return ["runner-ups (winner's value first):", *lines] if lines else []


def _tracking(record: dict, variants: list[dict], regime: str) -> list[str]:
    rows = [
        (features_json(record["census"][r["label"]]), result_time(r, regime))
        for r in variants
        if r["label"] in record["census"]
    ]
    keys = sorted({k for f, _ in rows for k, v in f.items() if isinstance(v, int | float)})
    found = []
    for key in keys:
        pairs = [(f[key], t) for f, t in rows if isinstance(f.get(key), int | float)]
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
        if rho is not None:
            found.append((key, rho, len(pairs)))
    found.sort(key=lambda item: -abs(item[1]))
    if not found:
        return []
    return ["census features that track time across the variants (Spearman rho; + means more is slower):"] + [
        f"  {key:28s} {rho:+.2f}  (n={n})" for key, rho, n in found[:8]
    ]


def _counter_lines(counters: dict) -> list[str]:
    """Nsight Compute's reading of each profiled kernel beside the census's static prediction."""
    occ = counters["census"].get("occupancy") or {}
    lines = [
        f"Nsight Compute (one cold launch, --clock-control none), census predicts {100 * occ.get('fraction', 0):.0f}% "
        f"occupancy and {counters['census']['registers']} registers:"
    ]
    for label, kernels in counters["profiled"].items():
        for k in kernels:
            p, _ = pick(k["raw"])
            stalls = ", ".join(f"{name} {value:.2f}" for name, value in list(k["stalls"].items())[:4])
            occupancy = (
                f"{fmt(p.get('achieved_occupancy_pct'))}% achieved of {fmt(p.get('theoretical_occupancy_pct'))}%"
            )
            lines.append(
                f"  {label}: {fmt((p.get('duration_ns') or 0) / 1e3)} µs, {fmt(p.get('registers'))} registers, "
                f"occupancy {occupancy}, DRAM {fmt(p.get('dram_throughput_pct'))}% of peak, FMA pipe "
                f"{fmt(p.get('fma_pipe_pct'))}%, shared bank conflicts {fmt(p.get('shared_load_bank_conflicts'))}; "
                f"stalls per issue: {stalls}"
            )
            busiest = busiest_units(p)
            if busiest:
                lines.append("    busiest units, % of peak: " + ", ".join(f"{u} {v:.0f}%" for u, v in busiest))
    return lines


UNITS = (  # (what a reader calls it, the picked field): the units a kernel's time can be bound by
    ("tensor pipe", "tensor_pipe_pct"),
    ("FMA pipe", "fma_pipe_pct"),
    ("shared-memory reads", "shared_bank_reads_pct"),
    ("shared-memory writes", "shared_bank_writes_pct"),
    ("L2", "l2_throughput_pct"),
    ("DRAM", "dram_throughput_pct"),
)


def busiest_units(picked: dict) -> list[tuple[str, float]]:
    """The units ncu read for one kernel, busiest first (those it did not read are left out): the first is what the
    kernel's time is nearest to being bound by. The fields are picked again from each kernel's raw metrics, so an
    older counters record that kept them shows them too; one that kept only the FMA pipe and DRAM (a trimmed record)
    gets no line."""
    read = [(name, picked[key]) for name, key in UNITS if picked.get(key) is not None]
    return sorted(read, key=lambda unit: -unit[1]) if len(read) > 2 else []


def report_bench(record: dict, top: int = 10, regime: str = "cold") -> str:
    """A bench record's tables: what was checked and timed, the fastest variants (knobs that differ from the family's
    defaults, census), the baselines beside the best, and the failures."""
    results = record["results"]
    env = record["environment"]
    variants = [r for r in results if r["kind"] == "variant"]
    failed = [r for r in results if not r["ok"]]
    timed = timed_results(record, "variant", regime, session=None)
    shape = shape_words(record["shape"])
    lines = [
        f"{record['family']} {shape} on {env.get('gpu', '?')}: {len(variants)} variant(s), "
        f"{sum(r['ok'] for r in variants)} passed the check, {len(timed)} timed ({regime}); "
        f"{len(results) - len(variants)} baseline result(s); {len(record['sessions'])} session(s)",
    ]
    best_us = result_time(timed[0], regime) if timed else None
    floor = floor_us(record)
    lines.append(
        f"floor {floor:.2f} µs"
        + (f"; best variant {best_us:.2f} µs, {floor / best_us:.0%} of the floor" if best_us else "")
    )
    if timed:
        rows = []
        for rank, r in enumerate(timed[:top], 1):
            c = record["census"].get(r["label"]) or {}
            occ = c.get("occupancy") or {}
            rows.append(
                [
                    rank,
                    f"{result_time(r, regime):.2f}",
                    f"{result_time(r, regime) / best_us:.3f}",
                    c.get("registers", "-"),
                    f"{occ['fraction']:.0%}" if occ else "-",
                    r["config"].get("source") or short_config(recorded.defaults(record), r["config"]),
                ]
            )
        lines += ["", f"fastest variants ({regime}; config: knobs that differ from the family's defaults)"]
        lines.append(table(rows, ["#", "µs", "/ best", "regs", "occ", "config"]))
    base = [r for r in results if r["kind"] != "variant" and r["ok"] and result_time(r, regime) is not None]
    if base:
        rows = [
            [
                r["label"],
                r["session"],
                f"{result_time(r, regime):.2f}",
                f"{best_us / result_time(r, regime):.3f}" if best_us else "-",
            ]
            for r in sorted(base, key=lambda r: (r["kind"], result_time(r, regime)))
        ]
        lines += ["", "baselines in the same run"]
        lines.append(table(rows, ["baseline", "session", "µs", "best / it"]))
    if failed:
        lines += ["", f"failed ({len(failed)}):"]
        defaults = recorded.defaults(record)
        lines += [
            f"  {short_config(defaults, r['config']) if r['kind'] == 'variant' else r['label']}: {r['error']}"
            for r in failed[:top]
        ]
    return "\n".join(lines)


def _grid(record: dict, best: dict, named: str | None) -> tuple[int, int, int] | None:
    """The winner's grid: the one its launcher launched where the measurement kept it, else as the record keeps the
    variant's, else from the code of a family the user named or a built-in one (None for a record of a family file
    nobody named: records never load code)."""
    if is_grid(best.get("launched_grid")):
        return tuple(best["launched_grid"])
    kept = (record.get("launches") or {}).get(best["label"])
    if isinstance(kept, dict) and is_grid(kept.get("grid")):
        return tuple(kept["grid"])
    family, _ = recorded.family_for(record, named)
    # A record written before a knob existed was measured with the knob's default: read it so.
    arch = record_arch(record)
    if family is None or "source" in best["config"] or arch is None:
        return None
    return family.launch(family.with_defaults(best["config"]), record["shape"], arch).grid
