"""`mage-tune space FAMILY` and `mage-tune render FAMILY`: a family's declared space, and one config's source."""

from __future__ import annotations

import json

import click


def with_shape(func=None, *, arch_default: str = "sm_90"):
    """The problem-shape options every family command takes (--d --m --n --k --arch)."""

    def decorate(f):
        options = [
            click.option("--d", type=int, default=None, help="Row width (layernorm)."),
            click.option("--m", type=int, default=None, help="Rows (layernorm) or M (matmul)."),
            click.option("--n", type=int, default=None, help="N (matmul)."),
            click.option("--k", "k_", type=int, default=None, help="K (matmul)."),
            click.option(
                "--arch",
                default=arch_default,
                show_default=True,
                help="sm_80, sm_86, sm_89, sm_90" + (" or auto (the GPU's)" if arch_default == "auto" else ""),
            ),
        ]
        for option in reversed(options):
            f = option(f)
        return f

    return decorate(func) if func is not None else decorate


@click.command()
@click.argument("family")
@with_shape
@click.option("--list", "as_list", is_flag=True, help="List every valid config.")
@click.option("--json", "as_json", is_flag=True, help="Knobs, constraints and every valid config as JSON.")
def space(family, d, m, n, k_, arch, as_list, as_json):
    """Show FAMILY's knobs, their domains, the constraints, and how many configs are valid for this shape."""
    from mage_tune.compile import check_arch
    from mage_tune.textwidth import table as fit_table
    from mage_tune.textwidth import wrap
    from mage_tune.kernels import get_family

    check_arch(arch)
    fam = get_family(family)
    shape = fam.shape_from(d=d, m=m, n=n, k=k_)
    configs = list(fam.configs(shape, arch)) if (as_list or as_json) else None
    count = len(configs) if configs is not None else sum(1 for _ in fam.configs(shape, arch))
    if as_json:
        click.echo(
            json.dumps(
                {
                    "family": fam.name,
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
    click.echo(f"{fam.name} ({shape_text}, {arch})\n")
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
@with_shape
@click.option(
    "--set", "settings", multiple=True, help="knob=value (repeatable); unset knobs take the first valid value."
)
def render(family, d, m, n, k_, arch, settings):
    """Print the CUDA source of one config of FAMILY."""
    from mage_tune.kernels import get_family

    fam = get_family(family)
    shape = fam.shape_from(d=d, m=m, n=n, k=k_)
    config = fam.parse_settings(settings, shape, arch)
    click.echo(f"// {fam.name} {config} {shape} {arch}")
    click.echo(fam.render(config, shape), nl=False)
