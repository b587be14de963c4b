"""Our variant of a family and a Triton kernel, censused side by side offline (no GPU): what `mage-tune compare`
prints, as a Python API.

    >>> import mage_tune
    >>> result = mage_tune.compare("layernorm", {"m": 4096, "d": 768}, settings=["threads=128"])
    >>> print(result.table())            # one row per property, ≠ where the kernels differ
    >>> result.kernels[1].census.sass.global_loads   # Triton's side, a Census
    >>> result.to_json()                 # schema mage-tune.compare/1
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from mage_tune.arch import DEFAULT_ARCH, Arch, get_arch
from mage_tune.census import census_artifact
from mage_tune.census.model import Census
from mage_tune.census.table import render, rows
from mage_tune.errors import InputError
from mage_tune.kernels.base import CompareFact, Family, block_json, block_text
from mage_tune.kernels.registry import load_family
from mage_tune.triton_ref import compile_user

SCHEMA = "mage-tune.compare/1"


@dataclass(frozen=True)
class ComparedKernel:
    role: str  # "ours", "triton" (the family's reference) or "user" (a kernel given by path)
    kernel: str
    config: dict
    grid: tuple[int, int, int] | None
    block: int | tuple[int, int, int]
    census: Census
    facts: tuple[CompareFact, ...] = ()
    specialized: bool | None = None  # Triton kernels: compiled as the JIT launches them for this shape


@dataclass(frozen=True)
class Comparison:
    family: str
    shape: dict
    arch: str  # the arch's name, as the record keeps it
    kernels: tuple[ComparedKernel, ...]
    note: str = field(default="", compare=False)

    def table(self) -> str:
        return render_comparison(self.kernels, self.note, multiple=len(self.kernels) > 2)

    def to_json(self) -> dict:
        out = []
        for k in self.kernels:
            record = {
                "role": k.role,
                "kernel": k.kernel,
                "config": dict(k.config),
                "grid": list(k.grid) if k.grid else None,
                "block": k.block if isinstance(k.block, int) else block_json(k.block),
            }
            if k.specialized is not None:
                record["specialized"] = k.specialized
            record.update({fact.key: fact.value for fact in k.facts})
            record["census"] = k.census.to_json()
            out.append(record)
        return {"schema": SCHEMA, "family": self.family, "shape": self.shape, "arch": self.arch, "kernels": out}


def compare(
    family: str | Family,
    shape: dict | None = None,
    *,
    arch: str | Arch = DEFAULT_ARCH,
    settings: list[str] | tuple[str, ...] = (),
    best: str | None = None,
    against: str = "triton",
    num_warps: int | None = None,
    config_index: str | int = "0",
    specialize: bool = True,
    signature: str | None = None,
    constexprs: list[str] | tuple[str, ...] = (),
    grid: tuple[int, int, int] | None = None,
) -> Comparison:
    """Census our variant (the family's defaults, `settings` as knob=value strings, or the best config of the search
    run `best`) beside the family's Triton reference (`against="triton"`), or a user's `path.py:kernel` described
    by `signature`, `constexprs` and `grid`. A family is a name, a family file or an entry point, or a Family."""
    fam = family if isinstance(family, Family) else load_family(family)
    shape = fam.shape_from(shape or {})
    config_index = str(config_index)
    user = against != "triton"
    if not user and (signature or constexprs or grid):
        raise InputError("--signature, --constexpr and --grid describe a user kernel: use --against path.py:kernel")
    if settings and best:
        raise InputError("give either --set knobs or --best RUN, not both")
    reference_configs = fam.reference_configs()
    if not reference_configs and config_index != "0":
        raise InputError(f"--config picks one of the reference's configs; {fam.name}'s reference has one kernel")
    items = [f"{key}={value}" for key, value in best_config(best).items()] if best else list(settings)
    arch = get_arch(arch)  # the caller's arch name becomes an Arch here, once
    config = fam.parse_settings(items, shape, arch)
    variant = fam.build(config, shape, arch)
    (ours,) = census_artifact(
        variant.artifact, kernel=variant.kernel_name, block=variant.block, param_names=list(variant.param_names)
    )
    if user:
        theirs = [compile_user(against, signature, list(constexprs), arch, num_warps, grid=grid)]
    else:
        chosen = _pick(reference_configs, config_index) if reference_configs and config_index != "all" else None
        theirs = fam.reference_kernels(shape, arch, specialize=specialize, num_warps=num_warps, config=chosen)
        if not theirs:
            raise InputError(f"{fam.name} names no Triton reference kernel; compare with --against path.py:kernel")
    kernels = [
        ComparedKernel(
            "ours",
            variant.kernel_name,
            dict(variant.config),
            tuple(variant.launch.grid),
            variant.block,
            ours,
            tuple(fam.compare_facts(ours, variant.config, shape, reference=False)),
        )
    ]
    for tk in theirs:
        (census,) = census_artifact(tk.artifact, kernel=tk.name, block=tk.block, param_names=list(tk.param_names))
        facts = () if user else tuple(fam.compare_facts(census, tk.config, shape, reference=True))
        grid_of = tuple(tk.grid) if tk.grid else None
        role = "user" if user else "triton"
        kernels.append(ComparedKernel(role, tk.name, dict(tk.config), grid_of, tk.block, census, facts, tk.specialized))
    return Comparison(fam.name, dict(shape), arch.name, tuple(kernels), fam.compare_note)


def best_config(run: str) -> dict:
    """The best config of a search run: RUN/best.json, RUN/best/best.json, or that JSON file itself."""
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
    try:
        index = int(text)
    except ValueError:
        raise InputError(f"--config takes an index or 'all', got {text!r}") from None
    if not 0 <= index < len(configs):
        raise InputError(f"reference config {index} does not exist; 0..{len(configs) - 1}")
    return configs[index]


def parse_grid(text: str | None) -> tuple[int, int, int] | None:
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
    block = block if isinstance(block, int) else block_text(block)
    if not grid:
        return f"? × {block}"
    shown = str(grid[0]) if list(grid[1:]) == [1, 1] else f"({block_text(tuple(grid))})"  # one token: (16×16)
    return f"{shown} × {block}"


def _config_text(kernel: ComparedKernel) -> str:
    text = " ".join(f"{k}={v}" for k, v in kernel.config.items())
    if kernel.role == "triton":
        text += " (as launched)" if kernel.specialized else " (unspecialized)"
    return text


def render_comparison(kernels, note: str = "", multiple: bool = False) -> str:
    columns = []
    for i, k in enumerate(kernels):
        header = f"{k.role}: {k.kernel}"
        if multiple and k.role != "ours":
            header += f" #{i - 1}"
        head = [("config", _config_text(k)), ("grid × block", _grid_text(k.grid, k.block))]
        facts = [(fact.label, fact.text) for fact in k.facts]
        columns.append((header, head + facts + rows(k.census)))
    table = render(columns, mark_differences=True)
    if not note:
        return table

    return table + "\n\n" + textwrap.fill(note, width=100)
