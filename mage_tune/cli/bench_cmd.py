"""`mage-tune bench FAMILY`: check and time variants on the GPU with the baselines in the same run."""

from __future__ import annotations

import json

import click

from mage_tune.cli.options import compile_options, family_options


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
    multiple=True,
    help="Comma list of baseline kinds (repeatable: the kinds of all), or 'none' (default: the family's own, e.g. "
    "triton,torch,copy, and shipped where it names one). copy: copies of the same bytes, the floor at this shape; "
    "shipped: the config the family's authors ship (its as_shipped), timed as ours / yours; context: a kernel timed "
    "for context only, not held to the family's accuracy (cuBLAS TF32 beside the FP32-accurate matmuls), never the "
    "best baseline.",
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
    from mage_tune.api import OptionConflict
    from mage_tune.api import bench as run_bench
    from mage_tune.api.common import source_kwargs

    try:
        result = run_bench(
            family,
            dims,
            arch=arch,
            settings=settings,
            sources=source,
            configs=configs_file,
            all_configs=all_configs,
            sample=sample,
            check_only=check_only,
            regime=regime,
            baselines=baselines or None,  # the option not given: the family's own
            rounds=rounds,
            timeout_s=timeout_s,
            seed=seed,
            out=out_path,
            force=force,
            progress=True,
            echo=lambda line: click.echo(line, err=True),
            **source_kwargs(source_options),
        )
    except OptionConflict as exc:
        raise click.UsageError(exc.message) from None
    click.echo(json.dumps(result.to_json(), indent=1) if as_json else result.table())
    if check_only and result.failed:
        raise click.exceptions.Exit(1)


def __getattr__(name: str):
    # The record and the table moved to mage_tune.api.bench_loop with the rest of bench; imported on first use, so
    # `mage-tune bench --help` stays instant.
    if name in ("format_run", "run_record"):
        from mage_tune.api import bench_loop

        return getattr(bench_loop, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
