"""`mage-tune search FAMILY`: Optuna over the family's space; resumable, shareable between workers."""

from __future__ import annotations

import sys

import click

from mage_tune.cli.options import compile_options, family_options
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
    scored trial) is recorded but never counts. A sampler's draw that breaks a constraint is drawn again (up to 8
    times), then runs as the nearest valid config (at most two other knobs changed; the record keeps the draw as
    repaired_from), else as a valid config with more of its knobs redrawn at random; only a draw for which neither
    finds one is pruned for its constraints. A draw of a config already tried runs as an untried one-knob neighbour
    of it (redrawn_from), or, where every neighbour was tried and the space is small enough to list (at most 200,000
    combinations of the constrained knobs), as any untried valid config. The study records the config each drawn
    trial ran, so TPE learns from what it timed. Once every valid config of such a space has been tried the search
    stops and says so (see --keep-going-when-exhausted); 50 duplicates in a row stop any search. The last --polish
    trials go to the untried one-knob neighbours of the best three configs.

    A family that names the config its authors ship (as_shipped) has it built and timed beside the baselines (in
    every measuring session), or modelled with --static: the summary gives its time and the best's over it.
    """
    import json

    from mage_tune.api import NothingScored, OptionConflict, SearchInterrupted
    from mage_tune.api import search as run_search
    from mage_tune.api.common import source_kwargs
    from mage_tune.textwidth import wrap

    def say(text: str) -> None:  # stderr, wrapped; the notice that no GPU is here in yellow
        if text.startswith("NOTICE:"):
            click.secho(wrap(text), fg="yellow", err=True)
        else:
            click.echo(wrap(text), err=True)

    try:
        result = run_search(
            family,
            dims,
            arch=arch,
            trials=trials,
            sampler=sampler,
            static=static,
            gpus=gpus,
            db=db_url,
            warm_start="off" if no_warm_start else warm_start,
            polish=polish,
            keep_going_when_exhausted=keep_going,
            seed=seed,
            run_dir=run_dir,
            study=study_name,
            storage=storage,
            workers=workers,
            progress=True,
            echo=say,
            **source_kwargs(source_options),
        )
    except OptionConflict as exc:
        raise click.UsageError(exc.message) from None
    except SearchInterrupted as exc:
        click.echo(
            f"interrupted; finished trials are kept in {exc.run_dir}: re-run the same command to resume", err=True
        )
        sys.exit(130)
    except NothingScored as exc:  # what ran is said first, then the error
        click.echo(json.dumps(exc.result.to_json(), indent=1) if as_json else exc.result.table())
        raise
    click.echo(json.dumps(result.to_json(), indent=1) if as_json else result.table())
