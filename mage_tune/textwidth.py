"""Output that fits a terminal: every command prints within `columns()` (100, or the terminal's width when it is
wider; no limit with `--wide`). Tables wrap their widest cells to fit, long lines wrap with a hanging indent, and a
config is shown as the knobs that differ from its family's defaults."""

from __future__ import annotations

import re
import shutil

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
    """Each line longer than the width wrapped at spaces; continuation lines indented `indent` more than the line. A
    word longer than a line breaks after a comma where it has one (a config's knob=value items stay whole)."""
    width = columns() if width is None else width
    if width is None:
        return text
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" ")))
        out += _fill(line, width, lead, lead + " " * indent, whole_words=True)
    return "\n".join(out)


def _fill(line: str, width: int, lead: str = "", more: str = "", whole_words: bool = False) -> list[str]:
    """`line` on lines of at most `width` (`lead` before the first, `more` before the rest), broken at spaces and
    after commas, so "a=1,b=2" may end a line at "a=1," but never splits "a=1" (`whole_words`: a word breaks at its
    commas only where it is longer than a line). Only a piece longer than a whole line is cut."""
    pieces = []
    for word in line.split():
        parts = [word] if whole_words and len(word) <= width - len(more) else re.findall(r"[^,]*,|[^,]+", word)
        pieces += [(part, n == 0) for n, part in enumerate(parts)]
    out, current, empty = [], lead, True
    for piece, starts_word in pieces:
        sep = " " if starts_word and not empty else ""
        if not empty and len(current) + len(sep) + len(piece) > width:
            out.append(current)
            current, sep = more, ""
        current += sep + piece
        empty = False
        while len(current) > width and width > len(more):
            out.append(current[:width])
            current = more + current[width:]
    return [*out, current]


def _cell_width(value) -> int:
    return max((len(line) for line in str(value).splitlines()), default=0)


def _items(line: str) -> list[tuple[str, bool]]:
    """A line's pieces that never split: its words (at spaces), each cut after its commas ("a=1,b=2" is "a=1," and
    "b=2"); (piece, True where a word starts there)."""
    return [(item, n == 0) for word in line.split() for n, item in enumerate(re.findall(r"[^,]*,|[^,]+", word))]


def _token_width(value) -> int:
    """The longest piece of a cell (see _items): the narrowest its column can be without splitting one."""
    return max((len(item) for line in str(value).splitlines() for item, _ in _items(line)), default=0)


def fits_whole_items(rows: list[list], headers: list[str]) -> bool:
    """Whether `table` can fit these columns into `columns()` without splitting a word or knob=value item."""
    width = columns()
    if width is None:
        return True
    floors = [max(_token_width(v) for v in col) for col in zip(headers, *rows, strict=True)]
    return sum(floors) + 2 * (len(floors) - 1) <= width


def _cell_lines(value, width: int) -> list[str]:
    """A cell's text in lines of at most `width`: wrapped at spaces and after commas, between knob=value items and
    words, never inside one; only a piece longer than the whole width is cut (the last resort of `table`)."""
    out = []
    for line in str(value).splitlines() or [""]:
        out += [line] if len(line) <= width else _fill(line, width)
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


def _widths(rows: list[list], headers: list[str], width: int, floors: list[int]) -> list[int] | None:
    """Column widths within `width`: the widest column narrowed first, then the next widest, none below its floor;
    None where the floors alone are too wide. Headers wrap at their spaces before any cell does."""
    full = [max(_cell_width(v) for v in col) for col in zip(headers, *rows, strict=True)]
    words = [max(len(w) for w in str(h).split() or [""]) for h in headers]
    widths = [max([w] + [_cell_width(r[i]) for r in rows]) for i, w in enumerate(words)]
    gaps = 2 * (len(widths) - 1)
    while sum(widths) + gaps > width:
        narrower = [j for j in range(len(widths)) if widths[j] > floors[j]]
        if not narrower:
            return None
        i = max(narrower, key=lambda j: widths[j])
        excess = sum(widths) + gaps - width
        second = max((w for j, w in enumerate(widths) if j != i), default=0)
        widths[i] = max(floors[i], min(widths[i] - 1, max(second, widths[i] - excess)))
    for i in sorted(range(len(widths)), key=lambda j: widths[j] - full[j]):  # room left: the most wrapped first
        widths[i] += max(0, min(full[i] - widths[i], width - sum(widths) - gaps))
    return widths


def _overflow(rows: list[list], widths: list[int], max_lines: int) -> int:
    """How many lines the tallest row needs beyond max_lines (or beyond its cells' own lines, where more)."""
    worst = 0
    for row in rows:
        own = max(len(str(v).splitlines() or [""]) for v in row)
        tall = max(len(_cell_lines(v, w)) for v, w in zip(row, widths, strict=True))
        worst = max(worst, tall - max(max_lines, own))
    return worst


def table(
    rows: list[list],
    headers: list[str],
    tablefmt: str = "simple",
    fit: bool = True,
    optional: tuple[str, ...] | list[str] = (),
    max_lines: int = 4,
) -> str:
    """A table: with `fit`, plain columns two spaces apart where the widest column wraps (cells on several lines,
    broken between words and comma-separated knob=value items, never inside one), then the next widest, until it
    fits `columns()`; without, tabulate's `tablefmt` at full width (Markdown: "github").

    `optional`: headers of columns that may be left out, the least important first. One is, then the next, while
    the table cannot fit without splitting an item or a row would need more than `max_lines` lines; a note under
    the table names them (--wide shows them). Only where no optional column is left does an item longer than its
    column split."""
    width = columns() if fit else None
    if width is None:
        return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)
    floors = [max(_token_width(v) for v in col) for col in zip(headers, *rows, strict=True)]
    order = [headers.index(h) for h in optional if h in headers]
    best = None  # (lines over max_lines, columns dropped, kept, widths): the first that fits whole items
    for dropped in range(len(order) + 1):
        kept = [i for i in range(len(headers)) if i not in order[:dropped]]
        widths = _widths(
            [[r[i] for i in kept] for r in rows], [headers[i] for i in kept], width, [floors[i] for i in kept]
        )
        if widths is None:
            continue
        over = _overflow([[r[i] for i in kept] for r in rows], widths, max_lines)
        if best is None or over < best[0]:
            best = (over, dropped, kept, widths)
        if over == 0:
            break
    if best is None:  # no way without splitting an item: every optional column out, the widest narrowed to 6
        kept = [i for i in range(len(headers)) if i not in order]
        floors_left = [min(6, floors[i]) for i in kept]
        widths = _widths([[r[i] for i in kept] for r in rows], [headers[i] for i in kept], width, floors_left)
        widths = widths or floors_left
        best = (0, len(order), kept, widths)
    _, dropped, kept, widths = best
    text = _plain([[r[i] for i in kept] for r in rows], [headers[i] for i in kept], widths)
    if dropped:
        names = ", ".join(headers[i] for i in order[:dropped])
        text += "\n" + wrap(f"not shown, to fit {width} columns: {names} (--wide shows every column)", width)
    return text


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
