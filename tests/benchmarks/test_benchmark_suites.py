"""The benchmark suite (benchmarks/suites/*.toml, run_suite.py, suite_from_runs.py, results_table.py): every suite
file names a known family and shapes it takes; --dry-run lists each search as the argument list it would run; a
suite record read from run directories made here has the numbers they hold, and its table the rows expected; a
tiny suite runs end to end on the CPU (static searches)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))
import results_table  # noqa: E402
import suite_record  # noqa: E402
from suite_record import SuiteError  # noqa: E402

SUITES = sorted((BENCH / "suites").glob("*.toml"))


def _script(name: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH / name), *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


@pytest.mark.parametrize("path", SUITES, ids=lambda p: p.stem)
def test_every_suite_names_a_known_family_and_shapes_it_takes(path, monkeypatch):
    monkeypatch.chdir(ROOT)  # a family file is named from the repository root, as `mage-tune search` takes it
    suite = suite_record.load(path)
    family = suite_record.family_of(suite)
    assert suite["name"] == path.stem and suite["shapes"]
    assert all(family.shape_from(s) == s for s in suite["shapes"])
    assert set(suite["baselines"]) <= set(suite_record.BASELINES) and set(suite["report"]) <= set(suite_record.REPORTS)


def test_the_suites_are_the_protocols_shapes():
    names = {p.stem for p in SUITES}
    assert {"layernorm-h200", "matmul-h200", "matmul-3xtf32-h200"} <= names
    layernorm = suite_record.load("layernorm-h200")
    assert layernorm["family"] == "layernorm" and layernorm["warm_start"] == "other-shapes"
    # the ten layer-norm shapes of the leave-shape-out protocol, as the crossing scripts name them
    protocol = re.search(r"LAYERNORM_SHAPES=\(([^)]*)\)", (BENCH / "gpu" / "crossed_bench.sh").read_text())[1].split()
    assert [suite_record.shape_text(s) for s in layernorm["shapes"]] == protocol
    matmul, tensor = suite_record.load("matmul-h200"), suite_record.load("matmul-3xtf32-h200")
    assert (matmul["family"], tensor["family"]) == ("matmul", "matmul-3xtf32")
    assert len(matmul["shapes"]) == 12 and len(tensor["shapes"]) == 13
    assert {"m": 5120, "n": 5120, "k": 5120} in matmul["shapes"]
    assert {"m": 1024, "n": 1024, "k": 1024} in tensor["shapes"]


GOOD = """family = "layernorm"
shapes = [{m = 1024, d = 512}]
trials = 3
warm_start = "other-shapes"
sampler = "tpe"
baselines = ["triton", "copy"]
report = ["ratio"]
"""


@pytest.mark.parametrize(
    "change, message",
    [
        (("trials = 3", "trials = 3\ncolour = 1"), "unknown key"),
        (('warm_start = "other-shapes"', 'warm_start = "others"'), "warm_start"),
        (('sampler = "tpe"', 'sampler = "annealing"'), "sampler"),
        (("trials = 3\n", ""), "trials missing"),
        (('"triton", "copy"', '"triton", "cublas"'), "baselines"),
        (("{m = 1024, d = 512}", "{m = 1024, d = 0}"), "positive integers"),
        (("{m = 1024, d = 512}", "{m = 1024, d = 512}, {m = 1024, d = 512}"), "twice"),
        (("{m = 1024, d = 512}", "{m = 1024, k = 512}"), "layernorm takes the dimensions"),
        (("{m = 1024, d = 512}", "{d = 512}"), "leaves out a dimension"),
        (('family = "layernorm"', 'family = "layernorms"'), "unknown kernel family"),
    ],
)
def test_a_suite_that_cannot_be_run_is_refused_in_one_line(tmp_path, change, message):
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(SuiteError, match=message):
        suite_record.family_of(suite_record.load(path))
    path.write_text(GOOD)
    assert suite_record.family_of(suite_record.load(path)).name == "layernorm"


def test_dry_run_lists_each_search_as_an_argument_list(tmp_path):
    out = tmp_path / "out"
    done = _script("run_suite.py", "layernorm-h200", "--out", str(out), "--db", "sqlite:////x/t.db", "--gpus", "0,1",
                   "--dry-run")  # fmt: skip
    assert done.returncode == 0, done.stderr
    commands = [shlex.split(line) for line in done.stdout.splitlines()]
    assert len(commands) == 10 and not out.exists()  # nothing run, nothing written
    expected = [sys.executable, "-m", "mage_tune", "search", "layernorm", "--shape", "m=16384,d=2560",
                "--trials", "100", "--sampler", "tpe", "--warm-start", "other-shapes", "--seed", "0",
                "--workers", "14", "--gpus", "0,1", "--db", "sqlite:////x/t.db",
                "--run-dir", str(out / "layernorm-m16384d2560")]  # fmt: skip
    assert commands[0] == expected
    assert commands[-1][6] == "m=4096,d=3000" and commands[-1][-1] == str(out / "layernorm-m4096d3000")
    # the suite's gpus ("all") unless --gpus; no --db unless given (the searches use $MAGE_TUNE_DB)
    done = _script("run_suite.py", "matmul-3xtf32-h200", "--out", "o", "--dry-run")
    first = shlex.split(done.stdout.splitlines()[0])
    assert first[3:7] == ["search", "matmul-3xtf32", "--shape", "m=512,n=512,k=512"]
    assert first[first.index("--gpus") + 1] == "all" and "--db" not in first
    assert first[-2:] == ["--run-dir", "o/matmul-3xtf32-m512n512k512"]
    # a family file, named as the suite names it; its run directories by the family's own name
    done = _script("run_suite.py", "rmsnorm-bf16-h200", "--out", "o", "--dry-run")
    first = shlex.split(done.stdout.splitlines()[0])
    assert first[4] == "examples/rmsnorm/family.py:BF16" and first[-1] == "o/rmsnorm_bf16-m4096d4096"
    done = _script("run_suite.py", "no-such-suite", "--out", "o", "--dry-run")
    assert done.returncode == 2 and "no such suite file" in done.stderr


def _environment() -> dict:
    return {"gpu": "NVIDIA H200", "driver": "580.159.04", "torch": "2.11.0", "triton": "3.6.0",
            "toolchain": {"nvrtc": "13.0", "ptxas": "13.0.88 (/usr/local/cuda/bin/ptxas)"}}  # fmt: skip


def _run_dir(path: Path, shape: dict, values: list, baselines: dict, family: str = "layernorm") -> Path:
    """A search's run directory as `mage-tune search` writes one: trials in the order they ran (None: pruned),
    baselines as {label: (kind, [cold µs per session])}."""
    path.mkdir(parents=True)
    identity = {"study": "s", "family": family, "shape": shape, "arch": "sm_90", "mode": "measured",
                "objective": "measured-cold-median-us/1"}  # fmt: skip
    (path / "run.json").write_text(json.dumps(identity))
    (path / "search.json").write_text(json.dumps({**identity, "trials": len(values), "warm_start": "other-shapes",
                                                  "sampler": "tpe", "seed": 0, "origin": family}))  # fmt: skip
    (path / "environment.jsonl").write_text(json.dumps(_environment()) + "\n")
    with open(path / "trials.jsonl", "w") as f:
        for number, value in enumerate(values):
            outcome = "pruned" if value is None else "measured"
            trial = {"number": number, "outcome": outcome, "value": value, "config": {"threads": 32 * (number + 1)},
                     "time": f"2026-12-0{1 + number % 2}T10:00:00+00:00"}  # fmt: skip
            f.write(json.dumps(trial) + "\n")
    with open(path / "baselines.jsonl", "w") as f:
        for label, (kind, times) in baselines.items():
            for session, t in enumerate(times):
                result = {"label": label, "kind": kind, "session": session, "ok": True,
                          "timings": [{"regime": "cold", "median_us": t}], "config": {}}  # fmt: skip
                f.write(json.dumps({"result": result, "session": {"copy_gbs": 4000.0, "control_us": 140.0}}) + "\n")
    return path


LN_BASELINES = {
    "triton[num_warps=4]": ("triton", [12.0, 12.4]),  # median 12.2
    "triton[num_warps=8]": ("triton", [11.0, 13.0]),  # median 12.0: Triton's best
    "torch.layer_norm": ("torch", [20.0, 20.0]),
    "copy[copy_one_per_thread]": ("copy", [9.0, 9.0]),
}


def test_a_run_directory_reads_into_a_row_of_its_numbers(tmp_path):
    run = _run_dir(tmp_path / "run", {"m": 1024, "d": 512}, [None, 12.0, 10.5, 10.2, 10.0, 10.1], LN_BASELINES)
    row = suite_record.from_run_dir(run)
    assert row["best_us"] == 10.0 and row["best_config"] == {"threads": 160} and row["trials"] == 6
    assert row["within_3pct"] == 4  # 10.2 ≤ 10.0 · 1.03, the fourth trial the search ran
    assert row["baselines_us"] == {"copy": 9.0, "torch": 20.0, "triton": 12.0}
    assert row["baseline_labels"]["triton"] == "triton[num_warps=8]"
    assert row["best_baseline"] == "triton" and row["ratio_best_baseline"] == pytest.approx(10 / 12)
    assert row["ratio"]["torch"] == pytest.approx(0.5) and row["copy_gap"] == pytest.approx(1 / 3)
    assert row["date"] == "2026-12-02" and row["gpu"] == "NVIDIA H200" and row["toolchain"]["ptxas"] == "13.0.88"
    assert row["search"]["warm_start"] == "other-shapes"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "run.json").write_text((run / "run.json").read_text())
    with pytest.raises(SuiteError, match="no scored trial"):
        suite_record.from_run_dir(tmp_path / "empty")


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "ln-small.toml"
    path.write_text(
        GOOD.replace("{m = 1024, d = 512}", "{m = 2048, d = 1536}, {m = 1024, d = 512}")
        .replace('["triton", "copy"]', '["triton", "torch", "copy"]')
        .replace('["ratio"]', '["ratio", "copy_gap", "within_3pct"]')
        + '[names]\ntorch = "torch layer_norm"\n'
    )
    return path


def test_suite_from_runs_writes_the_record_run_suite_would(tmp_path):
    suite = _suite(tmp_path)
    old = _run_dir(tmp_path / "old" / "layernorm-m1024d512", {"m": 1024, "d": 512}, [11.0, 10.9], LN_BASELINES)
    new = _run_dir(tmp_path / "new" / "layernorm-m1024d512", {"m": 1024, "d": 512}, [10.5, 10.0], LN_BASELINES)
    _run_dir(tmp_path / "new" / "layernorm-m4096d768", {"m": 4096, "d": 768}, [9.0], LN_BASELINES)  # not in the suite
    out = tmp_path / "suite.json"
    done = _script("suite_from_runs.py", "--suite", str(suite), "--out", str(out), str(old), str(tmp_path / "new"))
    assert done.returncode == 2 and "given by" in done.stderr and "--latest" in done.stderr
    done = _script("suite_from_runs.py", "--suite", str(suite), "--latest", "--out", str(out), str(old),
                   str(tmp_path / "new"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "m=4096,d=768 is not in ln-small; skipped" in done.stderr
    record = json.loads(out.read_text())
    assert record["schema"] == "mage-tune.suite/1" and record["suite"] == "ln-small" and record["made_by"]
    assert (record["family"], record["gpu"], record["driver"]) == ("layernorm", "NVIDIA H200", "580.159.04")
    assert record["settings"]["trials"] == 3 and record["missing"] == ["m=2048,d=1536"]
    (row,) = record["shapes"]
    assert row["run"] == str(new) and row["best_us"] == 10.0 and row["within_3pct"] == 2  # the run named last
    again = (
        "suite_from_runs.py",
        "--suite",
        str(suite),
        "--latest",
        "--out",
        str(out),
        str(old),
        str(tmp_path / "new"),
    )
    done = _script(*again)  # the record is there: never replaced unless asked
    assert done.returncode == 1 and f"{out}: exists; give --force" in done.stderr and "Traceback" not in done.stderr
    assert json.loads(out.read_text()) == record
    assert _script(*again, "--force").returncode == 0
    other = _run_dir(tmp_path / "mm", {"m": 1024, "d": 512}, [1.0], {}, family="rmsnorm")
    done = _script("suite_from_runs.py", "--suite", str(suite), str(other))
    assert done.returncode == 2 and "a run of rmsnorm, not of the suite's layernorm" in done.stderr


def test_results_table_gives_a_row_per_shape(tmp_path):
    suite = suite_record.load(_suite(tmp_path))
    rows = [
        suite_record.from_run_dir(_run_dir(tmp_path / "a", {"m": 1024, "d": 512}, [None, 12.0, 10.2, 10.0],
                                           LN_BASELINES)),
        suite_record.from_run_dir(_run_dir(tmp_path / "b", {"m": 2048, "d": 1536}, [9.5] * 3 + [8.0],
                                           {"triton[num_warps=2]": ("triton", [8.5]),
                                            "copy[copy_two_per_thread]": ("copy", [8.2])})),
    ]  # fmt: skip
    rows[1]["run"] = "records/gpu-campaign.tar.xz:searches/layernorm-m2048d1536"  # a member of an archive
    path = tmp_path / "record.json"
    path.write_text(json.dumps(suite_record.make(suite, rows, "test")))
    done = _script("results_table.py", str(path), "--markdown", "--links-from", "docs")
    assert done.returncode == 0, done.stderr
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in done.stdout.splitlines() if "|" in line]
    assert lines[0] == ["m × d", "ours µs", "Triton best µs", "torch layer_norm µs", "copy µs", "ours / best baseline",
                        "(ours − copy)/(Triton − copy)", "trials to within 3 %", "record"]  # fmt: skip
    # the suite's order; the torch baseline missing from the second run; 8.0 µs under the copy's 8.2
    assert lines[2] == ["2048 × 1536", "8.00", "8.50", "–", "8.20", "0.941", "-0.67", "4",
                        "[gpu-campaign](../records/gpu-campaign.tar.xz) "
                        "`searches/layernorm-m2048d1536`"]  # fmt: skip
    assert lines[3] == ["1024 × 512", "10.00", "12.00", "20.00", "9.00", "0.833", "0.33", "3", f"`{tmp_path / 'a'}`"]
    assert "Suite `ln-small`, family `layernorm`:" in done.stdout
    assert "Median trials to within 3 %: 3.5 over 2 shapes." in done.stdout
    # the same rows as plain text
    assert results_table.rows(json.loads(path.read_text()))[1][1][:2] == ["1024 × 512", "10.00"]
    (tmp_path / "not.json").write_text('{"schema": "mage-tune.bench/1"}')
    done = _script("results_table.py", str(tmp_path / "not.json"))
    assert done.returncode == 2 and "not a suite record" in done.stderr


def test_a_tiny_suite_runs_end_to_end_without_a_gpu(tmp_path):
    """On a machine without a CUDA device `mage-tune search` scores configs with the static model: the suite's
    commands run as they are, and the record holds what the searches found."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(GOOD.replace('warm_start = "other-shapes"', 'warm_start = "off"') + "seed = 1\nworkers = 1\n")
    done = _script("run_suite.py", str(suite), "--out", str(tmp_path / "out"), "--db", "off")
    assert done.returncode == 0, done.stderr + (tmp_path / "out" / "layernorm-m1024d512.log").read_text()
    record = suite_record.read(tmp_path / "out" / "tiny.json")
    (row,) = record["shapes"]
    assert row["kind"] == "search" and row["trials"] == 3 and row["best_us"] > 0 and row["within_3pct"] <= 3
    assert row["search"] == {"trials": 3, "warm_start": "off", "sampler": "tpe", "seed": 1, "polish": None,
                             "workers": 1}  # fmt: skip
    assert record["missing"] == [] and record["made_by"] == "run_suite"
