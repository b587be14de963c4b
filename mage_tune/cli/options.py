"""Options every family command shares: the family's shape (`--shape m=4096,d=768`, or `--m/--n/--k/--d` for
dimensions of those names) and the arch. The wrapped command receives them as one `dims` dict."""

from __future__ import annotations

import functools

import click

from mage_tune.arch import DEFAULT_ARCH

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
            dims[key] = int(value)
        except ValueError:
            raise click.BadParameter(f"{key}={value!r} is not an integer", param_hint="--shape") from None
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
                + (", or auto (the GPU's)" if arch_default == "auto" else ""),
            ),
        ]
        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper

    return decorate(func) if func is not None else decorate


def family_and_shape(spec: str, dims: dict):
    """Load the family named by `spec` (name, path or entry point) and check the shape against its dimensions."""
    from mage_tune.kernels import load_family

    family = load_family(spec)
    return family, family.shape_from(dims)
