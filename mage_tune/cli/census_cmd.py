"""`mage-tune census PATH | FAMILY`: the census of a file's kernels, or of one variant of a kernel family."""

from __future__ import annotations

import json

import click

from mage_tune.arch import ARCH_NAMES
from mage_tune.cli.options import COMPILER_OPTION_HELP, DEFINE_HELP, INCLUDE_HELP, BlockDims

ARCHS = list(ARCH_NAMES)


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("target")
@click.option(
    "--arch",
    default=None,
    help=f"Target arch ({', '.join(ARCHS)}; '90a' works too). Default: a PTX's .target, a binary's own (each arch of "
    "a fatbinary that holds several; --arch chooses one), else sm_90.",
)
@click.option("--kernel", "kernel", default=None, help="Only this kernel (mangled or demangled name).")
@click.option(
    "--block",
    type=BlockDims(),
    default=None,
    help="The block for occupancy: threads (256), or x·y[·z] as 32x8 or 32x8x2, at most 1024 threads "
    "(default: .reqntid/.maxntid).",
)
@click.option("--compare", "other", default=None, help="A second file: print both side by side, differences marked.")
@click.option("--json", "as_json", is_flag=True, help="Print the versioned JSON records instead of a table.")
@click.option("-I", "--include", "includes", multiple=True, metavar="DIR", help=".cu or family: " + INCLUDE_HELP)
@click.option("-D", "--define", "defines", multiple=True, metavar="NAME[=VALUE]", help=".cu or family: " + DEFINE_HELP)
@click.option(
    "--compiler-option",
    "compiler_options",
    multiple=True,
    metavar="OPT",
    help=".cu or family: " + COMPILER_OPTION_HELP,
)
@click.option("--std", default=None, help=".cu or family: the C++ standard (c++17, c++20; default c++17).")
@click.option(
    "--compiler",
    type=click.Choice(["auto", "nvrtc", "nvcc"]),
    default="auto",
    show_default=True,
    help=".cu: auto is NVRTC, then nvcc (when present) for a source NVRTC cannot take; a family: auto is NVRTC.",
)
@click.option(
    "--ptxas-options",
    default=None,
    help="PTX: options for ptxas, as one string ('-O3 --maxrregcount=128'); a Triton PTX uses its metadata's.",
)
@click.option("--shape", "shape_text", default=None, metavar="DIM=V,...", help="Family variant: its shape.")
@click.option("--d", type=int, default=None, help="Family variant: shorthand for --shape d=V.")
@click.option("--m", type=int, default=None, help="Family variant: shorthand for --shape m=V.")
@click.option("--n", type=int, default=None, help="Family variant: shorthand for --shape n=V.")
@click.option("--k", "k_", type=int, default=None, help="Family variant: shorthand for --shape k=V.")
@click.option("--set", "settings", multiple=True, help="Family variant: knob=value (repeatable).")
def census(
    target,
    arch,
    kernel,
    block,
    other,
    as_json,
    includes,
    defines,
    compiler_options,
    std,
    compiler,
    ptxas_options,
    shape_text,
    d,
    m,
    n,
    k_,
    settings,
):
    """Census TARGET: a .cu, .ptx, .cubin, host object, executable, .fatbin or SASS listing, or a kernel family (a
    built-in name, a family file path/to/family.py[:NAME], an installed plug-in) with --shape and --set knobs.

    Prints registers, shared memory, spills, loads and stores by space and width, cp.async and waits, barriers,
    shuffles, special functions, occupancy and loads in flight, from PTX and from SASS.
    """
    from mage_tune.census import SourceOptions, census_artifact, census_path
    from mage_tune.census.table import render, rows
    from mage_tune.cli.options import compiler_options_of, split_ptxas_options

    # checked here (InputError: one line, exit 2): defines, -I, --std and --compiler reach nvcc, which uses a shell
    options = compiler_options_of(compiler_options)
    source = SourceOptions(
        includes=tuple(includes), defines=tuple(defines), std=std, compiler=compiler, options=options
    )
    inputs = {"source_options": source, "ptxas_options": split_ptxas_options(ptxas_options)}

    if _is_family(target):
        from mage_tune.cli.options import family_arch, parse_shape, with_source_options
        from mage_tune.errors import InputError
        from mage_tune.kernels import load_family

        if kernel:
            raise InputError("--kernel picks a kernel of a file; a family variant has one kernel (use --set)")
        if block:
            raise InputError(
                "--block sets a kernel file's block size; a family variant's comes from its config (--set)"
            )
        if ptxas_options:
            raise InputError("--ptxas-options applies to a PTX file; a family is compiled with --compiler-option")
        given = includes or defines or options or std or compiler != "auto"
        fam = with_source_options(load_family(target), source if given else None)
        dims = {**parse_shape(shape_text), **{k: v for k, v in (("d", d), ("m", m), ("n", n), ("k", k_)) if v}}
        shape = fam.shape_from(dims)
        target_arch = family_arch(fam, arch)  # --arch's name becomes an Arch here, once
        config = fam.parse_settings(settings, shape, target_arch)
        variant = fam.build(config, shape, target_arch)
        found = census_artifact(variant.artifact, block=variant.block, param_names=list(variant.param_names))
    else:
        _exists_or_near_family(target)
        family_only = [
            flag for flag, value in
            (("--set", settings), ("--shape", shape_text), ("--d", d), ("--m", m), ("--n", n), ("--k", k_)) if value
        ]  # fmt: skip
        if family_only:  # a kernel file has no knobs or shape: taking them silently would census something else
            from mage_tune.errors import InputError

            raise InputError(
                f"{', '.join(family_only)} {'chooses' if len(family_only) == 1 else 'choose'} a family's variant; a "
                "kernel file is censused as it is "
                "(-D NAME=VALUE sets its macros)",
                file=target,
            )
        found = census_path(target, arch=arch, kernel=kernel, block=block, **inputs)
    theirs = census_path(other, arch=arch, kernel=kernel, block=block, **inputs) if other else []
    _say_compiler_notes([*found, *theirs])  # on stderr, so a script reading --json's stdout sees only the records
    if as_json:
        records = [c.to_json() for c in (*found, *theirs)]
        click.echo(json.dumps(records[0] if len(records) == 1 else records, indent=2))
        return
    tables = []
    for group in _compared(found, theirs) if other else [found]:
        columns = [(header, rows(c)) for header, c in zip(_headers(group, compare=bool(other)), group, strict=True)]
        tables.append(render(columns, mark_differences=bool(other) and len(group) > 1))
    click.echo("\n\n".join(tables))


def _compared(ours: list, theirs: list) -> list[list]:
    """The kernels of two files side by side: one table where each holds one kernel (whatever their names), else one
    per kernel (and arch), so that each table's marks are the differences of one kernel between the files."""
    if len(ours) == 1 and len(theirs) == 1:
        return [[*ours, *theirs]]
    # by name and arch where both files hold that pair (two fatbinaries), else by name alone
    both = {(c.demangled, c.arch) for c in ours} & {(c.demangled, c.arch) for c in theirs}
    groups: dict[tuple, list] = {}
    for c in (*ours, *theirs):
        groups.setdefault((c.demangled, c.arch if (c.demangled, c.arch) in both else None), []).append(c)
    return list(groups.values())


def _headers(found: list, compare: bool) -> list[str]:
    """Each column's header: the kernel's readable name, with its file under --compare and its arch where the file
    holds that kernel for several archs (a fatbinary)."""
    archs: dict[tuple[str, str], set[str]] = {}
    for c in found:
        archs.setdefault((c.source, c.demangled), set()).add(c.arch)
    headers = []
    for c in found:
        tags = [c.source] if compare else []
        if len(archs[c.source, c.demangled]) > 1:
            tags.append(c.arch)
        headers.append(f"{c.demangled} ({', '.join(tags)})" if tags else c.demangled)
    return headers


def _say_compiler_notes(found: list) -> None:
    """Which compiler ran, and why, when NVRTC rejected a .cu and nvcc compiled it, and which target a .cu without
    --arch was compiled for where that matters: once a file, on stderr."""
    from mage_tune.compile import compiler_notes

    for note in dict.fromkeys(note for c in found for note in compiler_notes(c.notes)):
        click.echo(f"mage-tune: note: {note}", err=True)


def _exists_or_near_family(target: str) -> None:
    """A missing bare word may be a misspelt family: say which, beside the files near it."""
    from pathlib import Path

    from mage_tune.errors import InputError
    from mage_tune.inputs import did_you_mean
    from mage_tune.kernels import known_names

    path = Path(target)
    if not path.exists() and not path.is_symlink():
        hint = did_you_mean(path, tuple(known_names()), "the family ")
        raise InputError(f"cannot read: No such file or directory{hint}", file=target)


def _is_family(target: str) -> bool:
    """A family's name, or a Python family file (path.py or path.py:NAME); anything else is a kernel file."""
    from mage_tune.kernels import known_names

    return target in known_names() or target.endswith(".py") or ".py:" in target
