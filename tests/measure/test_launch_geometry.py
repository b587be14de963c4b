"""What a measurement keeps of its launch beyond the job, without a GPU: the grid a launcher launched where that is
not the variant's (matmul-bf16 cuts a persistent grid of clusters to those resident at once) and the driver's count of
resident blocks in clusters; it is written with a bench record's results and a trial's measurement and read back
through the trial's schema, and a damaged value is refused."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

from mage_tune.measure.harness import launch_geometry
from mage_tune.measure.records import Job, Result
from mage_tune.records import schema

JOB = Job(label="v", kind="variant", grid=(132, 1, 1), block=(384, 1, 1))


def test_a_launcher_s_cut_grid_and_resident_count_are_kept():
    cut = SimpleNamespace(grid=(128, 1, 1), resident_blocks=128)
    assert launch_geometry(cut, JOB) == {"launched_grid": (128, 1, 1), "resident_blocks": 128}
    uncut = SimpleNamespace(grid=(132, 1, 1), resident_blocks=132)  # pairs on a part that holds 66
    assert launch_geometry(uncut, JOB) == {"resident_blocks": 132}
    no_clusters = SimpleNamespace(grid=(132, 1, 1), resident_blocks=None)
    assert launch_geometry(no_clusters, JOB) == {}
    assert launch_geometry(lambda bufs: None, JOB) == {}  # a baseline's launcher says nothing
    assert launch_geometry(SimpleNamespace(grid=[64, 1, 1], resident_blocks=True), JOB) == {}  # not a grid nor count
    assert launch_geometry(SimpleNamespace(grid=(64,), resident_blocks=None), JOB) == {}  # a record's grids are 3-D


def test_the_kept_launch_is_written_and_read_back_through_the_trial_schema():
    result = Result(label="v", kind="variant", session=0, ok=True, launched_grid=(128, 1, 1), resident_blocks=128)
    data = dataclasses.asdict(result)
    back = Result.from_json({**data, "launched_grid": list(data["launched_grid"])})
    assert back == result and back.launched_grid == (128, 1, 1)
    assert Result.from_json({"label": "v", "kind": "variant", "session": 0, "ok": True}).launched_grid is None
    trial = {"number": 3, "outcome": "failed", "measurement": {"launched_grid": [128, 1, 1], "resident_blocks": 128}}
    assert schema.problem("trial", trial) == ""
    for damaged in (
        {"launched_grid": [0, 1, 1]},
        {"launched_grid": "128"},
        {"launched_grid": [128]},
        {"resident_blocks": -1},
    ):
        assert schema.problem("trial", {**trial, "measurement": damaged}).startswith("measurement.")


def test_a_padded_launch_says_what_its_inner_launcher_launches():
    """Where K or N is off the 16-byte pitch the variant runs on padded copies (PaddedLauncher): the grid and the
    resident count kept are its inner launcher's."""
    from mage_tune.kernels.matmul_bf16 import PaddedLauncher

    inner = SimpleNamespace(grid=(120, 1, 1), resident_blocks=120)
    padded = PaddedLauncher(inner, {"m": 64, "n": 60, "k": 60}, "bfloat16", lambda *a: None, lambda *a: None)
    assert launch_geometry(padded, JOB) == {"launched_grid": (120, 1, 1), "resident_blocks": 120}


def test_explain_of_a_search_says_how_its_winner_was_launched(tmp_path):
    """A run directory's winner in clusters: the blocks launched (the grid fitted to the driver's count: cut, or
    grown past a plan made for another part) and that count; a trial measured without one says nothing of it."""
    from mage_tune.search.report import explain_text

    measurement = {"label": "q", "ok": True, "launched_grid": [120, 1, 1], "resident_blocks": 120}
    trials = [
        {"number": 0, "outcome": "measured", "value": 250.0, "config": {"cluster": 4}, "grid": [132, 1, 1],
         "measurement": measurement},
        {"number": 1, "outcome": "measured", "value": 260.0, "config": {"cluster": 1}, "grid": [132, 1, 1],
         "measurement": {"label": "p", "ok": True}},
    ]  # fmt: skip
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials))
    text = explain_text(tmp_path, with_triton=False)
    said = "launched: 120 blocks, cut from 132; 120 blocks of its clusters resident at once (the driver's count)"
    assert said in text
    trials[0]["grid"], measurement["launched_grid"], measurement["resident_blocks"] = [120, 1, 1], [128, 1, 1], 128
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials))
    assert "launched: 128 blocks, grown from 120; 128 blocks" in explain_text(tmp_path, with_triton=False)
    trials[0]["grid"] = []  # a damaged grid: the count alone is said
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials))
    assert "launched: 128 blocks; 128 blocks of its clusters" in explain_text(tmp_path, with_triton=False)
    trials[0]["measurement"] = {"label": "q", "ok": True}
    (tmp_path / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials))
    assert "launched:" not in explain_text(tmp_path, with_triton=False)
