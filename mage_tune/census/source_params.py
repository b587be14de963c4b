"""A CUDA kernel's parameter names, read from its definition in the source: PTX keeps only `kernel_param_N`, so the
census names a parameter's loads and stores by what the author called it where the source says so for sure."""

from __future__ import annotations

import re

from mage_tune.ptx_parts import blanked

# Words that end a parameter's type, never its name: a parameter written without a name (`int`, `const float *`,
# as an explicit instantiation writes them) has no name to give.
# fmt: off
_TYPE_WORDS = frozenset((
    "void", "bool", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "const", "volatile",
    "restrict", "__restrict__", "__restrict", "struct", "class", "enum", "typename", "auto", "size_t", "half",
    "__half", "__nv_bfloat16", "float2", "float4", "int2", "int4",
))
# fmt: on


def source_param_names(source: str | None, kernel: str, count: int) -> list[str]:
    """Parameter names of `kernel` (its readable name, `ns::k<64, 8>` or `k`) from the one __global__ definition
    of that name in the CUDA source (PTX keeps only `k_param_N`); [] where the source does not say them for sure:
    no definition or several that differ, a parameter without a name, or not `count` of them (a pack, a default)."""
    if not source:
        return []
    base = re.sub(r"<.*", "", kernel).split("(")[0].split("::")[-1].strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", base):
        return []
    text = blanked(source)  # comments and strings as spaces: no word or parenthesis in them counts
    found = set()
    for m in re.finditer(r"\b" + re.escape(base) + r"\s*(?:<[^;{}()]*>\s*)?\(", text):
        since = max(text.rfind(";", 0, m.start()), text.rfind("}", 0, m.start()), text.rfind("{", 0, m.start()))
        if "__global__" not in text[since + 1 : m.start()]:
            continue  # a call or a host function of that name
        close = _closing(text, m.end() - 1)
        if close < 0 or not text[close + 1 :].lstrip().startswith("{"):
            continue  # a declaration or an explicit instantiation: its parameters may have no names
        found.add(tuple(_param_name(p) for p in _top_level_split(text[m.end() : close])))
    if len(found) != 1:
        return []
    names = list(found.pop())
    if len(names) != count or "" in names or len(set(names)) != len(names):
        return []
    return names


def _closing(text: str, open_at: int) -> int:
    """The index of the parenthesis that closes the one at `open_at`, or -1."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def _top_level_split(params: str) -> list[str]:
    """A parameter list split at its own commas, not those inside <...>, (...) or [...]."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(params):
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(params[start:i])
            start = i + 1
    last = params[start:]
    return [*parts, last] if last.strip() or parts else []


def _param_name(param: str) -> str:
    """The name one parameter declares ("" where it declares none): its last word outside <...> and brackets."""
    plain = re.sub(r"<[^<>]*>", " ", param.split("=")[0])
    plain = re.sub(r"\[[^\]]*\]", " ", plain)
    words = re.findall(r"[A-Za-z_]\w*", plain)
    return words[-1] if len(words) >= 2 and words[-1] not in _TYPE_WORDS else ""
