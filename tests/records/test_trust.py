"""Records are data: what a careful attacker or a careless teammate puts in a run directory, a database row or an
export never runs code, destroys data, counts a trial twice or breaks the next reader (docs/trust-model.md).

Every fixture is made here: a tiny run directory of a built-in family and one of a family file whose import would
leave a marker file behind, so each test can check that the marker never appears.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import optuna
import pytest

from mage_tune.records import reader, schema
from mage_tune.tuning.db import TuningDB

TIMEOUT = 300
CONFIGS = [{"threads": 128, "rows": 1}, {"threads": 256, "rows": 1}, {"threads": 256, "rows": 2}]


def cli(*args: str, db: str | None = None, cwd: Path | None = None, timeout: float = TIMEOUT):
    env = {k: v for k, v in os.environ.items() if k != "MAGE_TUNE_DB"}
    if db:
        env["MAGE_TUNE_DB"] = db
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )


def make_run(folder: Path, family: str = "layernorm", origin: str | None = None, **identity) -> Path:
    """A small run directory as a search writes it: run.json, search.json, three measured trials."""
    folder.mkdir(parents=True)
    ident = {"study": "s", "storage": None, "family": family, "shape": {"m": 1024, "d": 768}, "arch": "sm_90"}
    ident |= {"mode": "measured", "objective": "measured-cold-median-us/1", **identity}
    (folder / "run.json").write_text(json.dumps(ident))
    (folder / "search.json").write_text(json.dumps({**ident, "origin": origin or family}))
    lines = [
        {
            "number": i,
            "outcome": "measured",
            "value": 10.0 + i,
            "config": c,
            "label": f"t{i}",
            "census": {"registers": 32},
        }
        for i, c in enumerate(CONFIGS)
    ]
    (folder / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in lines))
    return folder


@pytest.fixture
def planted(tmp_path) -> tuple[Path, Path]:
    """A family file that leaves a marker when imported, and the marker's path."""
    marker = tmp_path / "IMPORTED"
    evil = tmp_path / "evil_family.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(0)\n")
    return evil, marker


def sqlite(tmp_path: Path, name: str = "db.sqlite") -> str:
    return "sqlite:///" + str(tmp_path / name)


def test_no_command_that_reads_records_imports_the_family_file_they_name(tmp_path, planted):
    evil, marker = planted
    run = make_run(tmp_path / "run", family="evil", origin=str(evil))
    db = sqlite(tmp_path)
    out = cli("db", "import", str(run), db=db)
    assert out.returncode == 0, out.stderr
    for args in (
        ("db", "list"),
        ("db", "query", "evil"),
        ("db", "query", str(evil)),
        ("db", "export", "-"),
        ("db", "prune", "--dry-run"),
        ("report", str(run)),
        ("explain", str(run)),
    ):
        out = cli(*args, db=db)
        assert out.returncode == 0, (args, out.stderr)
        assert "Traceback" not in out.stderr
        assert not marker.exists(), f"{args} imported the family file a record names"
    assert "records never load code" in cli("explain", str(run), db=db).stdout
    # an export line naming the file: importing and querying it runs nothing either
    exported = tmp_path / "out.jsonl"
    assert cli("db", "export", str(exported), db=db).returncode == 0
    other = sqlite(tmp_path, "other.sqlite")
    assert cli("db", "import", str(exported), db=other).returncode == 0
    assert cli("db", "query", "evil", db=other).returncode == 0
    assert not marker.exists()


def test_a_missing_family_file_is_not_looked_for_under_the_current_folder(tmp_path):
    """A record made elsewhere names /elsewhere/examples/x.py: the same suffix under the current folder is a
    different file, never taken silently."""
    here = tmp_path / "checkout"
    (here / "examples").mkdir(parents=True)
    marker = tmp_path / "IMPORTED"
    (here / "examples" / "fam.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    out = cli("search", "/no/such/place/examples/fam.py", "--static", "--trials", "1", cwd=here)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert not marker.exists()


def test_export_never_destroys_a_file(tmp_path):
    db = sqlite(tmp_path)
    assert cli("db", "import", str(make_run(tmp_path / "run")), db=db).returncode == 0
    kept = tmp_path / "kept.jsonl"
    kept.write_text("precious\n")
    out = cli("db", "export", str(kept), db=db)
    assert out.returncode == 2 and "--force" in out.stderr and str(kept) in out.stderr
    assert kept.read_text() == "precious\n"
    # an export of no trial at all does not clobber either
    out = cli("db", "export", str(kept), "--family", "nothing-like-it", db=db)
    assert out.returncode == 2 and kept.read_text() == "precious\n"
    own = tmp_path / "db.sqlite"
    size = own.stat().st_size
    for force in ((), ("--force",)):
        out = cli("db", "export", str(own), *force, db=db)
        assert out.returncode == 2 and "own file" in out.stderr and "Traceback" not in out.stderr
        assert own.stat().st_size == size
    out = cli("db", "export", str(kept), "--force", db=db)
    assert out.returncode == 0 and len(kept.read_text().splitlines()) == len(CONFIGS)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_read_only_commands_create_no_database_nor_folder(tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    for args in (("db", "list"), ("db", "query", "layernorm"), ("db", "export", "-"), ("db", "prune")):
        out = cli(*args, "--db", "sqlite:///" + str(missing))
        assert out.returncode == 2 and str(missing) in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "no").exists()
    # the default database on a fresh machine reads as empty and is not made either
    env_cache = tmp_path / "cache"
    out = subprocess.run(
        [sys.executable, "-m", "mage_tune", "db", "list"],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != "MAGE_TUNE_DB"}, "MAGE_TUNE_CACHE": str(env_cache)},
        timeout=TIMEOUT,
    )
    assert out.returncode == 0 and "0 run(s)" in out.stderr
    assert not env_cache.exists()


def _export_line(tmp_path: Path, **changes) -> dict:
    db = sqlite(tmp_path, "source.sqlite")
    if not (tmp_path / "run0").exists():
        assert cli("db", "import", str(make_run(tmp_path / "run0")), db=db).returncode == 0
    line = json.loads(cli("db", "export", "-", db=db).stdout.splitlines()[0])
    return {**line, **changes}


@pytest.mark.parametrize(
    "change, why",
    [
        ({"config": {"threads": [128]}}, "config.threads"),
        ({"census": {"registers": [32]}}, "census.registers"),
        ({"number": -1}, "number"),
        ({"run": "x"}, "run"),
        ({"value": "fast"}, "value"),
        ({"value": -5.0}, "value"),  # a time: above zero
        ({"value": 0}, "value"),
        ({"outcome": "awesome"}, "outcome"),  # one of the outcomes a search records
    ],
)
def test_an_export_line_outside_the_schema_is_refused_with_its_line(tmp_path, change, why):
    good = _export_line(tmp_path)
    bad = {**good, **change}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    db = sqlite(tmp_path)
    out = cli("db", "import", str(path), db=db)
    assert out.returncode == 2 and f"{path}:2" in out.stderr and why in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "run_change",
    [{"name": "not-a-run"}, {"toolchain": ["nvrtc"]}, {"baselines": {"torch": "fast"}}, {"family": 7}, {"shape": {}}],
)
def test_a_run_context_outside_the_schema_is_refused(tmp_path, run_change):
    good = _export_line(tmp_path)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({**good, "run": {**good["run"], **run_change}}) + "\n")
    out = cli("db", "import", str(path), db=sqlite(tmp_path))
    assert out.returncode == 2 and f"{path}:1" in out.stderr and "Traceback" not in out.stderr


def _poison(url: str) -> None:
    """Rows a hand-edited or hostile shared database may hold, written past the importer's checks."""
    storage = optuna.storages.RDBStorage(url)
    study = optuna.load_study(study_name=next(n for n in optuna.get_all_study_names(storage)), storage=storage)
    for entry in (
        {"number": 7, "config": {"threads": [128]}},
        {"number": 8, "config": {"threads": 64}, "census": {"x": [1]}},
    ):
        study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs={"entry": entry}))
    for name, attrs in (
        ("run:bad-toolchain x", {"family": "layernorm", "shape": {"m": 1, "d": 768}, "toolchain": "nvrtc 13"}),
        ("run:bad-family x", {"family": ["layernorm"], "shape": {"m": 1, "d": 768}}),
        ("run:bad-baselines x", {"family": "layernorm", "shape": {"m": 1, "d": 768}, "baselines": [1]}),
    ):
        bad = optuna.create_study(study_name=name, storage=storage)
        for key, value in attrs.items():
            bad.set_user_attr(key, value)
        bad.add_trial(optuna.trial.create_trial(value=1.0, user_attrs={"entry": {"number": 0, "config": {}}}))


def test_one_poisoned_row_breaks_nobody(tmp_path):
    db = sqlite(tmp_path)
    assert cli("db", "import", str(make_run(tmp_path / "run")), db=db).returncode == 0
    _poison(db)
    for args in (("db", "list"), ("db", "query", "layernorm"), ("db", "prune", "--dry-run"), ("db", "export", "-")):
        out = cli(*args, db=db)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (args, out.stderr)
        assert "skipped" in out.stderr, args
    rows = list(TuningDB(db).entries())
    assert sorted(e.number for e in rows) == [0, 1, 2]
    # the next search of that family warm-starts from the sound rows and goes on
    out = cli(
        "search",
        "layernorm",
        "--m",
        "2048",
        "--d",
        "768",
        "--static",
        "--trials",
        "3",
        "--run-dir",
        str(tmp_path / "search"),
        db=db,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_a_run_is_imported_once_however_it_travels(tmp_path):
    run = make_run(tmp_path / "run")
    db = sqlite(tmp_path)
    assert "imported 1 run(s); 0 already present" in cli("db", "import", str(run), db=db).stdout
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(str(run), moved)
    out = cli("db", "import", str(copy), str(moved), db=db)
    assert out.returncode == 0 and "imported 0 run(s); 2 already present" in out.stdout
    runs = TuningDB(db).runs()
    assert len(runs) == 1 and runs[0][1] == len(CONFIGS)


def test_concurrent_imports_of_one_run_add_each_trial_once(tmp_path):
    runs = [make_run(tmp_path / f"run{i}", study=f"s{i}") for i in range(3)]
    db = sqlite(tmp_path)
    assert cli("db", "list", db=db).returncode == 2  # not made yet: made by the first import
    outs = []

    def one() -> None:
        outs.append(cli("db", "import", *map(str, runs), db=db))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert sum(int(o.stdout.split("imported ")[1].split(" ")[0]) for o in outs) == 3
    storage = optuna.storages.RDBStorage(db)
    names = [n for n in optuna.get_all_study_names(storage) if n.startswith("run:")]
    assert len(names) == 3
    for name in names:
        assert len(optuna.load_study(study_name=name, storage=storage).trials) == len(CONFIGS)


def test_import_checks_every_path_before_writing_any(tmp_path):
    good = make_run(tmp_path / "good")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    db = sqlite(tmp_path)
    assert cli("db", "import", str(make_run(tmp_path / "seed", study="seed")), db=db).returncode == 0
    out = cli("db", "import", str(good), str(bad), str(make_run(tmp_path / "third", study="third")), db=db)
    assert out.returncode == 2 and f"{bad}:1" in out.stderr
    assert len(TuningDB(db).runs()) == 1  # the good one did not go in behind the user's back


def test_a_copied_bench_record_imports_once(tmp_path):
    record = {
        "schema": "mage-tune.bench/1",
        "family": "layernorm",
        "shape": {"m": 1024, "d": 768},
        "bytes_moved": 1,
        "flops": 0,
        "environment": {"gpu": "G", "compute_capability": "9.0"},
        "sessions": [{"copy_gbs": 1.0, "fp32_tflops": 1.0}],
        "census": {},
        "results": [
            {
                "label": "v",
                "kind": "variant",
                "ok": True,
                "session": 0,
                "config": {"threads": 128},
                "timings": [{"regime": "cold", "median_us": 5.0}],
            }
        ],
    }
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(record))
    b.write_text(json.dumps(record))
    db = sqlite(tmp_path)
    out = cli("db", "import", str(a), str(b), db=db)
    assert out.returncode == 0 and "imported 1 run(s); 1 already present" in out.stdout


def test_records_are_read_with_bounds(tmp_path):
    run = make_run(tmp_path / "run")
    trials = run / "trials.jsonl"
    trials.unlink()
    os.mkfifo(trials)
    out = cli("report", str(run), timeout=60)
    assert out.returncode == 2 and "not a regular file" in out.stderr and str(trials) in out.stderr
    trials.unlink()
    trials.symlink_to("/dev/zero")
    out = cli("db", "import", str(run), db=sqlite(tmp_path, "zero.sqlite"), timeout=60)  # reads only
    assert out.returncode == 2 and "not a regular file" in out.stderr
    out = cli("report", str(run), timeout=60)  # writes report.md there: a link in the folder is refused first
    assert out.returncode == 2 and "symbolic link" in out.stderr and str(trials) in out.stderr
    trials.unlink()
    good = {"number": 0, "outcome": "measured", "value": 3.0, "config": {"threads": 128}, "label": "ok"}
    bad = [
        "[" * 100_000 + "]" * 100_000,
        json.dumps({**good, "number": 1, "measurement": [1, 2]}),
        json.dumps({**good, "number": 2, "measurement": {"rel_err": "small"}}),
        json.dumps({**good, "number": 3, "config": {"threads": {"nested": 1}}}),
        json.dumps({**good, "number": 4, "value": float("nan")}),
    ]
    trials.write_text(json.dumps(good) + "\n" + "\n".join(bad) + "\n")
    out = cli("report", str(run))
    assert out.returncode == 0 and "Traceback" not in out.stderr
    for line in range(2, 7):
        assert f"{trials}:{line}" in out.stderr
    db = sqlite(tmp_path)
    out = cli("db", "import", str(run), db=db)
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert [e.number for e in TuningDB(db).entries()] == [0]


def test_an_export_of_any_size_imports_back_and_may_be_compressed(tmp_path):
    """Exports stream: 36 MiB of lines (over the 32 MiB cap of a whole-file read) import, as does a .jsonl.gz."""
    line = _export_line(tmp_path)
    padded = json.dumps(line)[:-1] + " " * (6 * 2**20) + "}"
    big = tmp_path / "big.jsonl"
    with big.open("w") as f:
        for number in range(6):
            f.write(padded.replace('"number": 0', f'"number": {number}', 1) + "\n")
    assert big.stat().st_size > 32 * 2**20
    db = sqlite(tmp_path)
    out = cli("db", "import", str(big), db=db)
    assert out.returncode == 0, out.stderr
    assert len(list(TuningDB(db).entries())) == 6
    packed = tmp_path / "all.jsonl.gz"
    assert cli("db", "export", str(packed), db=db).returncode == 0
    with gzip.open(packed, "rt") as f:
        assert len(f.read().splitlines()) == 6
    other = sqlite(tmp_path, "other.sqlite")
    out = cli("db", "import", str(packed), db=other)
    assert out.returncode == 0 and len(list(TuningDB(other).entries())) == 6
    bomb = tmp_path / "damaged.jsonl.gz"
    bomb.write_bytes(packed.read_bytes()[:40])
    out = cli("db", "import", str(bomb), db=other)
    assert out.returncode == 2 and str(bomb) in out.stderr and "Traceback" not in out.stderr


def test_the_reader_refuses_what_is_not_a_record(tmp_path):
    long_line = tmp_path / "long.jsonl"
    long_line.write_bytes(b'{"a": "' + b"x" * 2048 + b'"}\n{"b": 1}\n')
    got = list(reader.lines(long_line, max_line=1024))
    assert got[0].data is None and "over" in got[0].problem and got[1].data == {"b": 1}
    assert schema.problem("trial", {"number": 0, "outcome": "measured", "config": {}}) != ""
    assert schema.problem("trial", {"number": 0, "outcome": "failed"}) == ""
    assert schema.problem("trial", {"number": 0, "outcome": "measured", "config": {}, "value": -1.0}) != ""
    assert schema.problem("trial", {"number": 0, "outcome": "surplus"}) != ""
    assert "nested" in schema.problem("entry", _deep(5000)) or schema.problem("entry", _deep(5000)) != ""


def _deep(depth: int) -> dict:
    node: dict = {}
    for _ in range(depth):
        node = {"x": node}
    return {"number": 0, "config": node}


def test_explain_uses_the_family_the_user_names_and_says_a_changed_one(tmp_path):
    """A record of a family file: explain loads it only when named with --family, and says when the file is not
    the code that made the record."""
    family = tmp_path / "fam.py"
    family.write_text("from mage_tune.kernels.layernorm import LayerNorm\n\nFAMILY = LayerNorm()\n")
    run = make_run(tmp_path / "run", family="layernorm", origin=str(family), family_digest="0" * 64)
    skipped = cli("explain", str(run))
    assert skipped.returncode == 0 and "records never load code" in skipped.stdout
    named = cli("explain", str(run), "--family", str(family))
    assert named.returncode == 0, named.stderr
    assert "records never load code" not in named.stdout and "Triton" in named.stdout
    assert "not the code that made this record" in " ".join(named.stderr.split())  # wrapped at 100 columns


def test_explain_of_nothing_scored_is_an_error(tmp_path):
    run = make_run(tmp_path / "run")
    lines = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
    (run / "trials.jsonl").write_text("".join(json.dumps({**t, "outcome": "pruned"}) + "\n" for t in lines))
    out = cli("explain", str(run))
    assert out.returncode == 2 and "nothing to explain" in out.stderr and "trials.jsonl" in out.stderr


def test_a_sqlite_file_of_another_application_is_never_written(tmp_path):
    """Opening a SQLite file as a tuning database (or a study store) would add Optuna's tables to it: every command
    refuses another application's database in one line and leaves its bytes as they were; an empty file is no
    tuning database to the commands that only read."""
    import sqlite3

    app = tmp_path / "app.sqlite"
    with contextlib.closing(sqlite3.connect(app)) as con:
        con.execute("create table users (id integer)")
        con.commit()
    before = app.read_bytes()
    db = "sqlite:///" + str(app)
    run = make_run(tmp_path / "run")
    for args in (("db", "list"), ("db", "query", "layernorm"), ("db", "import", str(run))):
        out = cli(*args, db=db)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (args, out.stderr)
        assert f"{app}: a SQLite database of something else (tables users)" in out.stderr, args
    out = cli("search", "layernorm", "--d", "64", "--static", "--trials", "1", "--storage", db,
              "--run-dir", str(tmp_path / "s"), "--db", "off")  # fmt: skip
    assert out.returncode == 2 and "a SQLite database of something else" in out.stderr
    assert app.read_bytes() == before

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    out = cli("db", "list", db="sqlite:///" + str(empty))
    assert out.returncode == 2 and f"{empty}: not a tuning database (no Optuna tables" in out.stderr
    assert empty.read_bytes() == b""


def test_a_run_directory_s_damaged_line_is_named_where_it_is_and_read_around(tmp_path):
    """db import of a run directory skips a damaged trials.jsonl line (a search killed mid-write), naming the file, the
    line and the place in it (not json's own "line 2 column 1"), and imports the rest."""
    run = make_run(tmp_path / "run")
    trials = run / "trials.jsonl"
    lines = trials.read_text().splitlines()
    trials.write_text("\n".join([lines[0], '{"number": 1, "outcome": ', *lines[1:]]) + "\n")
    db = sqlite(tmp_path)
    out = cli("db", "import", str(run), db=db)
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert f"{trials}:2: not JSON (Expecting value at character" in out.stderr and "line 2 column" not in out.stderr
    assert sorted(e.number for e in TuningDB(db).entries()) == sorted(json.loads(x)["number"] for x in lines)


def test_an_export_is_readable_as_any_file_the_user_writes(tmp_path):
    """An export is for others (a team, a deployment): its mode is what open() gives under the umask, not the
    temporary file's 0600."""
    db = sqlite(tmp_path)
    assert cli("db", "import", str(make_run(tmp_path / "run")), db=db).returncode == 0
    umask = os.umask(0o022)
    os.umask(umask)
    for name in ("all.jsonl", "all.jsonl.gz"):
        out = cli("db", "export", str(tmp_path / name), db=db)
        assert out.returncode == 0, out.stderr
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask
