"""Tuning data as code to deploy (docs/exports.md): what `mage-tune db export --format triton|header` writes.

Both hold, per shape measured on one GPU and arch, what the choice (tuning/choice.py) answers there ("measured
here": the fastest config at that shape still valid for the family as it is), and a function that answers a key
or shape: the exact entry, else the nearest by the choice's distance (Euclidean over log2 of each dimension, ties
to the entry first in the table, which is sorted as the choice sorts shapes). Unlike the choice they do not check
the nearest entry's config against the family's constraints at the new shape (those are Python), and they hold one
GPU's shapes (the choice may answer from another GPU's nearer shape: tuning.db.run_distance): for a shape outside the
table, ask `mage_tune.load(family).choice(shape)` or check the config with `mage-tune space`.

  * triton: a Python module, `CONFIGS = {key tuple: [triton.Config, ...]}` (up to `top` distinct configs per key,
    best first; the key is the shape in the family's dimension order) and `configs_for(*key)`; it imports triton
    alone, never mage-tune or a database.
  * header: a C++17 header for a CUDA family: `ENTRIES[]` (shape, config knob values, grid, block, dynamic shared
    memory, measured time) and `dispatch(dims...)` returning the entry for a shape (host code; NVRTC sees the
    table only, usable in constant expressions).
"""

from __future__ import annotations

import json
import keyword
import math
import re

from mage_tune.arch import Arch
from mage_tune.errors import InputError
from mage_tune.kernels.base import CudaFamily
from mage_tune.kernels.triton_family import LAUNCH_OPTIONS, TritonFamily
from mage_tune.tuning.choice import MEASURED_HERE, TunedKernel, shape_text

# fmt: off
CPP_KEYWORDS = frozenset((
    "alignas", "alignof", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const", "constexpr",
    "continue", "default", "delete", "do", "double", "else", "enum", "explicit", "export", "extern", "false",
    "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept",
    "nullptr", "operator", "private", "protected", "public", "register", "return", "short", "signed", "sizeof",
    "static", "struct", "switch", "template", "this", "throw", "true", "try", "typedef", "typename", "union",
    "unsigned", "using", "virtual", "void", "volatile", "while",
))
# fmt: on


LOCALS = ("mt_i", "mt_e", "mt_s", "mt_t", "mt_best", "mt_best_distance")


def comment_text(text: str) -> str:
    """`text` (a GPU's or family's name, read from records) as words safe inside a comment or a docstring of the
    code an export writes: letters, digits, spaces and plain punctuation kept, anything else (a newline, a quote,
    a backslash, `*/`) as "?". The names themselves are written as string literals (repr, JSON), never as code."""
    return re.sub(r"[^\w .,:;()+=@#%-]", "?", text, flags=re.ASCII)[:200]


def _entries(kernel: TunedKernel, gpu: str, arch: Arch) -> list:
    """(shape, choice) of every shape measured on this GPU and arch whose choice is measured there."""
    out = []
    for shape in kernel.measured_shapes(gpu, arch):
        if set(shape) != set(kernel.family.dims):
            continue  # measured with dimensions the family no longer has
        shape = {d: shape[d] for d in kernel.family.dims}
        picked = kernel.choice(shape, gpu, arch)
        if picked.source == MEASURED_HERE:
            out.append((shape, picked))
    if not out:
        raise InputError(
            f"nothing measured of {kernel.family.name} on {gpu or 'an unnamed GPU'} ({arch}) that the family takes "
            "now: no table to write (`mage-tune db list` shows what is there)"
        )
    return out


# --- triton ---------------------------------------------------------------------------------------------------


def triton_module(kernel: TunedKernel, gpu: str, arch: Arch, top: int = 3) -> tuple[str, int]:
    """The Python module's text and how many keys it holds."""
    family = kernel.family
    if not isinstance(family, TritonFamily):
        raise InputError(f"{family.name} is not a Triton family: --format triton is for one (a CUDA family: header)")
    names = set(family.constexpr_names())
    dims = tuple(family.dims)
    entries = _entries(kernel, gpu, arch)
    lines = [
        f'"""triton.Configs of {comment_text(family.name)} per key on {comment_text(gpu or "an unnamed GPU")}',
        f"({arch}), best first, as measured (`mage-tune db export --format triton`). It imports triton alone: no",
        "mage-tune, no database.",
        "",
        f"    configs_for({', '.join(dims)})   # the list for that key, else for the nearest key",
        "",
        "Nearest: Euclidean distance over log2 of each dimension, ties to the key first in CONFIGS; its configs are",
        'not checked at the new key (mage_tune.load(family).choice(shape) does that)."""',
        "",
        "import math",
        "",
        "import triton",
        "",
        f"FAMILY = {family.origin or family.name!r}",
        f"GPU = {gpu!r}",
        f"ARCH = {arch.name!r}",
        f"KEY = {dims!r}",
        "CONFIGS = {",
    ]
    for shape, picked in entries:
        ranked = kernel.ranked(shape, gpu, arch)[:top]
        assert ranked and ranked[0].config == picked.config  # the choice is the fastest valid config there
        lines.append(f"    {tuple(shape[d] for d in dims)!r}: [")
        for e in ranked:
            kwargs = {k: v for k, v in e.config.items() if k in names}
            options = "".join(f", {k}={e.config[k]!r}" for k in LAUNCH_OPTIONS if k in e.config)
            lines.append(f"        triton.Config({kwargs!r}{options}),  # {e.value:.2f} µs")
        lines.append("    ],")
    lines += [
        "}",
        "",
        "",
        "def nearest_key(*key):",
        '    """`key` where CONFIGS has it, else the nearest key CONFIGS has."""',
        "    key = tuple(key)",
        "    if key in CONFIGS:",
        "        return key",
        "",
        "    def distance(other):",
        "        return sum((math.log2(max(1, a)) - math.log2(max(1, b))) ** 2 for a, b in zip(key, other))",
        "",
        "    return min(CONFIGS, key=distance)",
        "",
        "",
        "def configs_for(*key):",
        '    """The triton.Configs for `key` (the family\'s dimensions, in KEY\'s order), best first."""',
        "    return CONFIGS[nearest_key(*key)]",
    ]
    return "\n".join(lines) + "\n", len(entries)


# --- C++ header -------------------------------------------------------------------------------------------------


def identifier(name: str, taken: set[str]) -> str:
    """A C++ identifier for a knob or dimension name, distinct from those `taken` (which it joins)."""
    ident = re.sub(r"\W", "_", name, flags=re.ASCII) or "_"
    if ident[0].isdigit():
        ident = "k_" + ident
    if ident in CPP_KEYWORDS or keyword.iskeyword(ident) or ident.startswith("__"):
        ident += "_"
    while ident in taken:
        ident += "_"
    taken.add(ident)
    return ident


def _ctype(domain: tuple) -> str:
    if all(isinstance(v, bool) for v in domain):
        return "bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in domain):
        return "long long"
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in domain):
        return "double"
    return "const char*"


def _c_value(value, ctype: str) -> str:
    if ctype == "bool":
        return "true" if value else "false"
    if ctype == "long long":
        return f"{int(value)}LL"
    if ctype == "double":
        return repr(float(value)) if math.isfinite(float(value)) else "0.0"
    return _c_string(str(value))


def _named(name: str, ident: str) -> str:
    return "" if name == ident else f"  // {name}"


def _c_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)  # a JSON string of ASCII is a valid C string literal


def cpp_header(kernel: TunedKernel, gpu: str, arch: Arch) -> tuple[str, int]:
    """The header's text and how many shapes it tables."""
    family = kernel.family
    if not isinstance(family, CudaFamily):
        raise InputError(f"{family.name} is not a CUDA family: --format header is for one (a Triton family: triton)")
    entries = _entries(kernel, gpu, arch)
    taken = set(LOCALS)  # a dimension is a parameter of dispatch: none may be one of its locals
    space = identifier("mage_tune_" + family.name, set())
    dims = [(d, identifier(d, taken)) for d in family.dims]
    taken = set()
    knobs = [(k.name, identifier(k.name, taken), _ctype(k.domain)) for k in family.knobs]
    params = ", ".join(f"long long {c}" for _, c in dims)
    lines = [
        f"// {comment_text(family.name)} on {comment_text(gpu or 'an unnamed GPU')} ({arch}): launch parameters per",
        "// measured shape, the fastest config measured at each (`mage-tune db export --format header`;",
        "// docs/exports.md).",
        f"// dispatch({', '.join(c for _, c in dims)}): the entry of that shape, else of the nearest: Euclidean",
        "// distance over log2 of each dimension, ties to the earlier entry; its config is not checked at the new",
        "// shape, and its grid is for its own shape. Host code; NVRTC sees the table alone (constant expressions).",
        "#pragma once",
        "",
        "#if !defined(__CUDACC_RTC__)",
        "#include <cmath>",
        "#endif",
        "",
        f"namespace {space} {{",
        "",
        "struct Shape {",
        *(f"  long long {c};{_named(d, c)}" for d, c in dims),
        "};",
        "",
        "struct Config {",
        *(f"  {t} {c};{_named(n, c)}" for n, c, t in knobs),
        "};",
        "",
        "struct Entry {",
        "  Shape shape;",
        "  Config config;",
        "  unsigned grid[3];",
        "  unsigned block[3];",
        "  unsigned dynamic_shared;  // bytes",
        "  double time_us;  // measured at this shape",
        "  const char* label;  // the config as knob=value,...",
        "};",
        "",
        f"inline constexpr const char* FAMILY = {_c_string(family.origin or family.name)};",
        f"inline constexpr const char* GPU = {_c_string(gpu)};",
        f"inline constexpr const char* ARCH = {_c_string(arch.name)};",
        f"inline constexpr int COUNT = {len(entries)};",
        "",
        "inline constexpr Entry ENTRIES[COUNT] = {",
    ]
    for shape, picked in entries:
        launch = picked.launch
        shape_c = ", ".join(f"{shape[d]}LL" for d, _ in dims)
        config_c = ", ".join(_c_value(picked.config[n], t) for n, _, t in knobs)
        label = ",".join(f"{k}={v}" for k, v in picked.config.items())
        lines += [
            f"    // {shape_text(shape)}",
            f"    {{{{{shape_c}}}, {{{config_c}}},",
            f"     {{{', '.join(map(str, launch.grid))}}}, {{{', '.join(map(str, launch.block))}}}, "
            f"{launch.dynamic_shared}, {picked.time_us!r}, {_c_string(label)}}},",
        ]
    distance = "\n".join(
        f"    mt_t = std::log2(static_cast<double>({c} < 1 ? 1 : {c}))"
        f" - std::log2(static_cast<double>(mt_e.shape.{c}));\n"
        "    mt_s += mt_t * mt_t;"
        for _, c in dims
    )
    same = " && ".join(f"mt_e.shape.{c} == {c}" for _, c in dims)
    lines += [
        "};",
        "",
        "#if !defined(__CUDACC_RTC__)",
        "// The entry of this shape, else of the nearest (see the top).",
        f"inline const Entry& dispatch({params}) {{",
        "  int mt_best = 0;",
        "  double mt_best_distance = -1.0;",
        "  for (int mt_i = 0; mt_i < COUNT; ++mt_i) {",
        "    const Entry& mt_e = ENTRIES[mt_i];",
        f"    if ({same}) return mt_e;",
        "    double mt_s = 0.0, mt_t = 0.0;",
        distance,
        "    if (mt_best_distance < 0.0 || mt_s < mt_best_distance) {",
        "      mt_best = mt_i;",
        "      mt_best_distance = mt_s;",
        "    }",
        "  }",
        "  return ENTRIES[mt_best];",
        "}",
        "",
        f"inline bool is_exact(const Entry& mt_e, {params}) {{ return {same}; }}",
        "#endif",
        "",
        f"}}  // namespace {space}",
    ]
    return "\n".join(lines) + "\n", len(entries)
