"""Output that fits a terminal: every command prints within `columns()` (100, or the terminal's width when it is
wider; no limit with `--wide`). Tables wrap their widest cells to fit, long lines wrap with a hanging indent, and a
config is shown as the knobs that differ from its family's defaults."""

from __future__ import annotations

import shutil
import textwrap

from tabulate import tabulate

DEFAULT_COLUMNS = 100
_wide = False


def set_wide(value: bool) -> None:
    """`--wide`: print everything at full width (set by every command's --wide option, see cli/__init__.py)."""
    global _wide
    _wide = bool(value)


def columns() -> int | None:
    """The width to fit, None for no limit: 100 columns, or the terminal's (or $COLUMNS) when wider."""
    if _wide:
        return None
    return max(DEFAULT_COLUMNS, shutil.get_terminal_size((DEFAULT_COLUMNS, 24)).columns)


def wrap(text: str, width: int | None = None, indent: int = 4) -> str:
    """Each line longer than the width wrapped at spaces; continuation lines indented `indent` more than the line."""
    width = columns() if width is None else width
    if width is None:
        return text
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(
            line.strip(),
            width=width,
            initial_indent=lead,
            subsequent_indent=lead + " " * indent,
            break_on_hyphens=False,
        )
    return "\n".join(out)


def _cell_width(value) -> int:
    return max((len(line) for line in str(value).splitlines()), default=0)


def _cell_lines(value, width: int) -> list[str]:
    """A cell's text in lines of at most `width`: wrapped at spaces and after commas, long words cut."""
    out = []
    for line in str(value).splitlines() or [""]:
        if len(line) <= width:
            out.append(line)
        else:
            out += textwrap.wrap(line.replace(",", ", "), width=width, break_on_hyphens=False) or [""]
    return out


def _plain(rows: list[list], headers: list[str], widths: list[int]) -> str:
    lines = []
    for n, row in enumerate([headers, *rows]):
        cells = [_cell_lines(v, w) for v, w in zip(row, widths, strict=True)]
        for k in range(max(len(c) for c in cells)):
            lines.append("  ".join((c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths, strict=True)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def table(rows: list[list], headers: list[str], tablefmt: str = "simple", fit: bool = True) -> str:
    """A table: with `fit`, plain columns two spaces apart where the widest column wraps (cells on several lines),
    then the next widest, until it fits `columns()` or every column is down to 6 characters; without, tabulate's
    `tablefmt` at full width (Markdown: "github")."""
    width = columns() if fit else None
    if width is None:
        return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)
    full = [max(_cell_width(v) for v in col) for col in zip(headers, *rows, strict=True)]
    # Headers wrap at their spaces before any cell does.
    words = [max(len(w) for w in str(h).split() or [""]) for h in headers]
    widths = [max([w] + [_cell_width(r[i]) for r in rows]) for i, w in enumerate(words)]
    while sum(widths) + 2 * (len(widths) - 1) > width:
        i = max(range(len(widths)), key=lambda j: widths[j])
        if widths[i] <= 6:
            break
        excess = sum(widths) + 2 * (len(widths) - 1) - width
        second = max((w for j, w in enumerate(widths) if j != i), default=0)
        widths[i] = max(6, min(widths[i] - 1, max(second, widths[i] - excess)))
    for i in sorted(range(len(widths)), key=lambda j: widths[j] - full[j]):  # room left: the most wrapped first
        widths[i] += max(0, min(full[i] - widths[i], width - sum(widths) - 2 * (len(widths) - 1)))
    return _plain(rows, headers, widths)


def constant_columns(rows: list[list], headers: list[str], keep: int = 3) -> tuple[list[list], list[str], str]:
    """Columns (after the first `keep`) where every row holds the same value, taken out of the table and said once:
    (rows, headers, "same in every row: name value, ...") ("" where none is)."""
    same = [i for i in range(keep, len(headers)) if len({str(r[i]) for r in rows}) == 1] if len(rows) > 1 else []
    note = ", ".join(f"{headers[i]} {rows[0][i]}" for i in same)
    cut = [i for i in range(len(headers)) if i not in same]
    return (
        [[r[i] for i in cut] for r in rows],
        [headers[i] for i in cut],
        (f"same in every row: {note}" if note else ""),
    )


def short_config(defaults: dict, config: dict) -> str:
    """The knobs of `config` that differ from `defaults` ("defaults" where none does); every knob where the
    defaults are not known (a record of a family file that carries none)."""
    differ = [f"{k}={v}" for k, v in config.items() if defaults.get(k, object()) != v]
    return ",".join(differ) or "defaults"
