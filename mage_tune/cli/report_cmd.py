"""`mage-tune report RUN` and `mage-tune explain RUN`: from a run directory's record alone."""

from __future__ import annotations

from pathlib import Path

import click


def _run_dir(run: str) -> Path:
    from mage_tune.errors import InputError

    path = Path(run)
    if not (path / "trials.jsonl").exists():
        raise InputError("not a search run directory (no trials.jsonl)", file=run)
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
def explain(run):
    """Say what distinguishes RUN's winner: census against runner-ups and Triton, features that track time."""
    from mage_tune.search import report as rep

    click.echo(rep.explain_text(_run_dir(run)))
