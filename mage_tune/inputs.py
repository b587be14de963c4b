"""Reading a user's input file with bounds: a regular file only (never a device, FIFO or folder, which could be
read for ever), at most MAX_INPUT_BYTES, and every failure one InputError naming the file."""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

from mage_tune.errors import InputError

MAX_INPUT_BYTES = 32 * 1024 * 1024  # far above any real kernel's PTX, cubin or SASS listing (a few MB at most)


def did_you_mean(path: Path, names: tuple[str, ...] = (), kind: str = "") -> str:
    """For a path that does not exist: "; did you mean ..." with the nearest names in its folder and, for a bare
    name, the nearest of `names` (a caller's other meaning of a bare word, e.g. the families), each shown after
    `kind` ("" where nothing is near)."""
    folder = path.parent
    files = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    near = [str(folder / n) if str(folder) != "." else n for n in difflib.get_close_matches(path.name, files, 3, 0.6)]
    if str(folder) == "." and not path.suffix:
        near += [f"{kind}{n}" for n in difflib.get_close_matches(path.name, names, 2, 0.6)]
    return f"; did you mean {' or '.join(near)}?" if near else ""


def read_input(path: str | Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    label = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a FIFO with no writer must not hang
    except FileNotFoundError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}{did_you_mean(Path(path))}", file=label) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=label) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError("a folder, not a file", file=label)
        if not stat.S_ISREG(info.st_mode):
            raise InputError("not a regular file (a device, pipe or socket): give a saved file", file=label)
        if info.st_size > limit:
            raise InputError(f"{_size(info.st_size)}, over the {_size(limit)} limit for one input", file=label)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)  # the file may have grown since fstat
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=label) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"over the {_size(limit)} limit for one input", file=label)
    return data


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"
