"""`mage-tune db`: the tuning database every search writes to (list, query, export, import, prune)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

DB_OPTION = click.option(
    "--db", "db_url", default=None, help="Database URL (default: $MAGE_TUNE_DB or tuning.db in the cache folder)."
)


COMPILERS = ("nvrtc", "nvcc", "ptxas")  # what decides a binary; the disassemblers only read it


def _check_family_name(family: str, recorded: set[str], where: str) -> None:
    """An InputError for a family name that is neither known here nor recorded in `where` (a misspelt name would
    otherwise answer as an empty table); a family file's path is taken as given."""
    from mage_tune.errors import InputError
    from mage_tune.kernels.registry import did_you_mean, known_names, looks_like_path

    names = {*known_names(), *recorded}
    if family in names or looks_like_path(family):
        return
    raise InputError(f"no family {family!r} is known here or recorded in {where}{did_you_mean(family, names)}")


def _open(db_url, create: bool = False):
    """The database; the commands that only read (and prune, which only removes) never make one."""
    from mage_tune.tuning.db import TuningDB

    return TuningDB(db_url, create=create)


def best_baselines(baselines: dict[str, float]) -> dict[str, float]:
    """The fastest time of each kind of baseline ("triton[BLOCK=…]" and "triton[…]" -> "triton")."""
    out: dict[str, float] = {}
    for label, value in baselines.items():
        kind = label.split("[", 1)[0].split(" (", 1)[0]
        out[kind] = min(out.get(kind, value), value)
    return dict(sorted(out.items()))


@click.group()
def db():
    """The tuning database: every trial of every search (family, shape, arch, GPU, toolchain, config, census,
    outcome, time, the baselines of its run). Searches write to it and warm-start from it."""


@db.command("list")
@DB_OPTION
@click.option("--family", default=None, help="Only this family (name or origin).")
@click.option("--json", "as_json", is_flag=True, help="A JSON array, one object per run, instead of a table.")
@click.option(
    "--shipped",
    is_flag=True,
    help="The runs of the tuning data shipped with mage-tune (read-only) instead of the database's.",
)
def list_runs(db_url, family, as_json, shipped):
    """One row per run: family, shape, arch, GPU, toolchain, objective, trials, best time. The data shipped with
    mage-tune (measured H200 and H100 trials of the built-in families, read-only: a search reads it beside the
    database, choices after it) is a separate source: summed up under the table, listed with --shipped."""
    from mage_tune.storage import redact
    from mage_tune.textwidth import constant_columns, table, wrap
    from mage_tune.tuning import shipped as shipped_data

    if shipped:
        runs = shipped_data.runs()
        entries = shipped_data.entries(family)
        where = f"{shipped_data.LABEL} (read-only, {shipped_data.PATH})"
    else:
        store = _open(db_url)
        runs, entries, where = store.runs(), store.entries(family=family), f"tuning database {redact(store.url)}"
    if family:
        recorded = {name for run, _ in runs for name in (run.family, run.origin)}
        _check_family_name(family, recorded, where if shipped else f"the {where}")
    rows, objs = [], []
    best: dict[str, float] = {}
    for e in entries:
        if e.value is not None and e.outcome in ("measured", "modelled"):
            best[e.run.name] = min(best.get(e.run.name, float("inf")), e.value)
    for run, n in sorted(runs, key=lambda r: (r[0].family, r[0].shape_order(), r[0].name)):
        if family and not run.is_of(family):
            continue
        toolchain = " ".join(f"{k} {v}" for k, v in run.toolchain.items() if k in COMPILERS)
        b = best.get(run.name)
        rows.append(
            [
                run.family,
                run.shape_key(),
                run.arch,
                run.gpu or "-",
                run.objective,
                n,
                "-" if b is None else f"{b:.2f}",
                toolchain,
            ]
        )
        objs.append(
            {
                "run": run.name,
                "where": run.where,
                "family": run.family,
                "shape": run.shape,
                "arch": run.arch,
                "gpu": run.gpu,
                "objective": run.objective,
                "trials": n,
                "best": b,
                "toolchain": run.toolchain,
                "baselines": run.baselines,
                **({"source": "shipped"} if shipped else {}),
            }
        )
    if as_json:
        click.echo(json.dumps(objs, indent=1))
        return
    click.echo(f"{where}: {len(rows)} run(s)", err=True)
    headers = ["family", "shape", "arch", "GPU", "objective", "trials", "best", "toolchain"]
    rows, headers, same = constant_columns(rows, headers, keep=2)  # what every run shares, said once
    if same:
        click.echo(wrap(same))
    click.echo(table(rows, headers, "simple", fit=True, optional=("toolchain", "GPU")))
    if not shipped:
        _shipped_summary(family)


def _shipped_summary(family: str | None) -> None:
    """The shipped data, per family, arch and GPU: a source apart from the database, which it never joins."""
    from mage_tune.textwidth import table
    from mage_tune.tuning import shipped as shipped_data

    groups: dict[tuple[str, str, str], list] = {}
    for run, n in shipped_data.runs():
        if not family or run.is_of(family):
            groups.setdefault((run.family, run.arch, run.gpu), []).append((run, n))
    if not groups:
        return
    rows = [
        [name, arch, gpu, len({r.shape_key() for r, _ in runs}), len(runs), sum(n for _, n in runs)]
        for (name, arch, gpu), runs in sorted(groups.items())
    ]
    click.echo(f"\n{shipped_data.LABEL} (read-only, after the database's; `db list --shipped` lists its runs):")
    click.echo(table(rows, ["family", "arch", "GPU", "shapes", "runs", "trials"], "simple", fit=True))


@db.command()
@click.argument("family")
@DB_OPTION
@click.option("--shape", "shape_text", default=None, help="Only this shape, as DIM=N,… (e.g. m=1024,n=1024,k=1024).")
@click.option("--arch", default=None, help="Only this arch (e.g. sm_90).")
@click.option(
    "--top", type=click.IntRange(1, 1000), default=3, show_default=True, help="Best configs per shape and GPU."
)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@click.option("--shipped", is_flag=True, help="Query the shipped tuning data (read-only) instead of the database.")
def query(family, db_url, shape_text, arch, top, as_json, shipped):
    """The fastest measured configs of FAMILY per shape and GPU (one GPU's times never rank another's), with the
    baselines measured in the same run."""
    from dataclasses import asdict

    from mage_tune.arch import get_arch
    from mage_tune.cli.options import parse_shape
    from mage_tune.errors import InputError
    from mage_tune.kernels import recorded
    from mage_tune.storage import redact
    from mage_tune.textwidth import constant_columns, short_config, table, wrap
    from mage_tune.tuning import shipped as shipped_data
    from mage_tune.tuning.db import measured_by_gpu_and_shape

    shape = parse_shape(shape_text) or None
    if arch:
        arch = get_arch(arch).name  # an arch mage-tune does not know is refused, not a filter that matches nothing
    known = recorded.builtin(family)
    if known is not None and shape and set(shape) - set(known.dims):
        raise InputError(f"{family} takes the dimensions {', '.join(known.dims)}; not {', '.join(sorted(shape))}")
    store = None if shipped else _open(db_url)
    runs = shipped_data.runs() if shipped else store.runs()
    where = shipped_data.LABEL if shipped else f"the tuning database {redact(store.url)}"
    _check_family_name(family, {name for run, _ in runs for name in (run.family, run.origin)}, where)
    source = shipped_data.entries(family=family, arch=arch) if shipped else store.entries(family, arch)
    entries = [e for e in source if shape is None or e.run.shape == shape]
    # A built-in's config it cannot build today (a knob or value since retired, or an edited record) is no answer
    buildable, retired = [], []
    for e in entries:
        (retired if e.measured and recorded.config_problem(e.run.origin, e.config) else buildable).append(e)
    entries = buildable
    out, rows = [], []
    for group in sorted(
        measured_by_gpu_and_shape(entries).values(), key=lambda g: (g[0].run.shape_order(), g[0].run.gpu)
    ):
        picks, seen = [], []
        for e in group:
            if e.config not in seen:
                seen.append(e.config)
                picks.append(e)
            if len(picks) == top:
                break
        for rank, e in enumerate(picks, 1):
            base = ", ".join(f"{k}={v:.1f}" for k, v in best_baselines(e.run.baselines).items())
            config = short_config(e.run.defaults or recorded.defaults(asdict(e.run)), e.config)
            rows.append([e.run.shape_key(), rank, f"{e.value:.2f}", e.run.gpu or "-", config, base])
            out.append(
                {
                    "shape": e.run.shape,
                    "rank": rank,
                    "value": e.value,
                    "gpu": e.run.gpu,
                    "arch": e.run.arch,
                    "config": e.config,
                    "run": e.run.name,
                    "baselines": e.run.baselines,
                }
            )
    if retired:
        why = recorded.config_problem(retired[0].run.origin, retired[0].config)
        said = f"left out: {len(retired)} measured trial(s) whose config {family} cannot build today (e.g. {why})"
        click.echo(wrap(said), err=True)
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    if not rows:
        where = shipped_data.LABEL if shipped else "the tuning database"
        click.echo(f"no measured trial of {family} in {where}", err=True)
        if not shipped and [e for e in shipped_data.entries(family=family, arch=arch) if e.value is not None]:
            click.echo(f"{shipped_data.LABEL} has some: `mage-tune db query {family} --shipped`", err=True)
        return
    headers = ["shape", "#", "µs", "GPU", "config (≠ defaults)", "baselines, µs (same run)"]
    rows, headers, same = constant_columns(rows, headers)  # what every row shares (the GPU), said once
    if same:
        click.echo(wrap(same))
    click.echo(table(rows, headers, "simple", fit=True))


@db.command()
@click.argument("out", type=click.Path(dir_okay=False, allow_dash=True))
@DB_OPTION
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "triton", "header"]),
    default="jsonl",
    show_default=True,
    help="jsonl: every trial; triton: a module of triton.Configs per key; header: a C++ table and dispatch.",
)
@click.option(
    "--family",
    default=None,
    help="jsonl: only this family (name or origin). triton, header: the family they are for (a built-in name or "
    "a family file: its code says which configs are valid and how they launch).",
)
@click.option("--gpu", default=None, help="triton, header: the GPU (default: the one most trials were measured on).")
@click.option("--arch", default=None, help="triton, header: the arch (default: the data's, as --gpu).")
@click.option("--top", type=click.IntRange(1, 100), default=3, show_default=True, help="triton: configs per key.")
@click.option("--no-shipped", is_flag=True, help="triton, header: leave out the data shipped with mage-tune.")
@click.option("--force", is_flag=True, help="Replace OUT if it exists (never the database's own file).")
def export(out, db_url, fmt, family, gpu, arch, top, no_shipped, force):
    """Write every trial (with its run's context) as JSON lines to OUT (- for stdout; OUT.gz compressed), or, for
    deployment, what `mage_tune.load(FAMILY).choice(shape)` answers at each measured shape: a Python module of
    triton.Configs per key (--format triton) or a C++ header of launch parameters with a dispatch function
    (--format header); docs/exports.md says what each holds. OUT is written whole or not at all: a temporary file
    beside it is renamed into place once complete."""
    from mage_tune.errors import InputError

    store = _open(db_url)
    if fmt == "jsonl":
        if family and not any(run.is_of(family) for run, _ in store.runs()):
            from mage_tune.storage import redact

            where = redact(store.url)
            raise InputError(f"no run of family {family} in the tuning database ({where}): nothing is written")
        n = store.export(sys.stdout, family) if out == "-" else _export_to(store, Path(out), family, force)
        click.echo(f"exported {n} trial(s)", err=True)
        return
    from mage_tune.runtime import load
    from mage_tune.tuning import exports

    if not family:
        raise InputError(f"--format {fmt} needs --family: the family whose code validates and launches its configs")
    kernel = load(family, store, use_shipped=not no_shipped)
    gpu, arch = kernel.context(gpu, arch, this_machine=False)  # the data's, wherever the export runs
    text, n = (
        exports.triton_module(kernel, gpu, arch, top) if fmt == "triton" else exports.cpp_header(kernel, gpu, arch)
    )
    if out == "-":
        sys.stdout.write(text)
    else:
        _write_safely(store, Path(out), force, lambda f: f.write(text))
    click.echo(f"exported {n} shape(s) of {kernel.family.name} on {gpu or 'an unnamed GPU'} ({arch})", err=True)


def _export_to(store, out: Path, family: str | None, force: bool) -> int:
    return _write_safely(store, out, force, lambda f: store.export(f, family))


def _write_safely(store, out: Path, force: bool, write):
    """`write(file)` into `out` whole or not at all (a temporary file beside it, renamed into place); never the
    database's own file, never an existing file without `force`. Returns what `write` returns."""
    import contextlib
    import gzip
    import os
    import tempfile

    from mage_tune.errors import InputError
    from mage_tune.search.record import FILE_MODE
    from mage_tune.tuning.db import local_file

    own = local_file(store.url)
    if own is not None and out.exists() and own.exists() and os.path.samefile(own, out):
        raise InputError("this is the tuning database's own file: export to another", file=str(out))
    if out.exists() and not force:
        raise InputError("exists; give --force to replace it, or another name", file=str(out))
    opener = gzip.open if out.name.endswith(".gz") else open
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        os.fchmod(fd, FILE_MODE)  # what open() gives: mkstemp's 0600 would hide an export from the team it is for
        os.close(fd)
        with opener(tmp, "wt", encoding="utf-8") as f:
            n = write(f)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, out)
        tmp = None
        return n
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", file=str(out)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


@db.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@DB_OPTION
def import_(paths, db_url):
    """Add runs from PATHS: search run directories, bench records (.json) or exports (.jsonl, .jsonl.gz). Every path
    is read and checked before anything is written, so a bad one adds nothing: an export line outside the schema is
    an error with its file and line; a run directory's damaged trial lines (a search killed mid-write) are skipped,
    each named, and the rest imported. A run already in the database gets only the trials it lacks, so importing
    twice (or a copy, or at once from two shells) adds nothing."""
    from mage_tune.search.sources import load_path

    loaded = [run for path in paths for run in load_path(path)]
    added, present = _open(db_url, create=True).add_runs(loaded)
    click.echo(f"imported {added} run(s); {present} already present")


@db.command()
@DB_OPTION
@click.option(
    "--keep", "keep_text", default=None, help="Toolchain to keep, as NAME=VERSION,… (default: this machine's)."
)
@click.option("--dry-run", is_flag=True, help="Say what would be dropped, drop nothing.")
def prune(db_url, keep_text, dry_run):
    """Drop the runs made with another compiler (NVRTC, nvcc, ptxas versions) than the one kept: their binaries and
    times no longer say what this toolchain would give."""
    from mage_tune import toolchain
    from mage_tune.textwidth import wrap
    from mage_tune.tuning.db import versions

    keep = {k: v for k, v in versions(toolchain.fingerprint()).items() if k in COMPILERS}
    if keep_text:
        parts = [part.strip() for part in keep_text.split(",")]
        if not all(p.count("=") == 1 and p.split("=")[0] and p.split("=")[1] for p in parts):
            raise click.BadParameter(f"{keep_text!r}: expected NAME=VERSION[,NAME=VERSION…]", param_hint="--keep")
        keep = dict(part.split("=", 1) for part in parts)
        unknown = sorted(set(keep) - set(COMPILERS))
        if unknown:  # a misspelt or non-compiler name would keep or drop runs by nothing that decides a binary
            raise click.BadParameter(
                f"{', '.join(unknown)}: prune keeps runs by the compilers, {', '.join(COMPILERS)}", param_hint="--keep"
            )
    store = _open(db_url)
    dropped = 0
    for run, n in store.runs():
        differs = [k for k, v in keep.items() if run.toolchain.get(k, v) != v]
        if not differs:
            continue
        made_with = ", ".join(f"{k} {run.toolchain[k]}" for k in differs)
        click.echo(wrap(f"{'would drop' if dry_run else 'dropping'} {run.name} ({n} trials; made with {made_with})"))
        if not dry_run:
            store.drop(run.name)
        dropped += 1
    click.echo(
        f"{dropped} run(s) {'to drop' if dry_run else 'dropped'}; kept toolchain: "
        + ", ".join(f"{k} {v}" for k, v in keep.items()),
        err=True,
    )
