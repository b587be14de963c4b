"""Output files a script is told to write: one that exists is replaced only when asked (--force), so a second run
with the same --out never silently destroys the first one's numbers."""

from __future__ import annotations

from pathlib import Path

from mage_tune.errors import InputError


def refuse_existing(script: str, *paths: Path | None, force: bool = False) -> None:
    """Exit (status 1, one line naming the file, no traceback) where one of `paths` exists and `force` is not set."""
    for path in paths:
        if path is not None and not force and (path.exists() or path.is_symlink()):
            raise SystemExit(f"{script}: {path}: exists; give --force to replace it, or another name")


def refuse_existing_out(path: str | Path | None, force: bool) -> None:
    """The commands' form of the same rule: an InputError naming an existing --out record (or a link in its place)
    unless `force`, said before any measuring."""
    if path is not None and not force and (Path(path).exists() or Path(path).is_symlink()):
        raise InputError("exists; give --force to replace it, or another --out", file=str(path))
