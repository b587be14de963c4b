"""`mage-tune space FAMILY` and `mage-tune render FAMILY`: a family's declared space, and one config's source."""

from __future__ import annotations

import itertools
import json
import os
import sys
import time

import click

from mage_tune.arch import Arch
from mage_tune.cli.options import compile_options, family_and_shape, family_arch, family_options

JSON_HELP = (
    "JSON Lines, streamed as the space is walked (never held whole): first the family, origin, dims, shape, arch, "
    'knobs, constraints and size of the product of the domains; then {"config": {...}} per valid config (every '
    'one, or the first --limit N); last {"valid": COUNT, "listed": N, "count": "exact"}, or, where --limit stops '
    'the walk and the space is too large to count at once, {"valid": null, "listed": N, "count": "estimate", '
    '"estimate": {"valid", "low", "high", "confidence": 0.95, "sampled", "combinations"}} (--exact counts instead). '
    "Read it line by line (head, jq -c, a loop); --limit 0 gives the first and last lines alone."
)


@click.command()
@click.argument("family")
@family_options
@click.option("--list", "as_list", is_flag=True, help="A table of the valid configs (every one, or --limit N).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="List at most the first N valid configs (--list, --json); the count is still of all of them (see --exact).",
)
@click.option(
    "--exact",
    is_flag=True,
    help="Count every valid config, however long it takes (matmul's 7.5 million: about 10 s), never estimate.",
)
def space(family, dims, arch, as_list, as_json, limit, exact):
    """Show FAMILY's knobs, their domains, the constraints, and how many configs are valid for this shape.

    FAMILY is a built-in name, a family file (path/to/family.py or path/to/family.py:NAME) or an installed
    plug-in's name (entry point group mage_tune.families). Counting never builds the configs, and answers in about a
    second: the count is exact where the constrained knobs (those a constraint reads) have at most 200,000
    combinations, or where the whole space is listed anyway; a larger space's count (matmul's, layernorm's) is an
    estimate from a seeded sample of 50,000 of those combinations, said as one (`about 7.53 million ...`, with its 95%
    interval; "count": "estimate" in --json), unless --exact counts every one."""
    from mage_tune.problem import Problem
    from mage_tune.search.space import Count, count_valid
    from mage_tune.textwidth import table as fit_table
    from mage_tune.textwidth import wrap

    fam, shape = family_and_shape(family, dims)
    arch = family_arch(fam, arch)  # --arch's name becomes an Arch here, once
    fam.check_refusal(shape, arch)  # an arch the family cannot build for: said, not counted as "about 0" configs
    if as_json:
        _stream_json(fam, shape, arch, limit, exact)
        return
    configs = list(itertools.islice(fam.configs(shape, arch), limit)) if as_list else None
    if configs is not None and (limit is None or len(configs) < limit):
        count = Count.of(len(configs))  # the whole space was listed
    else:
        count = count_valid(Problem(fam, shape, arch), exact=exact, known=len(configs or ()))
    shape_text = ", ".join(f"{k}={v}" for k, v in shape.items())
    click.echo(f"{fam.name} ({shape_text}, {arch})")
    dims_text = ", ".join(f"{dim}: {fam.dim_help[dim]}" if fam.dim_help.get(dim) else dim for dim in fam.dims)
    click.echo(f"dimensions: {dims_text}\n")
    rows = [[k.name, ", ".join(map(str, k.domain)), k.help] for k in fam.knobs]
    click.echo(fit_table(rows, ["knob", "domain", "meaning"]))
    click.echo("\nconstraints:")
    for text in fam.constraint_text():
        click.echo(wrap(f"  - {text}"))
    click.echo(f"\n{count.text()} of {fam.space_size()} in the product of the domains")
    if count.note():
        click.echo(wrap(f"  {count.note()}"))
    if as_list:
        names = [k.name for k in fam.knobs]
        if not count.exact or len(configs) < count.valid:
            click.echo(f"the first {len(configs)} (--limit {limit}):")
        click.echo(_config_list(configs, names))


def _config_list(configs: list[dict], names: list[str]) -> str:
    """The listed configs: a table of the knobs that vary among them (those that do not said once above it) where
    its headers and values fit the width whole, else one config a line, knob=value items wrapped whole."""
    from mage_tune.textwidth import columns, constant_columns, wrap
    from mage_tune.textwidth import table as fit_table

    rows, headers, same = constant_columns([[c[n] for n in names] for c in configs], names, keep=0)
    widths = [max(len(str(v)) for v in col) for col in zip(headers, *rows, strict=True)]
    width = columns()
    lines = [wrap(same)] if same else []
    if width is None or sum(widths) + 2 * (len(widths) - 1) <= width:
        return "\n".join([*lines, fit_table(rows, headers)])
    items = (", ".join(f"{h}={v}" for h, v in zip(headers, r, strict=True)) for r in rows)
    return "\n".join([*lines, *(wrap(line, width) for line in items)])  # the width read once, not per config


def _stream_json(fam, shape: dict, arch: Arch, limit: int | None, exact: bool) -> None:
    """`space --json`: JSON Lines (see JSON_HELP), each config written as it is found; stdout flushed after the
    first line and then at least every half second, so a reader sees the first lines at once. A reader that stops
    early (head) ends the walk quietly."""
    from mage_tune.problem import Problem
    from mage_tune.search.space import Count, count_valid

    out = sys.stdout
    header = {
        "schema": "mage-tune.space/2",
        "family": fam.name,
        "origin": fam.origin,
        "dims": {dim: fam.dim_help.get(dim, "") for dim in fam.dims},
        "shape": shape,
        "arch": arch.name,
        "knobs": [{"name": k.name, "domain": list(k.domain), "help": k.help} for k in fam.knobs],
        "constraints": fam.constraint_text(),
        "size": fam.space_size(),
    }
    try:
        out.write(json.dumps(header) + "\n")
        out.flush()
        listed, flushed = 0, time.monotonic()
        for config in itertools.islice(fam.configs(shape, arch), limit):
            out.write(json.dumps({"config": config}) + "\n")
            listed += 1
            if time.monotonic() - flushed > 0.5:
                out.flush()
                flushed = time.monotonic()
        out.flush()
        if limit is None or listed < limit:
            count = Count.of(listed)  # the whole space was walked
        else:
            count = count_valid(Problem(fam, shape, arch), exact=exact, known=listed)
        out.write(json.dumps({"valid": count.valid, "listed": listed, **count.json()}) + "\n")
        out.flush()
    except BrokenPipeError:  # the reader has what it wanted; nothing more to say, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        sys.exit(0)


@click.command()
@click.argument("family")
@family_options
@compile_options
@click.option(
    "--set", "settings", multiple=True, help="knob=value (repeatable); unset knobs take the first valid value."
)
def render(family, dims, arch, source_options, settings):
    """Print the source of one config of FAMILY (a CUDA family's rendered template; a Triton family's kernel and
    the launch options of the config) under comment lines naming the family, shape, arch and config; a CUDA
    family's compile options for the config, when it has any, follow the first line."""
    fam, shape = family_and_shape(family, dims, source_options)
    arch = family_arch(fam, arch)  # --arch's name becomes an Arch here, once
    config = fam.parse_settings(settings, shape, arch)
    import textwrap

    from mage_tune.kernels.base import CudaFamily, shape_words

    mark = "//" if isinstance(fam, CudaFamily) else "#"  # the header is a comment of the source's language
    click.echo(f"{mark} {fam.name} {shape_words(shape)} {arch}")
    flags = _compile_flags(fam, config, shape)
    if flags:
        click.echo(f"{mark} compiled with: {' '.join(flags)}")
    # the config as comment lines of 100 columns at most (matmul-bf16's 17 knobs took 250 on one)
    knobs = " ".join(f"{k}={v}" for k, v in config.items())
    click.echo(
        textwrap.fill(knobs, 100, initial_indent=f"{mark} config: ", subsequent_indent=f"{mark}   ",
                      break_long_words=False, break_on_hyphens=False)
    )  # fmt: skip
    click.echo(fam.render(config, shape), nl=False)


def _compile_flags(fam, config: dict, shape: dict) -> list[str]:
    """The options, defines and include folders a CUDA family compiles `config` with beyond NVRTC's defaults."""
    options = getattr(fam, "source_options", None)
    if options is None:
        return []
    opts = options(config, shape)
    std = [f"-std={opts.std if opts.std.startswith('c++') else 'c++' + opts.std}"] if opts.std else []
    return [*std, *opts.options, *(f"-D{d}" for d in opts.defines), *(f"-I{d}" for d in opts.includes)]
