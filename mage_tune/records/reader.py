"""The one reader of records: run directories' .jsonl files, bench records, tuning-database exports.

Records are data from anyone (a teammate's run directory, a downloaded export), so reading one is bounded: a
regular file only (a FIFO or a device could be read for ever), each line at most MAX_LINE_BYTES, a stream at most
MAX_STREAM_BYTES after decompression (a `.gz` export may be a bomb), JSON nested at most as deep as Python's parser
takes (deeper is a bad line, not a crash). Each line's shape is then checked by its schema (records.schema).
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mage_tune.errors import InputError

MAX_LINE_BYTES = 8 * 2**20  # a trial line with its whole measurement is a few KB
MAX_STREAM_BYTES = 4 * 2**30  # an export of every trial a team has measured stays far below this


@dataclass(frozen=True)
class Line:
    """One line of a record: its number (from 1), the parsed object or None, and why it is None."""

    number: int
    data: object
    problem: str = ""


@contextmanager
def open_regular(path: str | Path) -> Iterator[BinaryIO]:
    """`path` opened for reading if it is a regular file (links followed); InputError naming it otherwise. A `.gz`
    file is decompressed as it is read."""
    label = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer must not hang the open
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=label) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError("a folder, not a file", file=label)
        if not stat.S_ISREG(mode):
            raise InputError("not a regular file (a device, pipe or socket): give a saved file", file=label)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as raw:
        if label.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="rb") as unpacked:
                yield unpacked
        else:
            yield raw


def lines(path: str | Path, max_line: int = MAX_LINE_BYTES, max_total: int = MAX_STREAM_BYTES) -> Iterator[Line]:
    """The non-blank lines of a JSON-lines record, parsed, in order, streamed (any size up to `max_total`). A line
    that is not a JSON object comes back with `data` None and the reason; the caller decides to skip or refuse."""
    label = str(path)
    total = 0
    with open_regular(path) as f:
        number = 0
        while True:
            try:
                raw = f.readline(max_line + 1)
            except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise InputError(f"cannot read past line {number}: {exc}", file=label) from None
            if not raw:
                return
            number += 1
            total += len(raw)
            if total > max_total:
                raise InputError(f"over the {max_total / 2**30:.0f} GiB limit for one record", file=label)
            if len(raw) > max_line and not raw.endswith(b"\n"):
                total += _skip_rest(f, label)
                yield Line(number, None, f"a line over {max_line / 2**20:.0f} MiB")
                continue
            if not raw.strip():
                continue
            yield parse_line(number, raw, last=not raw.endswith(b"\n"))


def _skip_rest(f: BinaryIO, label: str) -> int:
    skipped = 0
    while True:
        chunk = f.readline(2**20)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped
        if skipped > MAX_STREAM_BYTES:
            raise InputError(f"a line over the {MAX_STREAM_BYTES / 2**30:.0f} GiB limit for one record", file=label)


def parse_line(number: int, raw: bytes, last: bool = False) -> Line:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return Line(number, None, f"not UTF-8 text (byte {exc.start})")
    except RecursionError:
        return Line(number, None, "JSON nested too deeply")
    except json.JSONDecodeError as exc:  # its position within the line, not json's own line and column of it
        why = f"not JSON ({exc.msg.removesuffix(' at')} at character {exc.pos + 1} of the line)"
        return Line(number, None, "cut short (a write interrupted by a kill?)" if last else why)
    except ValueError as exc:
        return Line(number, None, "cut short (a write interrupted by a kill?)" if last else f"not JSON ({exc})")
    if not isinstance(data, dict):
        return Line(number, None, "not a JSON object")
    return Line(number, data)


def read_json(path: str | Path, limit: int = 32 * 2**20) -> object:
    """A whole JSON file, read with the same bounds (regular file, `limit` bytes); InputError naming the file (and
    line) where it cannot be read or parsed."""
    label = str(path)
    with open_regular(path) as f:
        try:
            data = f.read(limit + 1)
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputError(f"cannot read: {exc}", file=label) from None
    if len(data) > limit:
        raise InputError(f"over the {limit / 2**20:.0f} MiB limit for one record", file=label)
    if not data.strip():
        raise InputError("empty file, not a JSON record", file=label)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=label) from None
    except json.JSONDecodeError as exc:
        where = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
        raise InputError(f"not JSON: {where}", file=label, line=exc.lineno) from None
    except RecursionError:
        raise InputError("not JSON this reader can take (nested too deeply)", file=label) from None
