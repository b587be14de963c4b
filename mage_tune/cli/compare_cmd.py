"""`mage-tune compare FAMILY --against triton|path.py:kernel`: our variant and a Triton kernel in one census table."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mage_tune.cli.options import family_and_shape, family_options


@click.command()
@click.argument("family")
@family_options
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
    from mage_tune.census import census_artifact
    from mage_tune.errors import InputError
    from mage_tune.triton_ref import compile_user

    user = against != "triton"
    if not user and (signature or constexprs or grid):
        raise InputError("--signature, --constexpr and --grid describe a user kernel: use --against path.py:kernel")
    if settings and best:
        raise InputError("give either --set knobs or --best RUN, not both")
    fam, shape = family_and_shape(family, dims)
    reference_configs = fam.reference_configs()
    if not reference_configs and config_index != "0":
        raise InputError(f"--config picks one of the reference's configs; {fam.name}'s reference has one kernel")
    items = [f"{key}={value}" for key, value in _best_config(best).items()] if best else list(settings)
    config = fam.parse_settings(items, shape, arch)
    variant = fam.build(config, shape, arch)
    (ours,) = census_artifact(
        variant.artifact, kernel=variant.kernel_name, block=variant.block, param_names=list(variant.param_names)
    )

    if user:
        theirs = [compile_user(against, signature, constexprs, arch, num_warps, grid=_parse_grid(grid))]
    else:
        chosen = None
        if reference_configs and config_index != "all":
            chosen = _pick(reference_configs, config_index)
        theirs = fam.reference_kernels(shape, arch, specialize=specialize, num_warps=num_warps, config=chosen)
        if not theirs:
            raise InputError(f"{fam.name} names no Triton reference kernel; compare with --against path.py:kernel")

    role = "user" if user else "triton"
    entries = [_entry("ours", variant.kernel_name, variant.config, variant.launch.grid, variant.block, ours)]
    entries[0]["facts"] = fam.compare_facts(ours, variant.config, shape, reference=False)
    for tk in theirs:
        (census,) = census_artifact(tk.artifact, kernel=tk.name, block=tk.block, param_names=list(tk.param_names))
        entry = _entry(role, tk.name, tk.config, tk.grid, tk.block, census)
        entry["specialized"] = tk.specialized
        entry["facts"] = [] if user else fam.compare_facts(census, tk.config, shape, reference=True)
        entries.append(entry)

    if as_json:
        click.echo(json.dumps(_json(fam.name, shape, arch, entries), indent=2))
        return
    click.echo(render_comparison(entries, fam.compare_note, multiple=len(theirs) > 1))


# --- pieces -----------------------------------------------------------------------------------------------------


def _entry(role, name, config, grid, block, census) -> dict:
    return {
        "role": role,
        "kernel": name,
        "config": dict(config),
        "grid": list(grid) if grid else None,
        "block": block,
        "census": census,
    }


def _best_config(run: str) -> dict:
    from mage_tune.errors import InputError

    path = Path(run)
    candidates = [path] if path.is_file() else [path / "best.json", path / "best" / "best.json"]
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise InputError("no best.json here (a search run keeps its best config in best.json)", file=run)
    try:
        data = json.loads(found.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"not readable JSON: {exc}", file=str(found)) from None
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict) or not config:
        raise InputError('expected {"config": {knob: value, ...}}', file=str(found))
    return config


def _pick(configs: list[dict], text: str) -> dict:
    from mage_tune.errors import InputError

    try:
        index = int(text)
    except ValueError:
        raise InputError(f"--config takes an index or 'all', got {text!r}") from None
    if not 0 <= index < len(configs):
        raise InputError(f"reference config {index} does not exist; 0..{len(configs) - 1}")
    return configs[index]


def _parse_grid(text: str | None) -> tuple[int, int, int] | None:
    from mage_tune.errors import InputError

    if not text:
        return None
    try:
        dims = [int(p) for p in text.replace("x", ",").split(",") if p.strip()]
    except ValueError:
        raise InputError(f"--grid takes X or X,Y,Z, got {text!r}") from None
    if not 1 <= len(dims) <= 3 or any(v < 1 for v in dims):
        raise InputError(f"--grid takes X or X,Y,Z of positive integers, got {text!r}")
    return tuple(dims + [1] * (3 - len(dims)))


def _grid_text(grid, block) -> str:
    if not grid:
        return f"? × {block}"
    shown = str(grid[0]) if list(grid[1:]) == [1, 1] else "(" + ", ".join(map(str, grid)) + ")"
    return f"{shown} × {block}"


def _config_text(entry) -> str:
    text = " ".join(f"{k}={v}" for k, v in entry["config"].items())
    if entry["role"] == "triton":
        text += " (as launched)" if entry.get("specialized") else " (unspecialized)"
    return text


def render_comparison(entries: list[dict], note: str = "", multiple: bool = False) -> str:
    from mage_tune.census.table import render, rows

    columns = []
    for i, entry in enumerate(entries):
        header = f"{entry['role']}: {entry['kernel']}"
        if multiple and entry["role"] != "ours":
            header += f" #{i - 1}"
        head = [
            ("config", _config_text(entry)),
            ("grid × block", _grid_text(entry["grid"], entry["block"])),
        ]
        facts = [(fact.label, fact.text) for fact in entry.get("facts", ())]
        columns.append((header, head + facts + rows(entry["census"])))
    table = render(columns, mark_differences=True)
    if not note:
        return table
    import textwrap

    return table + "\n\n" + textwrap.fill(note, width=100)


def _json(family: str, shape: dict, arch: str, entries: list[dict]) -> dict:
    kernels = []
    for entry in entries:
        record = {key: value for key, value in entry.items() if key not in ("census", "facts")}
        record.update({fact.key: fact.value for fact in entry.get("facts", ())})
        record["census"] = entry["census"].to_json()
        kernels.append(record)
    return {"schema": "mage-tune.compare/1", "family": family, "shape": shape, "arch": arch, "kernels": kernels}
