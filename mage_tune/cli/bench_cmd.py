"""`mage-tune bench FAMILY`: check and time variants on the GPU with the baselines in the same run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from mage_tune.cli.options import compile_options, family_and_shape, family_options


@click.command()
@click.argument("family")
@family_options(arch_default="auto")
@compile_options
@click.option(
    "--set",
    "settings",
    multiple=True,
    help="knob=value (repeatable); knob=v1,v2,... sweeps: every valid combination is measured.",
)
@click.option(
    "--source",
    type=click.Path(exists=True, dir_okay=False),
    multiple=True,
    help="A hand-written .cu with the family's kernel signature, launched like the --set config.",
)
@click.option(
    "--configs",
    "configs_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A JSON list of configs (knob -> value) to measure, e.g. from analysis/top_configs.py.",
)
@click.option("--all", "all_configs", is_flag=True, help="Every valid config of the space (with --sample: a sample).")
@click.option("--sample", type=int, default=None, help="With --all: this many configs, seeded, plus knob corners.")
@click.option("--check-only", is_flag=True, help="Correctness only, no timing (space-wide checks).")
@click.option("--regime", type=click.Choice(["cold", "hot", "both"]), default="cold", show_default=True)
@click.option(
    "--baselines",
    default=None,
    help="Comma list of baseline kinds, or 'none' (default: the family's own, e.g. triton,torch,copy, and shipped "
    "where it names one). copy: copies of the same bytes, the floor at this shape; shipped: the config the family's "
    "authors ship (its as_shipped), timed as ours / yours.",
)
@click.option("--rounds", type=int, default=7, show_default=True, help="Graph replays per regime (median, min, max).")
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True, help="Seconds per job.")
@click.option("--seed", type=int, default=None, help="Input seed (default: fresh).")
@click.option("--json", "as_json", is_flag=True, help="Print the run record as JSON.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None, help="Also write the record here.")
@click.option("--force", is_flag=True, help="Replace the --out record if it exists.")
def bench(
    family,
    dims,
    arch,
    source_options,
    settings,
    source,
    configs_file,
    all_configs,
    sample,
    check_only,
    regime,
    baselines,
    rounds,
    timeout_s,
    seed,
    as_json,
    out_path,
    force,
):
    """Check every variant against a float64 reference (outputs poisoned first), then time it by CUDA-graph replay.

    Baselines (Triton's reference kernel at each config, torch) run in the same worker process, on the same inputs,
    with the same timer. Without a GPU this exits with code 2.
    """
    from mage_tune.measure import bench as run_bench
    from mage_tune.measure import device, shipped

    if configs_file and (settings or all_configs or source):
        raise click.UsageError("--configs lists the configs itself: leave out --set, --all and --source")
    if out_path and Path(out_path).exists() and not force:
        from mage_tune.errors import InputError

        raise InputError("exists; give --force to replace it, or another --out", file=out_path)
    device.require_gpu()
    click.echo(f"measuring on the GPU: {device.gpu_mode()[1]}", err=True)
    if arch == "auto" or arch is None:
        arch = device.arch_of_device()
    fam, shape = family_and_shape(family, dims, source_options)
    variants = _variants(fam, shape, arch, settings, source, configs_file, all_configs, sample)
    regimes = ("cold", "hot") if regime == "both" else (regime,)
    if baselines is None:
        names = None  # the family's own
    else:
        names = () if baselines == "none" else tuple(b.strip() for b in baselines.split(",") if b.strip())
    partial = Path(out_path + ".partial.jsonl") if out_path else None

    def on_result(result) -> None:
        bar.update(1)
        if partial:  # results so far survive a killed run
            with open(partial, "a") as f:
                f.write(json.dumps(shipped.recorded(result).to_json()) + "\n")

    notes = []

    def on_note(line: str) -> None:  # the shipped config left out: said, and kept in the record
        notes.append(line)
        click.echo(line, err=True)

    from mage_tune.progress import Progress

    with Progress(len(variants) + 1, "measuring", unit="result") as bar:  # a bar on a terminal, lines in a log
        run = run_bench(
            fam,
            shape,
            variants,
            regimes=regimes,
            baselines=names,
            rounds=rounds,
            seed=seed,
            job_timeout_s=timeout_s,
            timed=not check_only,
            on_result=on_result,
            on_plan=bar.set_total,  # baselines count too: Triton's configs, torch, the copies
            arch=arch,
            on_note=on_note,
        )
    record = run_record(run, variants, fam, "; ".join(notes))
    if out_path:
        from mage_tune.search.record import write_atomic

        write_atomic(Path(out_path), json.dumps(record, indent=1))
        partial.unlink(missing_ok=True)
    if as_json:
        click.echo(json.dumps(record, indent=1))
    else:
        click.echo(format_run(run, regimes))
    failed = [r for r in run.results if not r.ok and r.kind == "variant"]
    if check_only and failed:
        raise click.exceptions.Exit(1)


def _variants(fam, shape, arch, settings, sources, configs_file, all_configs, sample):
    from mage_tune.kernels import select

    def failed(error) -> None:
        click.echo(f"compile failed: {error}", err=True)

    if configs_file:
        return select.build_all(fam, shape, arch, select.listed(fam, shape, arch, Path(configs_file)), failed)
    if all_configs:
        return select.build_all(fam, shape, arch, select.whole_space(fam, shape, arch, sample), failed)
    if select.is_sweep(settings):
        configs = select.sweep(fam, shape, arch, settings, lambda why: click.echo(f"skipped: {why}", err=True))
        return select.build_all(fam, shape, arch, configs, failed)
    config = fam.parse_settings(settings, shape, arch)
    # Hand-written sources first, then the template variant itself: a broken source must not stop the next one.
    return [select.from_source(fam, shape, arch, config, path) for path in sources] + [fam.build(config, shape, arch)]


def run_record(run, variants, family, shipped_note: str = "") -> dict:
    import uuid

    from mage_tune.census import census_variant
    from mage_tune.kernels.base import block_json
    from mage_tune.kernels.recorded import family_record
    from mage_tune.measure import shipped
    from mage_tune.measure.summary import rows

    censuses = {}
    for v in variants:
        c = census_variant(v)
        censuses[v.label] = c.to_json()
    regimes = sorted({t.regime for r in run.results for t in r.timings})
    return {
        "schema": "mage-tune.bench/1",
        "record_id": uuid.uuid4().hex,
        "family": run.family,
        "family_origin": run.family_origin,
        "family_digest": family_record(family)["family_digest"],
        "defaults": family.with_defaults({}),
        "source_options": _source_record(family),
        "launches": {v.label: {"grid": list(v.launch.grid), "block": block_json(v.launch.block)} for v in variants},
        "shape": run.shape,
        "bytes_moved": run.bytes_moved,
        "flops": run.flops,
        "environment": run.environment,
        "sessions": [dataclasses.asdict(s) for s in run.sessions],
        "results": [shipped.recorded(r).to_json() for r in run.results],
        "summary": {
            regime: [
                {
                    "label": row.result.label,
                    "kind": shipped.kind(row.result),
                    "session": row.result.session,
                    "time_us": row.time_us,
                    "floor_us": row.floor_us,
                    "pct_of_floor": row.pct_of_floor,
                    "vs": shipped.vs(run, row, regime),  # "shipped": ours / yours
                }
                for row in rows(run, regime)
            ]
            for regime in regimes
        },
        "census": censuses,
        "as_shipped": shipped.bench_summary(run, regimes, shipped_note),
    }


def _source_record(family) -> dict | None:
    """The command line's -I, -D and compiler options the variants were built with (None: as the family declares)."""
    extra = getattr(family, "extra_source_options", None)
    return extra.to_json() if extra is not None else None


def format_run(run, regimes) -> str:
    from tabulate import tabulate

    from mage_tune.measure import shipped
    from mage_tune.measure.summary import rows

    env = run.environment
    lines = [
        f"{run.family} {run.shape} on {env.get('gpu', '?')} (driver {env.get('driver', '?')}, "
        f"torch {env.get('torch', '?')}, triton {env.get('triton', '?')})"
    ]
    for s in run.sessions:
        lines.append(
            f"session {s.index}: copy ceiling {s.copy_gbs:.0f} GB/s (best of {', '.join(s.copy_kernels)}), "
            f"FP32 {s.fp32_tflops:.1f} TFLOP/s, control {s.control_us:.1f} µs"
        )
    for regime in regimes:
        table = []
        for row in rows(run, regime):
            r = row.result
            timing = next((t for t in r.timings if t.regime == regime), None)
            table.append(
                [
                    r.label,
                    shipped.kind(r),
                    r.session,
                    "ok" if r.ok else f"FAILED: {r.error}",
                    row.errors,  # each declared output's error in its metric; one output: its relative error
                    f"{timing.median_us:.2f} [{timing.min_us:.2f}-{timing.max_us:.2f}]" if timing else "-",
                    f"{r.single_launch_us:.2f}" if r.single_launch_us else "-",
                    row.rate,
                    f"{row.pct_of_floor:.0%}" if row.pct_of_floor else "-",
                    " ".join(f"{g} {x:.2f}x" for g, x in shipped.vs(run, row, regime).items()) or "-",
                ]
            )
        floor = rows(run, regime)[0].floor_us if run.results else 0.0
        lines.append(f"\n{regime} regime (µs per launch from graph replay; floor {floor:.2f} µs)")
        lines.append(
            tabulate(
                table,
                headers=[
                    "kernel",
                    "kind",
                    "sess",
                    "check",
                    "error",
                    "µs median [min-max]",
                    "1 launch µs",
                    "rate",
                    "% floor",
                    "time / best baseline",
                ],
                tablefmt="simple",
                disable_numparse=True,
            )
        )
        said = shipped.summary_line(run, regime)
        if said:
            lines.append(said)
    return "\n".join(lines)
