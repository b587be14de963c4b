"""`mage-tune doctor`: what the toolchain lookup found, its versions, and the fix for what is missing."""

from __future__ import annotations

import click


@click.command()
def doctor():
    """Show NVRTC, ptxas, cuobjdump, nvdisasm and the GPU libraries: where found, version, or how to get them."""
    from tabulate import tabulate

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
            table.append(
                [
                    name if i == 0 else "",
                    tool.version or "?",
                    f"{tool.path} [{tool.origin}]",
                    "" if i == 0 else "fallback",
                ]
            )
    for lib in ("triton", "cupy", "torch", "optuna"):
        table.append([lib, _version(lib), "python package", "" if lib in ("triton", "optuna") else "GPU extra"])
    click.echo(tabulate(table, headers=["tool", "version", "where", "note"], tablefmt="simple"))
    if missing:
        raise click.exceptions.Exit(1)


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
