"""`mage-tune report` and `mage-tune explain`: from a search run directory or a `mage-tune bench --out` record alone."""

from __future__ import annotations

from pathlib import Path

import click

TAKES = "a search run directory (with trials.jsonl) or a `mage-tune bench --out` record (schema mage-tune.bench/)"


def _run_dir(run: str) -> Path:
    from mage_tune.errors import InputError

    path = Path(run)
    if not path.exists():
        raise InputError(f"no such file or directory; report and explain take {TAKES}", file=run)
    if not (path / "trials.jsonl").exists():
        raise InputError(f"not a search run directory (no trials.jsonl); report and explain take {TAKES}", file=run)
    return path


def _bench_record(run: str) -> dict:
    from mage_tune.errors import InputError
    from mage_tune.measure.saved import read_json

    record = read_json(run)
    schema = record.get("schema") if isinstance(record, dict) else None
    if not str(schema or "").startswith("mage-tune.bench/"):
        what = (
            f"schema {schema!r}"
            if schema is not None
            else "no schema"
            if isinstance(record, dict)
            else "not a JSON object"
        )
        raise InputError(f"not a bench record ({what}); report and explain take {TAKES}", file=run)
    return record


@click.command()
@click.argument("run", type=click.Path())
@click.option("--no-plots", is_flag=True, help="Tables only.")
def report(run, no_plots):
    """Rebuild RUN's tables: for a search run directory, its report.md, tables and plots (PNG) from trials.jsonl and
    baselines.jsonl; for a `mage-tune bench --out` record, its fastest variants, baselines and failures."""
    from mage_tune.textwidth import wrap

    if Path(run).is_file():
        from mage_tune.measure.explain import report_bench

        click.echo(wrap(report_bench(_bench_record(run))))
        return
    from mage_tune.search import report as rep

    path = _run_dir(run)
    unwritten = rep.write_markdown(path)  # a read-only or full run directory: said once the tables are printed
    click.echo(wrap(rep.terminal(path)))
    if unwritten:
        raise unwritten
    written = [path / "report.md", *([] if no_plots else rep.plots(path))]
    click.echo(wrap(f"wrote into {path}: " + ", ".join(p.name for p in written)))


@click.command()
@click.argument("run", type=click.Path())
@click.option(
    "--counters",
    "counters_path",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A `mage-tune counters --out` record of the winner: Nsight Compute's reading beside the census.",
)
@click.option(
    "--family",
    "family",
    default=None,
    help="The family (name or FILE.py) whose code may serve RUN: its Triton comparison and grid. Records never "
    "load the family file they name; a built-in family is used without asking.",
)
def explain(run, counters_path, family):
    """Say what distinguishes RUN's winner: census against runner-ups and Triton, features that track time.

    RUN is a search run directory or a `mage-tune bench --out` record; for a record, also what the winner is
    measured against (Triton, torch, the same-bytes copy, the floor) and what its census shows holding it back
    (occupancy limiter, bytes in flight per SM, a TMA kernel's by its family's count, waves of blocks)."""
    from mage_tune.textwidth import wrap

    if Path(run).is_file():
        from mage_tune.errors import InputError
        from mage_tune.measure.explain import explain_bench
        from mage_tune.measure.saved import read_record, timed_results

        counters = read_record(counters_path, "mage-tune.counters/") if counters_path else None
        record = _bench_record(run)
        if not timed_results(record, "variant"):
            raise InputError("no passing, timed variant in this record: nothing to explain", file=run)
        click.echo(wrap(explain_bench(record, counters, family=family)))
        return
    from mage_tune.search import report as rep

    path = _run_dir(run)
    if counters_path:  # a run directory's explanation has no place for it: refused, never silently dropped
        from mage_tune.errors import InputError

        raise InputError(
            f"--counters {counters_path} applies to a `mage-tune bench --out` record; this is a search run directory",
            file=run,
        )
    if not rep.scored(path):
        from mage_tune.errors import InputError

        raise InputError("no scored trial in this run: nothing to explain", file=str(path / "trials.jsonl"))
    click.echo(wrap(rep.explain_text(path, family=family)))
