"""The published records: one compressed archive per campaign, records/CAMPAIGN.tar.xz, members relative to the
campaign's folder (`searches/layernorm-m8192d6144/trials.jsonl`). The analysis scripts take a record set as

    records/CAMPAIGN.tar.xz                   the whole campaign
    records/CAMPAIGN.tar.xz:MEMBER            a file or folder inside it (`:searches`, `:rerun/mm_2048.json`)
    records/CAMPAIGN.tar.xz:PATTERN           members by glob (`':searches/layernorm-m*[0-9]'`; quote it in a shell)
    FOLDER or FILE                            as it is: an extracted archive, or what a search or bench wrote (runs/)

An archive is read with Python's tarfile into a private temporary folder once per process (members only: the
`data` filter refuses links out of it, absolute names and devices); nothing is written beside the archive.

    python analysis/archives.py extract records/CAMPAIGN.tar.xz [DEST]    (DEST default: runs/CAMPAIGN)
    python analysis/archives.py list records/CAMPAIGN.tar.xz
    python analysis/archives.py pack FOLDER... [--out records] [--force] (one deterministic archive per folder)

`pack` leaves out what is derivable or duplicated: study.db (Optuna's copy of trials.jsonl), a winner's
best/kernel.ptx and best/kernel.sass (compiled again from best/kernel.cu by `mage-tune census`); members are in
sorted order with fixed owners, modes and times (the campaign's date), so packing the same files twice gives the
same bytes.
"""

from __future__ import annotations

import argparse
import calendar
import glob
import io
import lzma
import os
import re
import sys
import tarfile
import tempfile
import time
from pathlib import Path

SUFFIX = ".tar.xz"
ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "records"
LEFT_OUT = ("study.db", "best/kernel.ptx", "best/kernel.sass")  # name, or the end of a member's path

_SPEC = re.compile(r"^(?P<archive>.+?" + re.escape(SUFFIX) + r")(?::(?P<member>.*))?$")
_extracted: dict[Path, tuple[tempfile.TemporaryDirectory, Path]] = {}


class RecordsError(Exception):
    """A record set that cannot be read: said in one line by the scripts."""


def campaigns(root: Path = RECORDS) -> list[Path]:
    """Every campaign archive under `root`, oldest campaign first (the names start with the date)."""
    return sorted(root.glob("*" + SUFFIX))


def campaign_name(archive: Path) -> str:
    return archive.name.removesuffix(SUFFIX)


def _extract(archive: Path) -> Path:
    """The archive's members in a private temporary folder (once per process), its root returned."""
    key = archive.resolve()
    if key not in _extracted:
        if not key.is_file():
            raise RecordsError(f"{archive}: no such archive")
        holder = tempfile.TemporaryDirectory(prefix=campaign_name(archive) + "-")
        root = Path(holder.name)
        try:
            with tarfile.open(key, "r:xz") as tar:
                tar.extractall(root, filter="data")
        except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as error:
            holder.cleanup()
            raise RecordsError(f"{archive}: not a readable {SUFFIX} archive ({error})") from None
        _extracted[key] = (holder, root)
    return _extracted[key][1]


def local(spec: str | Path) -> list[Path]:
    """The local paths a record set names (see the module's docstring): several where a member pattern globs."""
    text = str(spec)
    found = _SPEC.match(text)
    if not found:
        return [Path(text)]
    root = _extract(Path(found["archive"]))
    member = (found["member"] or "").strip("/")
    if not member:
        return [root]
    if glob.has_magic(member):
        matched = sorted(root.glob(member))
        if not matched:
            raise RecordsError(f"{found['archive']}: no member matches {member}")
        return matched
    path = root / member
    if not path.exists():
        raise RecordsError(f"{found['archive']}: no member {member}")
    return [path]


def local_one(spec: str | Path) -> Path:
    """The one local path a record set names."""
    paths = local(spec)
    if len(paths) != 1:
        raise RecordsError(f"{spec}: names {len(paths)} members; give one")
    return paths[0]


def local_all(specs: list) -> list[Path]:
    return [path for spec in specs for path in local(spec)]


def shown(path: Path) -> str:
    """A local path as the record set it came from: ARCHIVE:MEMBER for a member of an archive, else the path."""
    for key, (_, root) in _extracted.items():
        if path == root or root in path.parents:
            member = path.relative_to(root).as_posix()
            try:
                archive = key.relative_to(Path.cwd())
            except ValueError:
                archive = key
            return f"{archive}:{member}" if member != "." else str(archive)
    return str(path)


def _left_out(relative: str) -> bool:
    return any(relative == end or relative.endswith("/" + end) for end in LEFT_OUT)


def _date(name: str) -> int:
    """The campaign's date (YYYY-MM-DD in its name) at 00:00 UTC as the members' time; 0 without one."""
    found = re.search(r"\d{4}-\d{2}-\d{2}", name)
    return calendar.timegm(time.strptime(found[0], "%Y-%m-%d")) if found else 0


def pack(folder: Path, out_dir: Path, force: bool = False) -> tuple[Path, list[str], list[str]]:
    """One deterministic archive of `folder`'s files: (its path, the members, what was left out). An archive of that
    name is replaced only with `force`, and then whole (written beside it, then renamed over it)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    members, skipped = [], []
    archive = out_dir / (folder.name + SUFFIX)
    if (archive.exists() or archive.is_symlink()) and not force:
        raise RecordsError(f"{archive}: exists; give --force to replace it")
    mtime = _date(folder.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out_dir / f".{archive.name}.partial"
    with tarfile.open(partial, "w:xz", format=tarfile.PAX_FORMAT, preset=9 | lzma.PRESET_EXTREME) as tar:
        for path in files:
            relative = path.relative_to(folder).as_posix()
            if _left_out(relative):
                skipped.append(relative)
                continue
            data = path.read_bytes()
            info = tarfile.TarInfo(relative)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
            members.append(relative)
    os.replace(partial, archive)
    return archive, members, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    extract = commands.add_parser("extract", help="an archive's members into DEST (default runs/CAMPAIGN)")
    extract.add_argument("archive", type=Path)
    extract.add_argument("dest", type=Path, nargs="?")
    listing = commands.add_parser("list", help="an archive's members")
    listing.add_argument("archive", type=Path)
    packing = commands.add_parser("pack", help="one archive per campaign folder")
    packing.add_argument("folders", nargs="+", type=Path)
    packing.add_argument("--out", type=Path, default=RECORDS)
    packing.add_argument("--force", action="store_true", help="replace an archive of the same name")
    args = parser.parse_args(argv)
    try:
        if args.command == "extract":
            dest = args.dest or Path("runs") / campaign_name(args.archive)
            if dest.exists() and any(dest.iterdir()):
                raise RecordsError(f"{dest}: exists and is not empty; name another DEST")
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(args.archive, "r:xz") as tar:
                tar.extractall(dest, filter="data")
            print(f"extracted {args.archive} into {dest}")
        elif args.command == "list":
            with tarfile.open(args.archive, "r:xz") as tar:
                for info in tar:
                    print(f"{info.size:>10}  {info.name}")
        else:
            for folder in args.folders:
                archive, members, skipped = pack(folder, args.out, args.force)
                print(f"{archive}: {len(members)} members, {archive.stat().st_size} bytes; left out {len(skipped)}")
                for relative in skipped:
                    print(f"  left out {relative}")
    except (RecordsError, tarfile.TarError, lzma.LZMAError, OSError) as error:
        print(f"archives.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
