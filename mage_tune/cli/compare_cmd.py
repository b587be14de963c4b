"""`mage-tune compare FAMILY --against triton|path.py:kernel`: our variant and a Triton kernel in one census table."""

from __future__ import annotations

import json

import click

from mage_tune.cli.options import compile_options, family_and_shape, family_arch, family_options


@click.command()
@click.argument("family")
@family_options
@compile_options
@click.option("--set", "settings", multiple=True, help="Our variant: knob=value (repeatable); unset knobs default.")
@click.option(
    "--best",
    "best",
    default=None,
    metavar="RUN",
    help="Our variant: the best config of a search run, read from RUN/best.json or RUN/best/best.json "
    '({"config": {...}}); a path to such a JSON file works too.',
)
@click.option(
    "--against",
    default="triton",
    show_default=True,
    metavar="triton|PATH.py:KERNEL",
    help="The family's Triton reference kernel, or your own @triton.jit kernel (needs --signature).",
)
@click.option("--num-warps", type=int, default=None, help="Triton kernel's num_warps (default: its config's).")
@click.option(
    "--config",
    "config_index",
    default="0",
    show_default=True,
    help="Where the family's reference has several configs (a matmul's): which one (an index), or 'all'.",
)
@click.option(
    "--specialize/--no-specialize",
    default=True,
    show_default=True,
    help="Compile the Triton kernel as its JIT launches it for this shape: 16-byte aligned pointers and integers "
    "divisible by 16 marked so, integers equal to 1 made constant. --no-specialize: the generic offline compile.",
)
@click.option(
    "--signature",
    default=None,
    help='User kernel: "name:type,..." in the function\'s order, e.g. "x_ptr:*fp32,N:i32,BLOCK:constexpr".',
)
@click.option("--constexpr", "constexprs", multiple=True, help="User kernel: NAME=value (repeatable).")
@click.option("--grid", default=None, help="User kernel: its launch grid, 'X' or 'X,Y,Z' (shown, not needed).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema mage-tune.compare/1) instead of a table.")
def compare(
    family,
    dims,
    arch,
    source_options,
    settings,
    best,
    against,
    num_warps,
    config_index,
    specialize,
    signature,
    constexprs,
    grid,
    as_json,
):
    """Census our FAMILY variant side by side with a Triton kernel, compiled offline for --arch (no GPU).

    One row per property (grid × block, registers, shared memory, global loads and stores by width and by
    parameter, passes over the row, barriers, shuffles, special functions, occupancy and its limiter, loads in
    flight, spills), one column per kernel; rows that differ are marked ≠.

    Our variant is the family's default config, or --set knobs, or --best RUN. Triton's side is the family's
    reference kernel (for the built-ins, mage_tune/triton_kernels.py), or with --against path.py:kernel your own
    kernel:

    \b
      mage-tune compare layernorm --d 768 --against my.py:k \\
          --signature "x:*fp32,N:i32,BLOCK:constexpr" --constexpr BLOCK=1024 --num-warps 4
    """
    from mage_tune.comparison import compare as run_compare
    from mage_tune.comparison import parse_grid

    fam, shape = family_and_shape(family, dims, source_options)
    result = run_compare(
        fam,
        shape,
        arch=family_arch(fam, arch),
        settings=list(settings),
        best=best,
        against=against,
        num_warps=num_warps,
        config_index=config_index,
        specialize=specialize,
        signature=signature,
        constexprs=list(constexprs),
        grid=parse_grid(grid),
    )
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else result.table())
