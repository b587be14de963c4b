"""Kernel names: demangled with their template arguments (`reduce6<256u>`), and `--kernel` matched exactly.

Demangling goes through `c++filt -p` (binutils; `cu++filt` from a CUDA toolkit works the same) in one batch; where
neither is installed a small built-in reader keeps the qualified name without template arguments.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from mage_tune.errors import InputError


def _builtin(name: str) -> str:
    """The qualified function name inside an Itanium-mangled symbol (`_Z6kernelPfi` -> `kernel`), no template args."""
    if not name.startswith("_Z"):
        return name
    rest = name[2:]
    nested = rest.startswith("N")
    if nested:
        rest = rest[1:]
    parts = []
    while rest and rest[0].isdigit():
        digits = re.match(r"\d+", rest).group(0)
        size = int(digits)
        parts.append(rest[len(digits) : len(digits) + size])
        rest = rest[len(digits) + size :]
        if not nested:
            break
    return "::".join(parts) if parts else name


@functools.cache
def _filter() -> str | None:
    return shutil.which("cu++filt") or shutil.which("c++filt")


@functools.lru_cache(maxsize=4096)
def _run_filter(names: tuple[str, ...], params: bool) -> tuple[str, ...] | None:
    tool = _filter()
    if tool is None:
        return None
    args = [tool] if params else [tool, "-p"]
    try:
        run = subprocess.run(args, input="\n".join(names) + "\n", capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    out = run.stdout.splitlines()
    return tuple(out) if run.returncode == 0 and len(out) == len(names) else None


def demangle_all(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Mangled name -> readable name with template arguments; overloads that would read the same keep their
    parameter lists (`kernel(float*)`, `kernel(int*)`). Plain C names come back unchanged."""
    mangled = tuple(n for n in dict.fromkeys(names) if n.startswith("_Z"))
    out = {n: n for n in names}
    if not mangled:
        return out
    short = _run_filter(mangled, False)
    if short is None:
        out.update({n: _builtin(n) for n in mangled})
        return out
    out.update(dict(zip(mangled, short, strict=True)))
    seen: dict[str, int] = {}
    for n in names:
        seen[out[n]] = seen.get(out[n], 0) + 1
    clashing = tuple(n for n in mangled if seen[out[n]] > 1)
    if clashing:
        full = _run_filter(clashing, True) or clashing
        out.update({n: re.sub(r"^void ", "", f) for n, f in zip(clashing, full, strict=True)})
    return out


def demangle(name: str) -> str:
    return demangle_all([name])[name]


def ordered(names: list[str], demangled: dict[str, str]) -> list[str]:
    """The one kernel order of every view and input kind: by readable name, then by symbol."""
    return sorted(dict.fromkeys(names), key=lambda n: (demangled.get(n, n), n))


def _unqualified(name: str) -> str:
    """`ns::foo<ns::T>` -> `foo<ns::T>`: namespaces off the function, template arguments kept."""
    depth, cut = 0, 0
    for i, ch in enumerate(name):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and name.startswith("::", i):
            cut = i + 2
    return name[cut:]


def select(wanted: str, names: list[str], demangled: dict[str, str], label: str) -> list[str]:
    """The kernel `wanted` names: its symbol, its full readable name, its name without namespaces, or an
    unambiguous prefix of either. No match, or more than one, is an InputError listing the candidates."""
    exact = [n for n in names if wanted in (n, demangled[n], _unqualified(demangled[n]))]
    # `scale` for the one instantiation `scale<4>`; with `reduce6<256u>` and `reduce6<512u>`, or the overloads
    # `fill(float*, float)` and `fill(double*, double)`, it is ambiguous.
    bare = [n for n in names if wanted == re.sub(r"[<(].*", "", _unqualified(demangled[n]))]
    found = exact or bare or [n for n in names if n.startswith(wanted) or demangled[n].startswith(wanted)]
    if len(found) == 1:
        return found
    listing = ", ".join(f"{demangled[n]} ({n})" if demangled[n] != n else n for n in (found or names))
    if not found:
        raise InputError(f"no kernel named {wanted!r}; kernels here: {listing}", file=label)
    raise InputError(f"{wanted!r} matches {len(found)} kernels: {listing}; give the full name", file=label)
