"""analysis/archives.py, the way the analysis scripts read a campaign's archive (records/CAMPAIGN.tar.xz), on an
archive packed here from fixtures: packing is deterministic and leaves out study.db and the winners' PTX and SASS;
ARCHIVE, ARCHIVE:MEMBER and ARCHIVE:GLOB name what they say; a script gives the same table from an archive as from
the folder it was packed from."""

from __future__ import annotations

import calendar
import importlib.util
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _archives():
    spec = importlib.util.spec_from_file_location("archives", ROOT / "analysis" / "archives.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def campaign(tmp_path) -> Path:
    """A campaign folder: a bench-record folder and a run directory of the fixtures, with a study.db and a winner's
    PTX and SASS beside them (what pack leaves out)."""
    folder = tmp_path / "gpu-2026-12-01-campaign"  # a campaign's name carries its date
    shutil.copytree(FIXTURES / "matmul-3xtf32", folder)
    run = folder / "searches" / "matmul-3xtf32-m512n512k512"
    for name in ("study.db", "best/kernel.ptx", "best/kernel.sass"):
        (run / name).write_text("derivable")
    return folder


def test_pack_is_deterministic_and_leaves_out_what_is_derivable(campaign, tmp_path):
    archives = _archives()
    first, members, skipped = archives.pack(campaign, tmp_path / "a")
    again, _, _ = archives.pack(campaign, tmp_path / "b")
    assert first.read_bytes() == again.read_bytes() and first.name == "gpu-2026-12-01-campaign.tar.xz"
    derivable = ("best/kernel.ptx", "best/kernel.sass", "study.db")
    assert sorted(skipped) == [f"searches/matmul-3xtf32-m512n512k512/{n}" for n in derivable]
    with tarfile.open(first, "r:xz") as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == members == sorted(members)
    kept = sorted(p.relative_to(campaign).as_posix() for p in campaign.rglob("*") if p.is_file())
    assert members == [m for m in kept if m not in skipped]
    assert {(i.uid, i.gid, i.uname, i.mode) for i in infos} == {(0, 0, "", 0o644)}
    assert {i.mtime for i in infos} == {calendar.timegm((2026, 12, 1, 0, 0, 0))}  # the date in the campaign's name
    for info in infos:
        assert (campaign / info.name).stat().st_size == info.size


def test_pack_replaces_an_archive_only_when_asked(campaign, tmp_path):
    archives = _archives()
    first, _, _ = archives.pack(campaign, tmp_path / "a")
    kept = first.read_bytes()
    (campaign / "later.txt").write_text("a file added since")
    with pytest.raises(archives.RecordsError, match="exists; give --force"):
        archives.pack(campaign, tmp_path / "a")
    assert first.read_bytes() == kept
    again, members, _ = archives.pack(campaign, tmp_path / "a", force=True)
    assert again == first and "later.txt" in members and sorted(p.name for p in first.parent.iterdir()) == [first.name]


def test_record_sets_by_archive_member_and_glob(campaign, tmp_path):
    archives = _archives()
    archive, _, _ = archives.pack(campaign, tmp_path / "records")
    (root,) = archives.local(archive)
    assert (root / "tensor_core").is_dir() and not (root / "searches/matmul-3xtf32-m512n512k512/study.db").exists()
    member = archives.local_one(f"{archive}:tensor_core/matmul-3xtf32-m1024n4096k1024.json")
    assert member.read_bytes() == (campaign / "tensor_core/matmul-3xtf32-m1024n4096k1024.json").read_bytes()
    runs = archives.local(f"{archive}:searches/matmul-3xtf32-m*[0-9]")
    assert [p.name for p in runs] == sorted(p.name for p in (campaign / "searches").iterdir())
    assert archives.local_one(f"{archive}:searches/") == root / "searches"
    assert archives.shown(member) == f"{archive}:tensor_core/matmul-3xtf32-m1024n4096k1024.json"
    assert archives.local(campaign / "tensor_core") == [campaign / "tensor_core"]  # a folder on disk as it is
    with pytest.raises(archives.RecordsError, match="no member nope"):
        archives.local(f"{archive}:nope")
    with pytest.raises(archives.RecordsError, match="no member matches"):
        archives.local(f"{archive}:searches/layernorm-*")
    with pytest.raises(archives.RecordsError, match="names 3 members"):
        archives.local_one(f"{archive}:searches/*")
    with pytest.raises(archives.RecordsError, match="no such archive"):
        archives.local(tmp_path / "missing.tar.xz")
    broken = tmp_path / "broken.tar.xz"
    broken.write_bytes(b"not xz")
    with pytest.raises(archives.RecordsError, match="not a readable"):
        archives.local(broken)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT)


def test_a_script_reads_the_archive_as_the_folder_and_extract_refuses_a_full_folder(campaign, tmp_path):
    archives = _archives()
    archive, _, _ = archives.pack(campaign, tmp_path / "records")
    script = str(ROOT / "analysis" / "crossed_bench.py")
    from_archive = _run(script, f"{archive}:tensor_core", "--errors")
    from_folder = _run(script, str(campaign / "tensor_core"), "--errors")
    assert from_archive.returncode == 0 and from_archive.stdout == from_folder.stdout and "### " in from_folder.stdout
    missing = _run(script, f"{archive}:nope")
    assert missing.returncode != 0 and "crossed_bench.py: " in missing.stderr and "Traceback" not in missing.stderr

    tool = str(ROOT / "analysis" / "archives.py")
    dest = tmp_path / "out"
    assert _run(tool, "extract", str(archive), str(dest)).returncode == 0
    assert (dest / "tensor_core/matmul-3xtf32-m1024n4096k1024.json").exists()
    again = _run(tool, "extract", str(archive), str(dest))
    assert again.returncode == 2 and "exists and is not empty" in again.stderr
    listed = _run(tool, "list", str(archive))
    assert listed.returncode == 0 and "tensor_core/matmul-3xtf32-m1024n4096k1024.json" in listed.stdout
