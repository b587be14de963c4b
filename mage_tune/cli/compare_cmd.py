"""`mage-tune compare FAMILY --against triton|path.py:kernel`: our variant and a Triton kernel in one census table."""

from __future__ import annotations

import json
from pathlib import Path

import click

ARCHS = ["sm_80", "sm_86", "sm_89", "sm_90"]
FAMILIES = ["layernorm", "matmul"]

PASSES_NOTE = (
    "passes over x: floats of x loaded per thread (static PTX count, each load at its full width) ÷ floats one read "
    "of the row puts on a thread (d for our kernel, Triton's BLOCK for Triton's, over the threads of one row, rounded "
    "up to whole accesses)."
)


@click.command()
@click.argument("family", type=click.Choice(FAMILIES))
@click.option("--d", type=int, default=None, help="Row width (layernorm).")
@click.option("--m", type=int, default=None, help="Rows (layernorm, default 4096) or M (matmul).")
@click.option("--n", type=int, default=None, help="N (matmul).")
@click.option("--k", "k_", type=int, default=None, help="K (matmul).")
@click.option("--arch", type=click.Choice(ARCHS), default="sm_90", show_default=True, help="Target arch.")
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
    help="Triton's reference kernel for the family, or your own @triton.jit kernel (needs --signature).",
)
@click.option("--num-warps", type=int, default=None, help="Triton kernel's num_warps (default: its config's).")
@click.option(
    "--config",
    "config_index",
    default="0",
    show_default=True,
    help="matmul: which Triton config (index into the tutorial-style FP32 list), or 'all'.",
)
@click.option(
    "--specialize",
    is_flag=True,
    help="Compile Triton's reference as its JIT would launch it: 16-byte aligned pointers and integers divisible "
    "by 16 marked so, integers equal to 1 made constant (default: the plain offline compile, no such hints).",
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
    d,
    m,
    n,
    k_,
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
    reference (mage_tune/triton_kernels.py: the one-program-per-row layer norm; the FP32 matmul with GROUP_M
    swizzle and IEEE products), or with --against path.py:kernel your own kernel:

    \b
      mage-tune compare layernorm --d 768 --against my.py:k \\
          --signature "x:*fp32,N:i32,BLOCK:constexpr" --constexpr BLOCK=1024 --num-warps 4
    """
    from mage_tune.census import census_artifact
    from mage_tune.errors import InputError
    from mage_tune.kernels import get_family
    from mage_tune.triton_ref import compile_reference, compile_user, matmul_config

    user = against != "triton"
    if not user and (signature or constexprs or grid):
        raise InputError("--signature, --constexpr and --grid describe a user kernel: use --against path.py:kernel")
    if settings and best:
        raise InputError("give either --set knobs or --best RUN, not both")
    if family != "matmul" and config_index != "0":
        raise InputError("--config picks one of Triton's matmul configs; the layer norm has one kernel")

    fam = get_family(family)
    shape = fam.shape_from(d=d, m=m, n=n, k=k_)
    items = [f"{key}={value}" for key, value in _best_config(best).items()] if best else list(settings)
    config = fam.parse_settings(items, shape, arch)
    variant = fam.build(config, shape, arch)
    (ours,) = census_artifact(
        variant.artifact, kernel=variant.kernel_name, block=variant.block, param_names=list(variant.param_names)
    )

    if user:
        theirs = [compile_user(against, signature, constexprs, arch, num_warps, grid=_parse_grid(grid))]
    else:
        if family == "matmul":
            chosen = None if config_index == "all" else matmul_config(_index(config_index))
        else:
            chosen = None
        theirs = compile_reference(family, shape, arch, num_warps, chosen, specialize=specialize)

    role = "user" if user else "triton"
    entries = [_entry("ours", variant.kernel_name, variant.config, variant.launch.grid, variant.block, ours)]
    if family == "layernorm":
        entries[0]["passes"] = passes_over_row(ours, "x", shape["d"], int(config["threads"]))
    for tk in theirs:
        (census,) = census_artifact(tk.artifact, kernel=tk.name, block=tk.block, param_names=list(tk.param_names))
        entry = _entry(role, tk.name, tk.config, tk.grid, tk.block, census)
        entry["specialized"] = tk.specialized
        if family == "layernorm" and not user:
            entry["passes"] = passes_over_row(census, "x", int(tk.config["BLOCK"]), tk.block)
        entries.append(entry)

    if as_json:
        click.echo(json.dumps(_json(family, shape, arch, entries), indent=2))
        return
    click.echo(render_comparison(entries, family, multiple=len(theirs) > 1))


# --- pieces -----------------------------------------------------------------------------------------------------
def passes_over_row(census, param: str, row_floats: int, threads_per_row: int) -> dict | None:
    """How many times one thread's loads of `param` cover its share of the row.

    loaded = Σ over the PTX loads attributed to `param` of (width / 32) floats; share = the floats one read of the
    row puts on a thread: ceil(row_floats / (threads_per_row · w)) · w, w the widest load in floats. The count is
    static (instructions in the code), exact where the row loop is unrolled: our templates unroll it (d is a
    compile-time constant) and Triton's norm_kernel has no loop. None when the census attributes no loads to it.
    """
    params = census.ptx.params if census.ptx else None
    acc = (params or {}).get(param)
    if not acc or not acc.loads or not acc.load_bits:
        return None
    loaded = sum(count * bits // 32 for bits, count in acc.load_bits.items())
    widest = max(1, max(acc.load_bits) // 32)
    share = -(-row_floats // (threads_per_row * widest)) * widest
    return {"value": loaded / share, "loaded_floats": loaded, "share_floats": share, "loads": acc.loads}


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


def _index(text: str) -> int:
    from mage_tune.errors import InputError

    try:
        return int(text)
    except ValueError:
        raise InputError(f"--config takes an index or 'all', got {text!r}") from None


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


def _passes_text(passes) -> str:
    if passes is None:
        return "-"
    value = passes["value"]
    shown = f"{value:g}" if value == int(value) else f"{value:.2f}"
    return f"{shown} ({passes['loaded_floats']} of {passes['share_floats']} floats a thread)"


def render_comparison(entries: list[dict], family: str, multiple: bool = False) -> str:
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
        if family == "layernorm":
            head.append(("passes over x", _passes_text(entry.get("passes"))))
        columns.append((header, head + rows(entry["census"])))
    table = render(columns, mark_differences=True)
    if family != "layernorm":
        return table
    import textwrap

    return table + "\n\n" + textwrap.fill(PASSES_NOTE, width=118)


def _json(family: str, shape: dict, arch: str, entries: list[dict]) -> dict:
    kernels = []
    for entry in entries:
        record = {key: value for key, value in entry.items() if key != "census"}
        record["census"] = entry["census"].to_json()
        kernels.append(record)
    return {"schema": "mage-tune.compare/1", "family": family, "shape": shape, "arch": arch, "kernels": kernels}
