"""Output files a script is told to write: one that exists is replaced only when asked (--force), so a second run
with the same --out never silently destroys the first one's numbers."""

from __future__ import annotations

from pathlib import Path


def refuse_existing(script: str, *paths: Path | None, force: bool = False) -> None:
    """Exit (status 1, one line naming the file, no traceback) where one of `paths` exists and `force` is not set."""
    for path in paths:
        if path is not None and not force and (path.exists() or path.is_symlink()):
            raise SystemExit(f"{script}: {path}: exists; give --force to replace it, or another name")
