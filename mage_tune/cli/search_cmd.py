"""`mage-tune search FAMILY`: Optuna over the family's space; resumable, shareable between workers."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mage_tune.arch import DEFAULT_ARCH
from mage_tune.cli.options import compile_options, family_and_shape, family_options
from mage_tune.search.samplers import SAMPLERS

DUPLICATE_RUN = 50  # runner.DUPLICATE_RUN (the runner imports Optuna, which --help must not load)

TRIALS = click.IntRange(1, 1_000_000)  # 0 or fewer would end at once with an empty table
WORKERS = click.IntRange(1, 256)  # 0 or fewer compile processes would run no trial, for ever


@click.command()
@click.argument("family")
@family_options(arch_default="auto")
@compile_options
@click.option("--trials", type=TRIALS, default=100, show_default=True, help="Trials that count (see --help text).")
@click.option(
    "--sampler",
    type=click.Choice(list(SAMPLERS)),
    default="tpe",
    show_default=True,
    help="; ".join(f"{name}: {entry.help}" for name, entry in SAMPLERS.items()) + ".",
)
@click.option("--storage", default=None, help="Optuna storage URL (sqlite:///…, postgresql://…) or journal:PATH.")
@click.option("--study", "study_name", default=None, help="Study name (default: from family, shape, arch, mode).")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None, help="Default: runs/search-<study>.")
@click.option("--workers", type=WORKERS, default=2, show_default=True, help="Compile processes running ahead.")
@click.option("--static", is_flag=True, help="No GPU: score with the census model (docs/static-model.md).")
@click.option("--seed", type=int, default=None, help="Sampler seed.")
@click.option(
    "--warm-start",
    type=click.Choice(["auto", "off", "other-shapes"]),
    default="auto",
    show_default=True,
    help="First trials from the tuning database: the best configs of the nearest measured shapes, then a model's "
    "picks; other-shapes leaves this shape's own records out.",
)
@click.option("--no-warm-start", is_flag=True, help="The same as --warm-start off.")
@click.option(
    "--db", "db_url", default=None, help="Tuning database URL, or off (default: $MAGE_TUNE_DB or the cache's)."
)
@click.option(
    "--polish",
    type=click.IntRange(0, 1_000_000),
    default=None,
    help="The last N trials go to untried one-knob neighbours of the best configs so far, ranked by the tuning "
    "database's model (default: a quarter of --trials, none with --sampler grid; 0: none).",
)
@click.option(
    "--keep-going-when-exhausted",
    "keep_going",
    is_flag=True,
    help="Once every valid config of a space small enough to list has been tried, draw on instead of stopping: the "
    "draws repeat tried configs (a failed one runs again; a scored one is a duplicate, which never counts), until "
    f"--trials count or {DUPLICATE_RUN} duplicates in a row.",
)
@click.option("--gpus", default=None, help="all or 0,1,…: one measuring worker per GPU of this host on one study.")
@click.option("--json", "as_json", is_flag=True, help="Print the best trial as JSON.")
def search(
    family,
    dims,
    arch,
    source_options,
    trials,
    sampler,
    storage,
    study_name,
    run_dir,
    workers,
    static,
    seed,
    warm_start,
    no_warm_start,
    db_url,
    polish,
    keep_going,
    gpus,
    as_json,
):
    """Search FAMILY's space: suggest, compile (cached, ahead in a pool), census (prune what cannot win), check and
    time on the GPU — or, with --static or where no GPU is present, score with the census model — and record
    every trial. Re-running the same command resumes; several processes on one --storage/--study share the work.
    A trial left running by a killed process is given up once its heartbeat has been silent for
    $MAGE_TUNE_HEARTBEAT_GRACE seconds (default 30); the resumed run waits that long for its place.

    A trial counts toward --trials when it ends measured, modelled, pruned (constraints or census), compile_error or
    failed (wrong result, crash, timeout). A duplicate (a config already tried, or the same SASS and launch as a
    scored trial) is recorded but never counts. A sampler's draw that breaks a constraint runs as the nearest valid
    config (at most two other knobs changed; the record keeps the draw as repaired_from); only a draw with no valid
    config that close is pruned for its constraints. A draw of a config already tried runs as an untried one-knob
    neighbour of it (redrawn_from), or, where every neighbour was tried and the space is small enough to list (at
    most 200,000 combinations of the constrained knobs), as any untried valid config. Once every valid config of
    such a space has been tried the search stops and says so (see --keep-going-when-exhausted); 50 duplicates in a
    row stop any search. The last --polish trials go to the untried one-knob neighbours of the best three configs.

    A family that names the config its authors ship (as_shipped) has it built and timed beside the baselines (in
    every measuring session), or modelled with --static: the summary gives its time and the best's over it.
    """
    import json

    from mage_tune.compile import check_arch
    from mage_tune.search import record, report
    from mage_tune.search.runner import Search
    from mage_tune.search.spec import SearchSpec, spec_json
    from mage_tune.search.summary import write_summary
    from mage_tune.storage import storage_errors
    from mage_tune.textwidth import wrap

    if sampler == "grid" and polish:
        raise click.UsageError("--polish does not apply to --sampler grid: the grid walks every config as it is")
    fam, shape = family_and_shape(family, dims, source_options)
    if gpus is not None:
        if static:
            raise click.UsageError("--gpus measures on GPUs; --static measures nothing: give one of them")
        from mage_tune.search.gpus import parse_gpus

        gpu_list = parse_gpus(gpus)
    if not static:
        from mage_tune.measure.device import arch_of_device, gpu_mode

        mode_name, why = gpu_mode()  # a GPU here that cannot be used is an error, never a quiet static run
        if mode_name == "static":
            click.secho(
                wrap(
                    f"NOTICE: no CUDA device here: running the STATIC census model, not measurements ({why}; "
                    "pass --static to silence this)."
                ),
                fg="yellow",
                err=True,
            )
            static = True
            said = ""
        else:
            said = f"measuring on the GPU: {why}; "
            if arch in (None, "auto"):
                arch = arch_of_device()
    else:
        said = "static census model (--static), no GPU used; "
    arch = check_arch(DEFAULT_ARCH if arch in (None, "auto") else arch)
    mode = "static" if static else "measured"
    shape_text = "-".join(f"{k}{v}" for k, v in shape.items())
    study_name = study_name or f"{fam.name}-{shape_text}-{arch}-{mode}"
    run_path = Path(run_dir or Path("runs") / f"search-{study_name}")
    spec = SearchSpec(
        fam.name,
        shape,
        arch,
        trials,
        sampler,
        storage,
        study_name,
        run_path,
        workers,
        static,
        seed,
        fam.origin,
        warm_start="off" if no_warm_start else warm_start,
        db=db_url,
        polish=polish,
        source_options=source_options,
        keep_going=keep_going,
    )
    runner = Search(spec, fam, lambda text: click.echo(wrap(text), err=True))
    resumed = report.recorded_trials(runner.study)
    click.echo(  # said once the run directory and study are known to match: a refused run says only why
        wrap(
            said
            + (
                f"resuming {resumed} recorded trial(s) of study {study_name} (asked for {trials})"
                + ("; nothing left to run: raise --trials to search on" if resumed >= trials else "")
                if resumed
                else f"new study {study_name}"
            )
        ),
        err=True,
    )
    for note in runner.warm_start():
        click.echo(wrap(note), err=True)
    record.write_atomic(run_path / "search.json", spec_json(spec))
    from mage_tune.measure.device import environment

    record.add_environment(run_path, environment())
    from mage_tune.progress import Progress

    bar = Progress(trials, f"search {study_name}", unit="trial")  # a bar on a terminal, plain lines in a log

    def progress(done: int, best: float) -> None:
        bar.set(done, f"best {best:.2f} µs" if best < float("inf") else "best -")

    try:
        with storage_errors(spec):
            if gpus is not None:
                from mage_tune.search.gpus import run_on_gpus

                click.echo(wrap(f"one measuring worker per GPU: {', '.join(gpu_list)}"), err=True)
                runner.heartbeat.close()
                run_on_gpus(spec, runner.study, gpu_list, progress, runner.polish_model)
            else:
                runner.run(progress)
    except KeyboardInterrupt:
        bar.close()
        click.echo(f"interrupted; finished trials are kept in {run_path}: re-run the same command to resume", err=True)
        sys.exit(130)
    finally:
        bar.close()
    best = write_summary(spec, fam)
    outcomes = report.outcome_counts(run_path)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    as_shipped = report.shipped(run_path)
    if as_json:
        said = {"run_dir": str(run_path), "resumed_trials": resumed, "outcomes": outcomes}
        said |= {"as_shipped": as_shipped, "stopped": runner.stopped or None}
        click.echo(json.dumps({**best, **said}, indent=1, default=str))
    else:
        if best:
            click.echo("\n" + report.top_table(run_path, fit=True))
        click.echo("\n" + report.source_table(run_path, fit=True))
        if report.baselines(run_path):
            click.echo("\n" + report.baseline_table(run_path, best.get("value"), fit=True))
        click.echo(f"\ntrials by outcome: {counts}" + (f" ({resumed} recorded before this run)" if resumed else ""))
        if as_shipped is not None:
            click.echo(wrap(report.shipped_line(run_path)))
    if not best:  # nothing to report: a failure, never an exit 0 that names a report and a best/ never written
        from mage_tune.errors import MageError

        first = next(iter(record.trials(run_path)), {})
        why = str(first.get("reason") or first.get("error") or "").strip().split("\n")[0][:200]
        example = f"; trial {first.get('number', '?')}: {why}" if why else ""
        raise MageError(
            f"no trial scored ({counts or 'none ran here'}{example}), so no report.md nor best/ was written; "
            "this file says how each trial ended",
            file=str(run_path / "trials.jsonl"),
        )
    if not as_json:
        kept = [name for name in ("report.md", "best/", "trials.jsonl") if (run_path / name).exists()]
        click.echo(wrap(f"run directory: {run_path} ({', '.join(kept)})"))
