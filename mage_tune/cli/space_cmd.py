"""`mage-tune space FAMILY` and `mage-tune render FAMILY`: a family's declared space, and one config's source."""

from __future__ import annotations

import json

import click

from mage_tune.cli.options import family_and_shape, family_options


@click.command()
@click.argument("family")
@family_options
@click.option("--list", "as_list", is_flag=True, help="List every valid config.")
@click.option("--json", "as_json", is_flag=True, help="Knobs, constraints and every valid config as JSON.")
def space(family, dims, arch, as_list, as_json):
    """Show FAMILY's knobs, their domains, the constraints, and how many configs are valid for this shape.

    FAMILY is a built-in name, a family file (path/to/family.py or path/to/family.py:NAME) or an installed
    plug-in's name (entry point group mage_tune.families)."""
    from mage_tune.compile import check_arch
    from mage_tune.textwidth import table as fit_table
    from mage_tune.textwidth import wrap

    check_arch(arch)
    fam, shape = family_and_shape(family, dims)
    configs = list(fam.configs(shape, arch)) if (as_list or as_json) else None
    count = len(configs) if configs is not None else fam.count_configs(shape, arch)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "family": fam.name,
                    "origin": fam.origin,
                    "dims": {dim: fam.dim_help.get(dim, "") for dim in fam.dims},
                    "shape": shape,
                    "arch": arch,
                    "knobs": [{"name": k.name, "domain": list(k.domain), "help": k.help} for k in fam.knobs],
                    "constraints": fam.constraint_text(),
                    "size": fam.space_size(),
                    "valid": count,
                    "configs": configs,
                },
                indent=2,
            )
        )
        return
    shape_text = ", ".join(f"{k}={v}" for k, v in shape.items())
    click.echo(f"{fam.name} ({shape_text}, {arch})")
    dims_text = ", ".join(f"{dim}: {fam.dim_help[dim]}" if fam.dim_help.get(dim) else dim for dim in fam.dims)
    click.echo(f"dimensions: {dims_text}\n")
    rows = [[k.name, ", ".join(map(str, k.domain)), k.help] for k in fam.knobs]
    click.echo(fit_table(rows, ["knob", "domain", "meaning"]))
    click.echo("\nconstraints:")
    for text in fam.constraint_text():
        click.echo(wrap(f"  - {text}"))
    click.echo(f"\n{count} valid configs of {fam.space_size()} in the product of the domains")
    if as_list:
        names = [k.name for k in fam.knobs]
        click.echo(fit_table([[c[n] for n in names] for c in configs], names))


@click.command()
@click.argument("family")
@family_options
@click.option(
    "--set", "settings", multiple=True, help="knob=value (repeatable); unset knobs take the first valid value."
)
def render(family, dims, arch, settings):
    """Print the source of one config of FAMILY (a CUDA family's rendered template; a Triton family's kernel and
    the launch options of the config)."""
    fam, shape = family_and_shape(family, dims)
    config = fam.parse_settings(settings, shape, arch)
    click.echo(f"// {fam.name} {config} {shape} {arch}")
    click.echo(fam.render(config, shape), nl=False)
