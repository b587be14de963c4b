"""The tuning database and the warm start, on a machine without a GPU.

The database is filled from records of real H200 runs (bench records and a search's run directory, cut down from
records/*.tar.xz into tests/fixtures/); every number a test asserts is recomputed here from those files directly.
Searches are static (the census model scores), so what is checked is where the first trials come from:
  * import / list / query / export / import again / prune round-trip, with counts and best times equal to the files;
  * a static search at an unseen matmul shape starts with the best configs of the nearest measured shape, then the
    model's picks, then the sampler's; the report says which is which; --no-warm-start and other-shapes behave;
  * bad input: a file that is no record, an export line that is not one, --gpus without a GPU: one-line errors;
  * a database that cannot be written never stops a search, and importing a run again completes it;
  * the one-worker-per-GPU orchestration (static workers, so no GPU is needed) counts exactly on SQLite and
    PostgreSQL.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.problem import Problem
from mage_tune.search import sources
from mage_tune.tuning import learned
from mage_tune.tuning.db import Entry, TuningDB, shape_distance

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "fixtures"
BENCH = [
    RUNS / "shape-benches/rerun/mm_1000.json",
    RUNS / "shape-benches/rerun/mm_1024.json",
    RUNS / "shape-benches/rerun/mm_2048.json",
    RUNS / "shape-benches/explore/mm_1000_sample.json",  # a second record of one shape
]
SEARCH_DIR = RUNS / "oldest-records/search_mm"  # the oldest run directory: search.json, no run.json
TIMEOUT = 600


def cli(*args: str, db: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ}
    if db:
        env["MAGE_TUNE_DB"] = db
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=TIMEOUT,
    )


def _variants(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    return [r for r in data["results"] if r["kind"] == "variant"]


def _cold(result: dict) -> float | None:
    if not result["ok"]:
        return None
    return next(t["median_us"] for t in result["timings"] if t["regime"] == "cold")


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> str:
    url = "sqlite:///" + str(tmp_path_factory.mktemp("tuning-db") / "db.sqlite")
    out = cli("db", "import", *map(str, BENCH), str(SEARCH_DIR), db=url)
    assert out.returncode == 0, out.stderr
    assert f"imported {len(BENCH) + 1} run(s); 0 already present" in out.stdout
    return url


def test_import_list_query_round_trip(filled, tmp_path):
    again = cli("db", "import", str(BENCH[0]), str(SEARCH_DIR), db=filled)
    assert again.returncode == 0 and "imported 0 run(s); 2 already present" in again.stdout

    runs = json.loads(cli("db", "list", "--json", db=filled).stdout)
    assert len(runs) == len(BENCH) + 1
    by_where = {Path(r["where"]).resolve(): r for r in runs}
    for path in BENCH:
        r = by_where[path.resolve()]
        data = json.loads(path.read_text())
        assert r["family"] == "matmul" and r["shape"] == data["shape"] and r["arch"] == "sm_90"
        assert r["gpu"] == data["environment"]["gpu"] == "NVIDIA H200"
        assert r["trials"] == len(_variants(path))
        assert r["best"] == pytest.approx(min(v for v in map(_cold, _variants(path)) if v is not None))
        baselines = {x["label"] for x in data["results"] if x["kind"] != "variant" and x["ok"]}
        assert set(r["baselines"]) == baselines
    lines = [json.loads(x) for x in (SEARCH_DIR / "trials.jsonl").read_text().splitlines()]
    search = by_where[SEARCH_DIR.resolve()]
    assert search["trials"] == len(lines)
    assert search["best"] == pytest.approx(min(t["value"] for t in lines if t["outcome"] == "measured"))

    # query: the best measured config per shape, over every run of that shape
    best = json.loads(cli("db", "query", "matmul", "--top", "1", "--json", db=filled).stdout)
    expect: dict[str, tuple[float, dict]] = {}
    for path in BENCH:
        data = json.loads(path.read_text())
        for v in _variants(path):
            t = _cold(v)
            key = json.dumps(data["shape"], sort_keys=True)
            if t is not None and (key not in expect or t < expect[key][0]):
                expect[key] = (t, v["config"])
    for t in lines:
        key = json.dumps({"m": 1024, "n": 1024, "k": 1024}, sort_keys=True)
        if t["outcome"] == "measured" and t["value"] < expect[key][0]:
            expect[key] = (t["value"], t["config"])
    assert {json.dumps(b["shape"], sort_keys=True): (b["value"], b["config"]) for b in best} == expect

    # export, then import into an empty database: the same trials
    dump = tmp_path / "all.jsonl"
    assert cli("db", "export", str(dump), db=filled).returncode == 0
    other = "sqlite:///" + str(tmp_path / "other.sqlite")
    out = cli("db", "import", str(dump), db=other)
    assert out.returncode == 0 and f"imported {len(runs)} run(s)" in out.stdout
    assert sum(1 for _ in TuningDB(other).entries()) == sum(1 for _ in TuningDB(filled).entries())

    # prune drops runs of another compiler (here: every run, against a version none was made with)
    dry = cli("db", "prune", "--keep", "ptxas=0.0", "--dry-run", db=other)
    assert dry.stdout.count("would drop") == len(runs) and all(len(x) <= 100 for x in dry.stdout.splitlines())
    assert cli("db", "prune", "--keep", "ptxas=0.0", db=other).returncode == 0
    assert TuningDB(other).runs() == []
    kept = cli("db", "prune", "--keep", "ptxas=13.0.88", db=filled)
    assert kept.returncode == 0 and "0 run(s) dropped" in kept.stderr
    for name in ("cuobjdump", "ptxsa"):  # not a compiler (or misspelt): it would keep or drop by nothing that counts
        wrong = cli("db", "prune", "--keep", f"{name}=1", "--dry-run", db=filled)
        assert wrong.returncode == 2 and f"{name}: prune keeps runs by the compilers" in wrong.stderr


def _measured() -> list[tuple[str, float, dict]]:
    """(shape as JSON, cold µs, config) of every measured trial in the files."""
    out = []
    for path in BENCH:
        data = json.loads(path.read_text())
        out += [(json.dumps(data["shape"]), _cold(v), v["config"]) for v in _variants(path) if _cold(v) is not None]
    for t in (json.loads(x) for x in (SEARCH_DIR / "trials.jsonl").read_text().splitlines()):
        if t["outcome"] == "measured":
            out.append((json.dumps({"m": 1024, "n": 1024, "k": 1024}), t["value"], t["config"]))
    return out


def _nearest_best(shape: dict) -> tuple[dict, dict]:
    """The nearest measured shape among the files and its fastest config (completed with the family's defaults)."""
    family = get_family("matmul")
    shapes: dict[str, list[tuple[float, dict]]] = {}
    for shape_json, value, config in _measured():
        shapes.setdefault(shape_json, []).append((value, config))
    near = min(shapes, key=lambda s: shape_distance(json.loads(s), shape))
    for _, config in sorted(shapes[near], key=lambda p: p[0]):
        if set(config) <= {k.name for k in family.knobs}:
            try:
                return json.loads(near), family.complete(config, shape, get_arch("sm_90"))
            except Exception:
                continue
    raise AssertionError("no usable config")


def test_static_search_starts_from_the_nearest_shape_then_the_model(filled, tmp_path):
    shape = {"m": 1536, "n": 1536, "k": 1536}
    out = cli(
        "search", "matmul", "--m", "1536", "--n", "1536", "--k", "1536", "--static", "--trials", "20",
        "--seed", "1", "--workers", "2", "--run-dir", str(tmp_path / "run"), "--wide", db=filled,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "warm start:" in out.stderr and "model:" in out.stderr
    trials = sorted((json.loads(x) for x in (tmp_path / "run/trials.jsonl").read_text().splitlines()),
                    key=lambda t: t["number"])  # fmt: skip
    near_shape, near_config = _nearest_best(shape)
    assert near_shape == {"m": 2048, "n": 2048, "k": 2048}
    first = trials[0]
    assert first["source"] == "nearest m2048-n2048-k2048 #1" and first["config"] == near_config
    kinds = [t["source"].split(" ")[0] for t in trials]
    assert kinds[0] == "nearest" and "model" in kinds
    # The seeds run first; in the last quarter (5 trials) the polish takes what they leave: one-knob neighbours of
    # the best configs (search/polish.py), here with no sampler's draw between.
    seeds = [k for k in kinds if k in ("nearest", "new", "model")]
    assert kinds[: len(seeds)] == seeds and len(seeds) >= 15
    assert kinds[len(seeds) :] == ["polish"] * (20 - len(seeds))
    # Knob values no record took (the records hold no split-K, no A through registers, ...) are each tried on the
    # nearest best config, six of them (the model's picks where one is fitted), changing only what their
    # constraints need.
    taken: dict[str, set] = {}
    for _, _, config in _measured():
        for k, v in get_family("matmul").with_defaults(config).items():
            taken.setdefault(k, set()).add(v)
    fresh = [t for t in trials if t["source"].startswith("new value ")]
    assert len(fresh) == 6 and kinds[len(kinds) - kinds[::-1].index("nearest")] == "new"  # right after the nearest
    for t in fresh:
        knob, value = t["source"].removeprefix("new value ").split(" on ")[0].split("=")
        assert str(near_config[knob]) != value and value not in {str(v) for v in taken[knob]}
        assert str(t["config"][knob]) == value
        assert len({k for k, v in t["config"].items() if v != near_config[k]} - {knob}) <= 2
    assert "knob values new to the database" in out.stdout
    last_seed = max(i for i, k in enumerate(kinds) if k != "tpe")
    assert all(k != "tpe" for k in kinds[: last_seed + 1])  # every seed runs before the sampler's trials
    assert "nearest shapes (tuning database)" in out.stdout and "model (tuning database)" in out.stdout
    assert "## Where the trials came from" in (tmp_path / "run/report.md").read_text()

    # the run itself is in the database now, as a static run (warm starts use measured runs only)
    runs = json.loads(cli("db", "list", "--json", db=filled).stdout)
    mine = [r for r in runs if r["shape"] == shape]
    assert len(mine) == 1 and mine[0]["objective"] == "static-model-us/5" and mine[0]["trials"] == 20


def test_no_warm_start_and_other_shapes(filled, tmp_path):
    out = cli(
        "search", "matmul", "--m", "1536", "--n", "1536", "--k", "1536", "--static", "--trials", "4",
        "--no-warm-start", "--run-dir", str(tmp_path / "cold"), db=filled,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    sources = {json.loads(x)["source"] for x in (tmp_path / "cold/trials.jsonl").read_text().splitlines()}
    assert sources == {"tpe"}

    out = cli(
        "search", "matmul", "--m", "2048", "--n", "2048", "--k", "2048", "--static", "--trials", "4",
        "--warm-start", "other-shapes", "--run-dir", str(tmp_path / "held-out"), db=filled,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    sources = [json.loads(x)["source"] for x in (tmp_path / "held-out/trials.jsonl").read_text().splitlines()]
    assert sources and not any("m2048-n2048-k2048" in s for s in sources)
    assert any(s.startswith("nearest ") for s in sources)


def test_bad_inputs_are_one_line_errors(filled, tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    out = cli("db", "import", str(junk), db=filled)
    assert out.returncode == 2 and str(junk) in out.stderr and "Traceback" not in out.stderr

    bench = json.loads(BENCH[0].read_text())
    shapeless = tmp_path / "shapeless.json"
    shapeless.write_text(json.dumps({**bench, "shape": [1000, 1000]}))
    out = cli("db", "import", str(shapeless), db=filled)
    assert out.returncode == 2 and str(shapeless) in out.stderr and "not a mapping" in out.stderr

    lines = tmp_path / "bad.jsonl"
    lines.write_text('{"schema": "mage-tune.tuning-db/1", "run": {}}\n')
    out = cli("db", "import", str(lines), db=filled)
    assert out.returncode == 2 and f"{lines}:1" in out.stderr and "Traceback" not in out.stderr
    exported = cli("db", "export", "-", db=filled).stdout.splitlines()
    first = json.loads(exported[0])
    lines.write_text(exported[0] + "\n" + json.dumps({**first, "value": "fast"}) + "\n")
    out = cli("db", "import", str(lines), db=filled)
    assert out.returncode == 2 and f"{lines}:2" in out.stderr and "'fast' is not of type" in out.stderr

    # one run's lines must agree on its context: an edited one would ride on the first's run
    by_run: dict[str, list[str]] = {}
    for x in exported:
        by_run.setdefault(json.loads(x)["run"]["name"], []).append(x)
    same = max(by_run.values(), key=len)  # a run of several trials
    second = json.loads(same[1])
    lines.write_text(same[0] + "\n" + json.dumps({**second, "run": {**second["run"], "arch": "sm_80"}}) + "\n")
    out = cli("db", "import", str(lines), db=filled)
    assert out.returncode == 2 and f"{lines}:2: run " in out.stderr and "than on line 1" in out.stderr

    out = cli("db", "export", str(tmp_path / "no" / "such" / "dir.jsonl"), db=filled)
    assert out.returncode == 2 and "cannot write" in out.stderr and "Traceback" not in out.stderr

    out = cli("search", *("matmul", "--m", "64", "--n", "64", "--k", "64"), "--gpus", "all", "--trials", "2")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "--gpus" in out.stderr


def test_an_unwritable_database_never_stops_a_search(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    url = "sqlite:///" + str(blocker / "under-a-file.sqlite")
    out = cli(
        "search", "matmul", "--m", "64", "--n", "64", "--k", "64", "--static", "--trials", "3",
        "--run-dir", str(tmp_path / "run"), db=url,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "tuning database" in out.stderr and "not written" in out.stderr and "Traceback" not in out.stderr
    lines = [json.loads(line) for line in (tmp_path / "run/trials.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    # nothing could be read, so nothing is known: the family's defaults go first (they score at this shape, where
    # a sampler's first draws may all spill)
    first = min(lines, key=lambda t: t["number"])
    assert first["source"] == "default" and "the family's defaults first" in " ".join(out.stderr.split())


def test_shape_distance_is_on_log_sizes():
    assert shape_distance({"m": 1024}, {"m": 2048}) == pytest.approx(1.0)
    assert shape_distance({"m": 1024, "n": 4096}, {"m": 2048, "n": 1024}) == pytest.approx(math.sqrt(5))
    assert shape_distance({"m": 1}, {"d": 1}) == math.inf


def test_importing_a_run_again_adds_only_what_the_database_lacks(tmp_path):
    """A run whose database writes failed part-way is completed by importing its run directory again."""
    import shutil

    run = tmp_path / "search_mm"
    shutil.copytree(SEARCH_DIR, run)
    lines = (SEARCH_DIR / "trials.jsonl").read_text().splitlines()
    (run / "trials.jsonl").write_text("\n".join(lines[:10]) + "\n")
    url = "sqlite:///" + str(tmp_path / "db.sqlite")
    assert "imported 1 run(s); 0 already present" in cli("db", "import", str(run), db=url).stdout
    (run / "trials.jsonl").write_text("\n".join(lines) + "\n")
    assert "imported 0 run(s); 1 already present" in cli("db", "import", str(run), db=url).stdout
    numbers = sorted(e.number for e in TuningDB(url).entries())
    assert numbers == sorted(json.loads(x)["number"] for x in lines)  # every trial once
    cli("db", "import", str(run), db=url)
    assert len(list(TuningDB(url).entries())) == len(lines)


@pytest.mark.parametrize("storage", ["sqlite", "postgresql"])
def test_one_worker_per_device_counts_exactly(storage, tmp_path):
    """The --gpus orchestration (one spawned search process per device on one study and run directory), run here
    with static workers so it is checked without a GPU: together the workers count exactly the trials asked."""
    import uuid

    from mage_tune.kernels import get_family
    from mage_tune.search.gpus import run_on_gpus
    from mage_tune.search.runner import COUNTED, Search, _counted
    from mage_tune.search.spec import SearchSpec

    url = None
    if storage == "postgresql":
        url = os.environ.get("MAGE_TUNE_TEST_POSTGRES")
        if not url:
            pytest.skip("MAGE_TUNE_TEST_POSTGRES is not set (.ci/run starts a PostgreSQL server and sets it)")
    family = get_family("layernorm")
    spec = SearchSpec(
        "layernorm", {"m": 256, "d": 64}, get_arch("sm_90"), 10, "random", url, f"devices-{uuid.uuid4().hex}",
        tmp_path / "run", 1, True, 0, "layernorm", db="off",
    )  # fmt: skip
    parent = Search(spec, family, print)
    parent.heartbeat.close()
    shown = []
    run_on_gpus(spec, parent.study, ["0", "1"], lambda done, best: shown.append(done))
    trials = [json.loads(x) for x in (tmp_path / "run/trials.jsonl").read_text().splitlines()]
    assert len(trials) == 10 and len({t["number"] for t in trials}) == 10
    counted = [t for t in parent.study.get_trials() if t.user_attrs.get("outcome") in COUNTED]
    assert len(counted) == 10 and _counted(parent.study)[0] == 10
    assert shown and shown[-1] == 10
    assert len((tmp_path / "run/environment.jsonl").read_text().splitlines()) == 2  # each worker recorded its own


def test_the_model_learns_times_over_the_fastest_baseline_of_each_run():
    """A trial's training target is its log time over the fastest baseline measured in its run (here the same-bytes
    copy), recomputed from the bench record itself; a run without baselines is measured against its trials' mean."""
    path = RUNS / "wide-row-bench/rows_sweep/layernorm-m8192d6144.json"
    run, rows = sources.bench_record(path)
    entries = [Entry(run, r["number"], r["config"], r["outcome"], r["value"]) for r in rows]
    data = json.loads(path.read_text())
    fastest = min(_cold(r) for r in data["results"] if r["kind"] != "variant" and r["ok"])
    assert fastest == min(v for k, v in run.baselines.items() if k.startswith("copy["))
    family = get_family("layernorm")
    targets = [r.target for r in learned.training_rows(family, get_arch("sm_90"), entries)]
    times = [_cold(r) for r in _variants(path)]
    assert len(targets) == len(times) == 5
    assert targets == pytest.approx([math.log(t / fastest) for t in times])
    assert all(t > 0 for t in targets)  # no layer norm here is faster than the copy

    bare = [replace(e, run=replace(run, baselines={})) for e in entries]
    logs = [math.log(t) for t in times]
    mean = sum(logs) / len(logs)
    assert [r.target for r in learned.training_rows(family, get_arch("sm_90"), bare)] == pytest.approx(
        [lt - mean for lt in logs]
    )


def test_a_run_whose_baseline_is_unusually_slow_is_measured_against_its_best_trial():
    """Where a run's fastest baseline over its best trial is far above the ratio usual among the family's runs
    (cuBLAS's slow kernel at an off-pitch shape), its trials are measured against their best times that usual ratio;
    a run whose trials are the slow ones keeps its baseline; so does every usual run; and with fewer than three runs
    with baselines nothing says what is usual."""
    from mage_tune.tuning.db import RunInfo

    family = get_family("matmul-bf16")

    def run(name: str, m: int, baseline: float, times: list[float]) -> list[Entry]:
        info = RunInfo(name, "matmul-bf16", "built-in", {"m": m, "n": 2048, "k": 2048}, "sm_90a", "measured",
                       baselines={"torch.matmul (cuBLAS BF16)": baseline})  # fmt: skip
        config = family.default_config({"m": m, "n": 2048, "k": 2048}, get_arch("sm_90a"))
        return [Entry(info, i, config, "measured", t) for i, t in enumerate(times)]

    usual = [
        run(f"usual-{i}", 2048 + 256 * i, 100.0, [100.0 * r, 105.0, 120.0]) for i, r in enumerate((0.90, 0.92, 0.94))
    ]
    slow_baseline = run("slow-baseline", 3000, 250.0, [100.0, 110.0, 130.0])  # the baseline 2.5 x the best
    slow_trials = run("slow-trials", 3500, 100.0, [200.0, 220.0, 260.0])  # our configs 2 x the baseline
    entries = [e for group in (*usual, slow_baseline, slow_trials) for e in group]
    targets: dict[str, list[float]] = {}
    for row in learned.training_rows(family, get_arch("sm_90a"), entries):
        targets.setdefault(row.run, []).append(row.target)

    # the runs' baseline over their best trial: 1 / 0.90, 1 / 0.92, 1 / 0.94, 2.5 and 0.5; the median 1 / 0.92
    usual_gap = math.log(1 / 0.92)
    assert targets["usual-0"] == pytest.approx([math.log(0.90), math.log(1.05), math.log(1.2)])
    # against its best trial at the usual ratio, not the 250 µs baseline: its 100 µs counts as 0.92, not 0.4
    assert targets["slow-baseline"] == pytest.approx([math.log(t / 100.0) - usual_gap for t in (100.0, 110.0, 130.0)])
    # its configs were slow, not its baseline: measured against its 100 µs baseline, 2 x and more
    assert targets["slow-trials"] == pytest.approx([math.log(2.0), math.log(2.2), math.log(2.6)])

    two = [e for group in (usual[0], slow_baseline) for e in group]
    rows = [r for r in learned.training_rows(family, get_arch("sm_90a"), two) if r.run == "slow-baseline"]
    assert [r.target for r in rows] == pytest.approx([math.log(t / 250.0) for t in (100.0, 110.0, 130.0)])


def test_the_model_sees_a_persistent_grid_s_tile_waves_and_the_tiles_past_a_ragged_edge():
    """A persistent grid is one wave of blocks whatever the shape: the features that tell a ragged shape's configs
    apart are the family's work units over the resident blocks and the tiles' area inside the output. 2 × 2
    clusters hold 120 blocks at once on the arch's part (30 clusters), pairs all 132."""
    problem = Problem(get_family("matmul-bf16"), {"m": 5000, "n": 2600, "k": 4000}, get_arch("sm_90a"))
    family = problem.family
    wide = learned.features(problem, family.with_defaults({"bn": 224, "cluster": 4, "multicast": 1}), None)
    narrow = learned.features(problem, family.with_defaults({"bn": 192, "cluster": 4, "multicast": 1}), None)
    assert wide["waves"] == narrow["waves"] == wide["last_wave_share"] == 1  # a block on each of 120 SMs
    assert wide["work_waves"] == 40 * 12 / 120 == 4 and narrow["work_waves"] == pytest.approx(40 * 14 / 120)
    assert wide["work_last_wave_share"] == 1 and narrow["work_last_wave_share"] == pytest.approx(560 / (5 * 120))
    pair = learned.features(problem, family.with_defaults({"bn": 224, "cluster": 2, "multicast": 1}), None)
    assert pair["waves"] == 1 and pair["work_waves"] == pytest.approx(40 * 12 / 132)  # pairs: every SM
    per_tile = learned.features(problem, family.with_defaults({"bn": 224, "cluster": 4, "multicast": 1,
                                                                "persistent": 0}), None)  # fmt: skip
    assert per_tile["waves"] == 480 / 120 and per_tile["last_wave_share"] == 1  # 480 blocks in waves of 120
    assert wide["tile_area_inside"] == pytest.approx(5000 * 2600 / (5120 * 2688))
    assert narrow["tile_area_inside"] == pytest.approx(5000 * 2600 / (5120 * 2688))  # 14 × 192 = 12 × 224 = 2688
    layernorm = Problem(get_family("layernorm"), {"m": 4096, "d": 768}, get_arch("sm_90"))
    assert "tile_area_inside" not in learned.features(layernorm, layernorm.family.with_defaults({}), None)


def test_the_default_database_sits_beside_the_compile_cache_not_in_it(tmp_path, monkeypatch):
    """$MAGE_TUNE_CACHE/tuning.db, as the README says: clearing the compile cache keeps it. One that earlier versions
    made in the compile cache is used until the new place has one."""
    from mage_tune.tuning.db import default_url

    monkeypatch.setenv("MAGE_TUNE_CACHE", str(tmp_path))
    monkeypatch.delenv("MAGE_TUNE_DB", raising=False)
    assert default_url() == f"sqlite:///{tmp_path}/tuning.db"
    (tmp_path / "compile").mkdir()
    (tmp_path / "compile" / "tuning.db").write_bytes(b"")
    assert default_url() == f"sqlite:///{tmp_path}/compile/tuning.db"
    (tmp_path / "tuning.db").write_bytes(b"")
    assert default_url() == f"sqlite:///{tmp_path}/tuning.db"


def test_a_database_whose_driver_is_missing_names_what_to_install(tmp_path):
    out = cli("db", "list", "--db", "mysql://user:secret@host/db", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "secret" not in out.stderr
    assert "no Python driver for mysql is installed" in out.stderr and "pip install pymysql" in out.stderr


@pytest.mark.parametrize("db", ["junk://x", "not-a-url.cu"])
def test_a_search_with_a_db_that_names_no_database_is_refused_before_it_starts(db, tmp_path):
    """A --db that is no database URL is the user's input, refused in one line (exit 2) like `db list` refuses it;
    the run directory is not even made. (A database that fails during a search is said once; the search goes on.)"""
    out = cli(
        "search", "layernorm", "--d", "768", "--static", "--trials", "1", "--db", db,
        "--run-dir", str(tmp_path / "run"), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("mage-tune: error: ") and db in out.stderr
    assert not (tmp_path / "run").exists()


def test_query_reads_the_shipped_data_when_asked_and_refuses_filters_that_match_nothing(tmp_path):
    """`db query --shipped` answers from the shipped data; an empty database says the shipped data has the family;
    an arch mage-tune does not know and a dimension the family does not take are errors, not empty answers."""
    from mage_tune.tuning import shipped

    measured = [e for e in shipped.entries(family="layernorm") if e.value is not None]
    if not measured:
        pytest.skip("no shipped layernorm data in this package")
    best = min((e for e in measured if e.run.shape == measured[0].run.shape), key=lambda e: e.value)
    shape = ",".join(f"{k}={v}" for k, v in best.run.shape.items())
    empty = "sqlite:///" + str(tmp_path / "empty.sqlite")
    assert cli("db", "import", str(SEARCH_DIR), db=empty).returncode == 0  # a database without layernorm
    out = cli("db", "query", "layernorm", "--shape", shape, db=empty)
    assert out.returncode == 0 and "db query layernorm --shipped" in out.stderr
    got = json.loads(cli("db", "query", "layernorm", "--shape", shape, "--shipped", "--json", db=empty).stdout)
    assert got[0]["value"] == best.value and got[0]["shape"] == best.run.shape
    for bad, says in ((("--arch", "sm_999"), "unknown arch 'sm_999'"), (("--shape", "x=1"), "not x")):
        out = cli("db", "query", "layernorm", *bad, db=empty)
        assert out.returncode == 2 and says in out.stderr


def test_a_misspelt_family_is_an_error_not_an_empty_answer(tmp_path):
    db = "sqlite:///" + str(tmp_path / "db.sqlite")
    assert cli("db", "import", str(SEARCH_DIR), db=db).returncode == 0
    for args in (("query", "layernrom"), ("list", "--family", "layernrom"), ("query", "layernrom", "--shipped")):
        out = cli("db", *args, db=db)
        assert out.returncode == 2 and "no family 'layernrom' is known here" in out.stderr, out.stderr
        assert "did you mean layernorm" in out.stderr
    out = cli("db", "query", "matmul-f16", db=db)  # known, not in this database: an answer that says so
    assert out.returncode == 0 and "no measured trial of matmul-f16 in the tuning database" in out.stderr


def test_an_export_of_a_family_the_database_lacks_writes_nothing(tmp_path):
    db = "sqlite:///" + str(tmp_path / "db.sqlite")
    assert cli("db", "import", str(SEARCH_DIR), db=db).returncode == 0
    out = cli("db", "export", str(tmp_path / "fam.jsonl"), "--family", "nosuch", db=db)
    assert out.returncode == 2 and "no run of family nosuch in the tuning database" in out.stderr
    assert not (tmp_path / "fam.jsonl").exists()


def test_a_shape_reads_in_its_family_s_order_of_dimensions_and_sorts_by_size():
    from mage_tune.tuning.db import RunInfo

    def run(family: str, shape: dict) -> RunInfo:
        return RunInfo("r", family, family, shape, "sm_90a", "measured-cold-median-us/1")

    assert run("matmul-bf16", {"k": 1100, "m": 4500, "n": 3000}).shape_key() == "m4500-n3000-k1100"
    assert run("layernorm", {"d": 768, "m": 4096}).shape_key() == "m4096-d768"
    assert run("path/to/family.py", {"d": 768, "m": 4096}).shape_key() == "d768-m4096"  # as recorded
    shapes = [{"d": 512, "m": 16384}, {"d": 512, "m": 4096}, {"d": 8192, "m": 1024}]
    ordered = sorted((run("layernorm", s) for s in shapes), key=RunInfo.shape_order)
    assert [r.shape_key() for r in ordered] == ["m1024-d8192", "m4096-d512", "m16384-d512"]


def test_query_leaves_out_configs_the_family_cannot_build(tmp_path):
    """A record may hold a config of knobs or values since retired (or edited in): imported as the history it is,
    never ranked as an answer by `db query`, which says how many it left out."""
    db = "sqlite:///" + str(tmp_path / "db.sqlite")
    assert cli("db", "import", str(SEARCH_DIR), db=db).returncode == 0
    exported = [json.loads(x) for x in cli("db", "export", "-", db=db).stdout.splitlines()]
    best = min((x for x in exported if x["value"] is not None), key=lambda x: x["value"])
    forged = {**best, "number": 10_000, "value": best["value"] / 10, "config": {**best["config"], "bogus": 3}}
    edited = tmp_path / "edited.jsonl"
    edited.write_text(json.dumps(forged) + "\n")
    assert cli("db", "import", str(edited), db=db).returncode == 0
    out = cli("db", "query", "matmul", "--json", db=db)
    said = " ".join(out.stderr.split())  # the note wraps to the terminal
    assert out.returncode == 0 and "left out: 1 measured trial(s)" in said and "no knob 'bogus'" in said
    assert all("bogus" not in row["config"] for row in json.loads(out.stdout))


def test_a_family_file_is_found_by_any_path_to_it(tmp_path, monkeypatch):
    """A run records a family file relative to where it was searched (examples/f.py); from a subfolder, by an
    absolute path or with its NAME, the same file names the same runs; another file or NAME does not."""
    from mage_tune.tuning.db import RunInfo

    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "f.py").write_text("")
    (tmp_path / "sub").mkdir()
    run = RunInfo("r", "rms", "examples/f.py", {"d": 8}, "sm_90", "measured-cold-median-us/1")
    named = RunInfo("r", "rms", "examples/f.py:FAST", {"d": 8}, "sm_90", "measured-cold-median-us/1")
    monkeypatch.chdir(tmp_path / "sub")
    assert run.is_of("rms") and run.is_of("examples/f.py")
    assert run.is_of("../examples/f.py") and run.is_of(str(tmp_path / "examples" / "f.py"))
    assert named.is_of("../examples/f.py:FAST") and not named.is_of("../examples/f.py")
    assert not run.is_of("../examples/g.py") and not run.is_of("rmsnorm")


def test_query_ranks_each_gpu_s_trials_apart(tmp_path):
    """One shape measured on two GPUs: `--top 2` gives each GPU its two fastest, ranked 1 and 2 among its own
    trials (one GPU's times never rank another's), the same config on both included."""
    from tuning_data import layernorm_configs, make_db, run

    shape = {"m": 4096, "d": 768}
    configs = layernorm_configs(shape, 4, 0)
    slow, fast = run("layernorm", shape, configs, gpu="GPU A"), run("layernorm", shape, configs, gpu="GPU B")
    fast = (fast[0], [r | {"value": r["value"] / 10} for r in fast[1]])  # every GPU B time under every GPU A time
    db = make_db(tmp_path / "two.sqlite", [slow, fast])
    got = json.loads(cli("db", "query", "layernorm", "--top", "2", "--json", db=db).stdout)
    by_gpu = {g: [(r["rank"], r["value"]) for r in got if r["gpu"] == g] for g in ("GPU A", "GPU B")}
    for gpu, (_, rows) in (("GPU A", slow), ("GPU B", fast)):
        assert by_gpu[gpu] == list(enumerate(sorted(r["value"] for r in rows)[:2], 1))
    assert [r["config"] for r in got if r["gpu"] == "GPU A"] == [r["config"] for r in got if r["gpu"] == "GPU B"]
