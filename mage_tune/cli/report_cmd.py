"""`mage-tune report RUN` and `mage-tune explain RUN`: from a run directory's record alone."""

from __future__ import annotations

from pathlib import Path

import click


def _run_dir(run: str) -> Path:
    from mage_tune.errors import InputError

    path = Path(run)
    if not (path / "trials.jsonl").exists():
        raise InputError("not a search run directory (no trials.jsonl) nor a bench record", file=run)
    return path


@click.command()
@click.argument("run", type=click.Path())
@click.option("--no-plots", is_flag=True, help="Tables only.")
def report(run, no_plots):
    """Rebuild RUN's report.md, tables and plots (PNG) from its trials.jsonl and baselines.jsonl."""
    from mage_tune.search import report as rep

    path = _run_dir(run)
    text = rep.markdown(path)
    (path / "report.md").write_text(text)
    click.echo(text)
    if not no_plots:
        for png in rep.plots(path):
            click.echo(f"wrote {png}")


@click.command()
@click.argument("run", type=click.Path())
@click.option(
    "--counters",
    "counters_path",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A `mage-tune counters --out` record of the winner: Nsight Compute's reading beside the census.",
)
def explain(run, counters_path):
    """Say what distinguishes RUN's winner: census against runner-ups and Triton, features that track time.

    RUN is a search run directory or a `mage-tune bench --out` record; for a record, also what the winner is
    measured against (Triton, torch, the same-bytes copy, the floor) and what its census shows holding it back
    (occupancy limiter, bytes in flight per SM, waves of blocks)."""
    from mage_tune.search import report as rep

    if Path(run).is_file():
        from mage_tune.measure.explain import explain_bench
        from mage_tune.measure.saved import read_record

        counters = read_record(counters_path, "mage-tune.counters/") if counters_path else None
        click.echo(explain_bench(read_record(run, "mage-tune.bench/"), counters))
        return
    click.echo(rep.explain_text(_run_dir(run)))
