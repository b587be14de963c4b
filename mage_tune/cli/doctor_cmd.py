"""`mage-tune doctor`: what the toolchain lookup found, its versions, and the fix for what is missing."""

from __future__ import annotations

import click

from mage_tune.textwidth import table as fit_table
from mage_tune.textwidth import wrap


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema mage-tune.doctor/1) instead of tables.")
def doctor(as_json):
    """Show NVRTC, ptxas, cuobjdump, nvdisasm, nvcc (optional) and the GPU libraries: where found, version, or how to
    get them. Exit 1 where a required tool is missing or a GPU is here but cannot be used."""
    import json

    tools = _tools()
    mode, usable = _mode()
    missing = any(t["version"] == "missing" and t["required"] for t in tools)
    if as_json:
        archs = [{"arch": row[0], "cc": row[1], "assemblable": row[-1] == "yes"} for row in _arch_rows()]
        out = {"schema": "mage-tune.doctor/1", "tools": tools, "archs": archs, "mode": mode, "usable": usable}
        click.echo(json.dumps(out, indent=1))
    else:
        table = [
            [t["tool"] if t["first"] else "", t["version"], _shown(t["path"]) if t["path"] else t["where"], t["note"]]
            for t in tools
        ]
        click.echo(fit_table(table, ["tool", "version", "where", "note"], optional=("note",)))
        click.echo()
        headers = ["arch", "cc", "SMs", "warps/SM", "blocks/SM", "smem/block", "ptxas can assemble"]
        click.echo(fit_table(_arch_rows(), headers))
        click.echo("\n" + wrap(mode))
    if missing or not usable:
        raise click.exceptions.Exit(1)


def _tools() -> list[dict]:
    """Each tool found (a program's fallbacks after it, first False), or missing with its fix in the note."""
    from mage_tune import toolchain
    from mage_tune.errors import ToolchainError

    def tool(name, version, path="", where="", note="", first=True, required=True):
        return {"tool": name, "version": version, "path": path, "where": where, "note": note, "first": first,
                "required": required}  # fmt: skip

    tools = []
    try:
        tools.append(tool("nvrtc", toolchain.nvrtc_version(), where="cuda-bindings"))
    except ToolchainError as exc:
        tools.append(tool("nvrtc", "missing", note=exc.message))
    for name in toolchain.PROGRAMS:
        found = toolchain.candidates(name)
        if not found:
            tools.append(tool(name, "missing", note=toolchain.FIXES[name]))
        for i, found_tool in enumerate(found):
            origin = found_tool.origin if i == 0 else f"{found_tool.origin}; fallback"
            tools.append(tool(name, found_tool.version or "?", found_tool.path, note=origin, first=i == 0))
    nvcc = toolchain.nvcc()  # optional: NVRTC compiles by default; --compiler nvcc asks for it
    if nvcc is None:
        note = "optional (--compiler nvcc): " + toolchain.FIXES["nvcc"]
        tools.append(tool("nvcc", "missing", note=note, required=False))
    else:
        note = f"{nvcc.origin}; optional (--compiler nvcc)"
        tools.append(tool("nvcc", nvcc.version or "?", nvcc.path, note=note, required=False))
    for lib in ("triton", "cupy", "torch", "optuna"):
        note = "" if lib in ("triton", "optuna") else "GPU extra"
        tools.append(tool(lib, _version(lib), where="python package", note=note, required=False))
    return tools


def _shown(path: str) -> str:
    """A path as the table shows it: a Python package's from `site-packages/`, one under the home folder from `~`,
    so that the longest (Triton's bundled tools) fits a 100-column table whole."""
    import site
    from pathlib import Path

    for root in sorted({*site.getsitepackages(), site.getusersitepackages()}, key=len, reverse=True):
        if path.startswith(root.rstrip("/") + "/"):
            return str(Path("site-packages") / Path(path).relative_to(root))
    home = str(Path.home())
    return "~" + path[len(home) :] if path.startswith(home + "/") else path


def _mode() -> tuple[str, bool]:
    """Which mode search and bench run in here, and why; (line, False) where a GPU is here but cannot be used."""
    from mage_tune.errors import NoDeviceError
    from mage_tune.measure.device import gpu_mode

    try:
        mode, why = gpu_mode()
    except NoDeviceError as exc:
        return f"mode: none: {exc}", False
    if mode == "measured":
        return f"mode: measured: search and bench time kernels on {why}", True
    return f"mode: static: search scores with the census model and bench refuses: {why}", True


def _arch_rows() -> list[list]:
    """One row per arch mage-tune knows: its limits, and whether a ptxas found here can assemble it (SASS view)."""
    from mage_tune.arch import ARCHS, assemblable

    rows = []
    for arch in ARCHS.values():
        ok = assemblable(arch)
        rows.append(
            [
                arch.name,
                f"{arch.capability[0]}.{arch.capability[1]}",
                arch.sm_count or "-",
                arch.max_warps_per_sm,
                arch.max_blocks_per_sm,
                f"{arch.smem_per_block_optin // 1024} KB",
                "yes" if ok else "no: PTX view only (needs a newer ptxas)",
            ]
        )
    return rows


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        if package == "cupy":
            for name in ("cupy-cuda13x", "cupy-cuda12x"):
                try:
                    return version(name)
                except PackageNotFoundError:
                    pass
        return "not installed"
