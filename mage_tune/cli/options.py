"""Options every family command shares: the family's shape (`--shape m=4096,d=768`, or `--m/--n/--k/--d` for
dimensions of those names) and the arch, which the wrapped command receives as one `dims` dict; and, for the
commands that build variants, how a CUDA family compiles (-I, -D, --compiler-option), received as `source_options`."""

from __future__ import annotations

import functools
import re

import click
from click.core import ParameterSource

from mage_tune.arch import DEFAULT_ARCH, Arch, get_arch

SHORT_DIMS = ("m", "n", "k", "d")


def parse_shape(text: str | None) -> dict[str, int]:
    """`m=4096,d=768` -> {"m": 4096, "d": 768}."""
    dims: dict[str, int] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key.isidentifier():
            raise click.BadParameter(f"expected name=value,..., got {item.strip()!r}", param_hint="--shape")
        try:
            number = int(value)
        except ValueError:
            raise click.BadParameter(f"{key}={value!r} is not an integer", param_hint="--shape") from None
        if key in dims and dims[key] != number:
            raise click.BadParameter(f"{key} is given twice ({dims[key]} and {number})", param_hint="--shape")
        dims[key] = number
    return dims


def split_ptxas_options(text: str | None) -> tuple[str, ...] | None:
    """`--ptxas-options '-O3 --maxrregcount=128'` -> ("-O3", "--maxrregcount=128"), split as a shell would (never
    run by one); None when not given. An unmatched quote or a trailing backslash is an InputError naming the option."""
    import shlex

    from mage_tune.errors import InputError

    if not text:
        return None
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise InputError(f"--ptxas-options {text!r}: {str(exc).lower()} (quote each option whole)") from None


MAX_BLOCK_THREADS = 1024  # CUDA's most threads per block, on every arch mage-tune knows
MAX_BLOCK_Z = 64  # CUDA's largest z dimension of a block


class BlockDims(click.ParamType):
    """A block as `256`, `32x8` or `32x8x2` -> (x, y, z): each at least 1, z at most 64, at most 1024 threads."""

    name = "block"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        parts = str(value).strip().lower().replace("×", "x").split("x")
        if not 1 <= len(parts) <= 3 or not all(re.fullmatch(r"\s*-?\d+\s*", p) for p in parts):
            self.fail(f"{value!r}: expected threads per block (256), or x·y[·z] as 32x8 or 32x8x2", param, ctx)
        dims = (*(int(p) for p in parts), 1, 1)[:3]
        if min(dims) < 1:
            self.fail(f"{value!r}: every dimension is at least 1", param, ctx)
        if dims[2] > MAX_BLOCK_Z:
            self.fail(f"{value!r}: a block's z is at most {MAX_BLOCK_Z}", param, ctx)
        threads = dims[0] * dims[1] * dims[2]
        if threads > MAX_BLOCK_THREADS:
            self.fail(f"{value!r} is {threads} threads; a block has at most {MAX_BLOCK_THREADS}", param, ctx)
        return dims


def family_options(func=None, *, arch_default: str = DEFAULT_ARCH):
    """Adds --shape, --m, --n, --k, --d and --arch; the command gets `dims` (what was given) and `arch`."""

    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            dims = parse_shape(kwargs.pop("shape_text"))
            for name in SHORT_DIMS:
                value = kwargs.pop(f"dim_{name}")
                if value is not None:
                    if name in dims and dims[name] != value:
                        raise click.BadParameter(f"--{name} {value} contradicts --shape {name}={dims[name]}")
                    dims[name] = value
            return f(*args, dims=dims, **kwargs)

        options = [
            click.option(
                "--shape",
                "shape_text",
                default=None,
                metavar="DIM=V,...",
                help="The problem shape in the family's dimensions (see `mage-tune space FAMILY`), e.g. m=4096,d=768.",
            ),
            *(
                click.option(
                    f"--{name}", f"dim_{name}", type=int, default=None, help=f"Shorthand for --shape {name}=V."
                )
                for name in SHORT_DIMS
            ),
            click.option(
                "--arch",
                default=arch_default,
                show_default=True,
                help="Target arch, e.g. sm_80, sm_89, sm_90"
                + (
                    ", or auto (the GPU's)"
                    if arch_default == "auto"
                    else "; left at the default, the family's own target there (sm_90a for a Hopper-only family)"
                ),
            ),
        ]
        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper

    return decorate(func) if func is not None else decorate


def family_arch(family, name: str | None) -> Arch:
    """--arch as an Arch for `family`: where the option was left at its default (sm_90), the family's own target on
    that arch, as a search on such a GPU builds it (an sm_90a-only family, matmul-bf16, means sm_90a); a name given
    on the command line is taken as it is."""
    ctx = click.get_current_context(silent=True)
    given = ctx is not None and name is not None and ctx.get_parameter_source("arch") != ParameterSource.DEFAULT
    return get_arch(name) if given else family.default_target()


INCLUDE_HELP = "An include folder searched for the kernel's #include files (repeatable)."
DEFINE_HELP = "A macro, NAME or NAME=VALUE (repeatable); VALUE of letters, digits, space and _.+-*/%:[]() only."
COMPILER_OPTION_HELP = (
    "A compiler option (repeatable), one of --use_fast_math, -ftz=, -prec-div=, -prec-sqrt=, -fmad= (true or "
    "false), -maxrregcount=N, -lineinfo, --extra-device-vectorization, --restrict, -G, -rdc=true."
)


def compiler_options_of(given) -> tuple[str, ...]:
    """The --compiler-option values, each checked against compile.ALLOWED_OPTIONS (InputError naming a bad one);
    a value of several options ('-ftz=true --use_fast_math') is split at spaces, which no allowed option holds."""
    from mage_tune.compile import check_option

    return tuple(check_option(option) for text in given for option in text.split())


def check_includes(given) -> tuple[str, ...]:
    """The -I folders, each an existing folder: said once here, not by every variant's compile (a search's trials)."""
    from pathlib import Path

    from mage_tune.errors import InputError

    for folder in given:
        if not Path(folder).is_dir():
            raise InputError(f"-I {folder}: no such folder")
    return tuple(given)


def compile_options(f):
    """Adds -I/--include, -D/--define and --compiler-option; the command gets `source_options`: a SourceOptions, or
    None when none was given (the family builds as it declares)."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        from mage_tune.compile import SourceOptions

        includes, defines = check_includes(kwargs.pop("includes")), tuple(kwargs.pop("defines"))
        options = compiler_options_of(kwargs.pop("compiler_options"))
        given = includes or defines or options
        source = SourceOptions(includes=includes, defines=defines, options=options) if given else None
        return f(*args, source_options=source, **kwargs)

    for option in reversed(
        (
            click.option("-I", "--include", "includes", multiple=True, metavar="DIR", help=INCLUDE_HELP),
            click.option("-D", "--define", "defines", multiple=True, metavar="NAME[=VALUE]", help=DEFINE_HELP),
            click.option(
                "--compiler-option", "compiler_options", multiple=True, metavar="OPT", help=COMPILER_OPTION_HELP
            ),
        )
    ):
        wrapper = option(wrapper)
    return wrapper


def with_source_options(family, source):
    """`family` building with the command line's -I, -D and compiler options (`source`, a SourceOptions or None);
    InputError for a family that does not compile CUDA (a Triton family: Triton compiles its kernel itself)."""
    from mage_tune.errors import InputError
    from mage_tune.kernels.base import CudaFamily
    from mage_tune.kernels.triton_family import TritonFamily

    if source is None:
        return family
    if not isinstance(family, CudaFamily):
        given = [
            flag
            for flag, value in (
                ("-I", source.includes),
                ("-D", source.defines),
                ("--compiler-option", source.options),
                ("--std", source.std),
                ("--compiler", source.compiler != "auto"),
            )
            if value
        ]
        kind = "a Triton family: Triton compiles its kernel itself" if isinstance(family, TritonFamily) else None
        raise InputError(
            f"{', '.join(given)}: only a CUDA family is compiled with them; {family.name} is "
            + (kind or f"a {type(family).__name__}, which is not a CudaFamily")
        )
    return family.with_source_options(source)


def family_and_shape(spec: str, dims: dict, source=None):
    """Load the family named by `spec` (name, path or entry point), building with `source` (the command line's
    -I, -D and compiler options, or None), and check the shape against its dimensions."""
    from mage_tune.kernels import load_family

    family = with_source_options(load_family(spec), source)
    return family, family.shape_from(dims)
