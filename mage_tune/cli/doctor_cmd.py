"""`mage-tune doctor`: what the toolchain lookup found, its versions, and the fix for what is missing."""

from __future__ import annotations

import click

from mage_tune.textwidth import table as fit_table
from mage_tune.textwidth import wrap


@click.command()
def doctor():
    """Show NVRTC, ptxas, cuobjdump, nvdisasm, nvcc (optional) and the GPU libraries: where found, version, or how to
    get them."""
    from mage_tune import toolchain
    from mage_tune.errors import ToolchainError

    table = []
    missing = 0
    try:
        table.append(["nvrtc", toolchain.nvrtc_version(), "cuda-bindings", ""])
    except ToolchainError as exc:
        missing += 1
        table.append(["nvrtc", "missing", "", exc.message])
    for name in toolchain.PROGRAMS:
        found = toolchain.candidates(name)
        if not found:
            missing += 1
            table.append([name, "missing", "", toolchain.FIXES[name]])
        for i, tool in enumerate(found):
            origin = tool.origin if i == 0 else f"{tool.origin}; fallback"
            table.append([name if i == 0 else "", tool.version or "?", _shown(tool.path), origin])
    nvcc = toolchain.nvcc()  # optional: NVRTC compiles by default; --compiler nvcc asks for it
    if nvcc is None:
        table.append(["nvcc", "missing", "", "optional (--compiler nvcc): " + toolchain.FIXES["nvcc"]])
    else:
        table.append(["nvcc", nvcc.version or "?", _shown(nvcc.path), f"{nvcc.origin}; optional (--compiler nvcc)"])
    for lib in ("triton", "cupy", "torch", "optuna"):
        table.append([lib, _version(lib), "python package", "" if lib in ("triton", "optuna") else "GPU extra"])
    click.echo(fit_table(table, ["tool", "version", "where", "note"], optional=("note",)))
    click.echo()
    click.echo(_arch_table())
    mode, usable = _mode()
    click.echo("\n" + wrap(mode))
    if missing or not usable:
        raise click.exceptions.Exit(1)


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


def _arch_table() -> str:
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
    headers = ["arch", "cc", "SMs", "warps/SM", "blocks/SM", "smem/block", "ptxas can assemble"]
    return fit_table(rows, headers)


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
