"""`mage-tune counters FAMILY`: Nsight Compute's counters for one cold launch, beside the census's prediction."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from mage_tune.cli.options import compile_options, family_and_shape, family_options

ROWS = (  # (label, picked field, format)
    ("time (ncu, one cold launch)", "duration_ns", lambda v: f"{v / 1e3:.2f} µs"),
    ("registers / thread", "registers", "{:.0f}"),
    ("theoretical occupancy", "theoretical_occupancy_pct", "{:.1f}%"),
    ("achieved occupancy", "achieved_occupancy_pct", "{:.1f}%"),
    ("DRAM traffic (rate × time)", "dram_bytes", lambda v: f"{v / 2**20:.2f} MiB"),
    ("DRAM bandwidth", "dram_bytes_per_s", lambda v: f"{v / 1e12:.2f} TB/s"),
    ("DRAM throughput, % of peak", "dram_throughput_pct", "{:.1f}%"),
    ("SM throughput, % of peak", "sm_throughput_pct", "{:.1f}%"),
    ("issue slots busy", "issue_active_pct", "{:.1f}%"),
    ("FMA pipe busy", "fma_pipe_pct", "{:.1f}%"),
    ("tensor pipe busy", "tensor_pipe_pct", "{:.1f}%"),
    ("shared-memory bank reads, % of peak", "shared_bank_reads_pct", "{:.1f}%"),
    ("shared-memory bank writes, % of peak", "shared_bank_writes_pct", "{:.1f}%"),
    ("L2 throughput, % of peak", "l2_throughput_pct", "{:.1f}%"),
    ("shared load bank conflicts", "shared_load_bank_conflicts", "{:.0f}"),
    ("shared store bank conflicts", "shared_store_bank_conflicts", "{:.0f}"),
)


@click.command()
@click.argument("family")
@family_options(arch_default="auto")
@compile_options
@click.option("--set", "settings", multiple=True, help="knob=value (repeatable): the variant to profile.")
@click.option(
    "--baseline",
    "baseline_labels",
    multiple=True,
    help="Also profile a baseline by its bench label, e.g. 'triton[num_warps=4]' or 'torch.layer_norm'.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None, help="Also write the record here.")
@click.option("--force", is_flag=True, help="Replace the --out record if it exists.")
def counters(family, dims, arch, source_options, settings, baseline_labels, as_json, out_path, force):
    """Profile one cold launch of a variant (and of named baselines) with Nsight Compute (`--clock-control none`):
    achieved occupancy, DRAM traffic and throughput, issue, FMA- and tensor-pipe use, shared-memory and L2
    throughput, bank conflicts and stall reasons, beside what the census predicts from the binary alone (registers,
    occupancy, bytes the kernel must move)."""
    from mage_tune.arch import get_arch
    from mage_tune.census import census_artifact
    from mage_tune.errors import ConfigError
    from mage_tune.measure import baseline_jobs, device, variant_job
    from mage_tune.measure.counters import profile
    from mage_tune.outputs import refuse_existing_out
    from mage_tune.search.record import write_atomic

    refuse_existing_out(out_path, force)  # before profiling
    device.require_gpu()
    click.echo(f"measuring on the GPU: {device.gpu_mode()[1]}", err=True)
    fam, shape = family_and_shape(family, dims, source_options)
    arch = fam.target_arch(device.arch_of_device()) if arch in ("auto", None) else get_arch(arch)  # an Arch from here
    variant = fam.build(fam.parse_settings(settings, shape, arch), shape, arch)
    by_label = {job.label: job for job in baseline_jobs(fam, shape, fam.baselines)}
    missing = [label for label in baseline_labels if label not in by_label]
    if missing:
        raise ConfigError(f"unknown baseline {missing[0]!r}; baselines at this shape: {', '.join(by_label)}")
    jobs = [variant_job(variant)] + [by_label[label] for label in baseline_labels]
    census = census_artifact(
        variant.artifact, kernel=variant.kernel_name, block=variant.block, param_names=list(variant.param_names)
    )[0]
    profiled = {}
    from mage_tune.progress import Progress

    with Progress(len(jobs), "profiling", unit="kernel") as bar:  # a bar on a terminal, plain lines in a log
        for job in bar.iterate(jobs):
            profiled[job.label] = profile(job, fam.origin or fam.name, shape)
    record = {
        "schema": "mage-tune.counters/1",
        "family": fam.name,
        "shape": shape,
        "bytes_moved": fam.bytes_moved(shape),
        "flops": fam.flops(shape),
        "environment": device.environment(),
        "variant": variant.label,
        "cubin_sha256": variant.artifact.cubin_sha256,
        "census": census.to_json(),
        "profiled": {label: [dataclasses.asdict(k) for k in ks] for label, ks in profiled.items()},
    }
    if out_path:
        write_atomic(Path(out_path), json.dumps(record, indent=1))  # replaces a link in its place, never follows
    click.echo(json.dumps(record, indent=1) if as_json else format_counters(record))


def format_counters(record: dict) -> str:
    """Metric rows, one column per profiled kernel; the census's static prediction for the variant first."""
    from mage_tune.kernels.base import shape_words
    from mage_tune.measure.counters import pick
    from mage_tune.textwidth import table as fit_table

    census = record["census"]
    occ = census["occupancy"] or {}
    moved = record["bytes_moved"]
    predicted = {
        "registers": census["registers"],
        "theoretical_occupancy_pct": 100 * occ["fraction"] if occ else None,
        "dram_bytes": moved if not record["flops"] else None,  # what the kernel must move, once each way
    }
    # Re-picked from the raw metrics, so records written before a metric name was corrected still show it.
    columns = [(label, {**k, "picked": pick(k["raw"])[0]}) for label, ks in record["profiled"].items() for k in ks]
    headers = ["metric", "census (static)"] + [
        f"{label}\n{k['kernel'][:40]}" if len(ks) > 1 else label for label, ks in record["profiled"].items() for k in ks
    ]
    table = []
    for name, key, fmt in ROWS:
        render = fmt if callable(fmt) else fmt.format
        static = predicted.get(key)
        row = [name, render(static) if static is not None else ""]
        for _label, k in columns:
            value = k["picked"].get(key)
            row.append(render(value) if value is not None else "-")
        table.append(row)
    stall_names = sorted({s for _, k in columns for s in list(k["stalls"])[:4]})
    for stall in stall_names:
        table.append([f"stall: {stall} (warps/issue)", ""] + [f"{k['stalls'].get(stall, 0):.2f}" for _, k in columns])
    lines = [
        f"{record['family']} {shape_words(record['shape'])}  variant {record['variant']}",
        f"census: occupancy limiter {occ.get('limiter', '?')}, {occ.get('blocks_per_sm', '?')} blocks/SM"
        + ("; DRAM traffic predicted: the bytes the kernel must move" if not record["flops"] else ""),
        fit_table(table, headers),
    ]
    return "\n".join(lines)
