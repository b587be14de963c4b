"""The tuning database and `--gpus` on real GPUs: a measured search warm-started from H200 records (tests/fixtures/),
run with one measuring worker per GPU of the host, counts exactly, times its baselines on every GPU that
timed trials, and lands in the database with its GPU and baselines. Skipped where no CUDA device is present."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mage_tune.search import sources
from mage_tune.tuning import shipped
from mage_tune.tuning.db import run_distance

ROOT = Path(__file__).resolve().parents[2]
BENCH = [ROOT / f"tests/fixtures/shape-benches/rerun/mm_{n}.json" for n in (1000, 1024, 2048)]
BENCH.append(ROOT / "tests/fixtures/shape-benches/explore/mm_1000_sample.json")

pytestmark = pytest.mark.gpu


def cli(*args: str, db: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MAGE_TUNE_DB": db}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=900
    )


def test_warm_started_search_on_every_gpu(tmp_path):
    from mage_tune.measure.device import gpu_count, gpu_name

    db = "sqlite:///" + str(tmp_path / "tuning.sqlite")
    assert cli("db", "import", *map(str, BENCH), db=db, cwd=tmp_path).returncode == 0
    run_dir = tmp_path / "run"
    out = cli(
        "search", "matmul", "--m", "1536", "--n", "1536", "--k", "1536", "--trials", "16", "--gpus", "all",
        "--workers", "6", "--run-dir", str(run_dir), "--json", db=db, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "one measuring worker per GPU" in out.stderr

    trials = sorted((json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines()),
                    key=lambda t: t["number"])  # fmt: skip
    assert len(trials) == 16 and len({t["number"] for t in trials}) == 16  # exact count, none twice
    # the nearest measured (GPU, shape) of the database's (the fixtures: 1000³, 1024³, 2048³, on an H200) and the
    # shipped data's, whichever that data holds today; another GPU's said as such
    arch = json.loads((run_dir / "run.json").read_text())["arch"]
    here = gpu_name()
    held = [info for path in BENCH for info, _ in sources.load_path(path)]
    held += [e.run for e in shipped.entries("matmul", arch) if e.measured]
    nearest = min(held, key=lambda r: (run_distance(r, {"m": 1536, "n": 1536, "k": 1536}, here), r.gpu != here))
    whose = f" on {nearest.gpu}" if nearest.gpu != here else ""
    first = re.fullmatch(rf"nearest (\S+){re.escape(whose)} #1", trials[0]["source"])
    assert first and {d: int(v) for d, v in re.findall(r"([a-z]+)(\d+)", first[1])} == nearest.shape
    measured = [t for t in trials if t["outcome"] == "measured"]
    assert measured and all(t["value"] > 0 for t in measured)
    assert any(t["source"].startswith(("nearest", "model")) for t in measured)

    # every GPU worker recorded its environment and measured the baselines in its own session
    envs = [json.loads(x) for x in (run_dir / "environment.jsonl").read_text().splitlines()]
    pinned = {e.get("cuda_visible_devices") for e in envs if e.get("cuda_visible_devices")}
    assert pinned == {str(i) for i in range(gpu_count())}
    baselines = [json.loads(x) for x in (run_dir / "baselines.jsonl").read_text().splitlines()]
    cublas = [b for b in baselines if b["result"]["kind"] == "torch" and b["result"]["ok"]]
    assert len(cublas) >= gpu_count()

    # the database holds the run: its GPU, its measured trials, the baselines of the same run
    runs = json.loads(cli("db", "list", "--json", db=db, cwd=tmp_path).stdout)
    mine = [r for r in runs if r["shape"] == {"m": 1536, "n": 1536, "k": 1536}]
    assert len(mine) == 1
    assert mine[0]["gpu"] == gpu_name() and mine[0]["trials"] == 16
    assert mine[0]["objective"] == "measured-cold-median-us/1"
    assert any(label.startswith("torch.matmul") for label in mine[0]["baselines"])
    assert mine[0]["best"] == pytest.approx(min(t["value"] for t in measured))


def test_gpus_names_a_missing_device(tmp_path):
    out = cli("search", "layernorm", "--d", "256", "--m", "256", "--gpus", "0,99", "--trials", "2",
              db="sqlite:///" + str(tmp_path / "t.sqlite"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 2 and "'99' is not a GPU index here" in out.stderr and "Traceback" not in out.stderr


def test_a_measured_search_polishes_its_best_configs(tmp_path):
    """The last --polish trials of a measured search are one-knob neighbours of its best configs, timed like any
    other trial (correct first), and the table of sources names them."""
    run_dir = tmp_path / "run"
    out = cli(
        "search", "layernorm", "--d", "1024", "--m", "4096", "--trials", "12", "--polish", "4", "--workers", "4",
        "--seed", "2", "--db", "off", "--run-dir", str(run_dir), db="sqlite:///" + str(tmp_path / "unused.sqlite"),
        cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    trials = sorted((json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines()),
                    key=lambda t: t["number"])  # fmt: skip
    assert len(trials) == 12
    polished = trials[-4:]
    assert all(t["source"].startswith("polish ") for t in polished)
    assert not any(t["source"].startswith("polish ") for t in trials[:-4])
    # a neighbour the census vetoes (spills, say) is pruned like any trial; none may fail its check against the
    # reference
    outcomes = [(t["outcome"], t.get("reason", "")) for t in polished]
    assert all(outcome in ("measured", "duplicate", "pruned") for outcome, _ in outcomes), outcomes
    measured = [t for t in polished if t["outcome"] == "measured"]
    assert measured and all(t["measurement"]["ok"] and t["value"] > 0 for t in measured), outcomes
    assert "polish (neighbours of the best)" in out.stdout
