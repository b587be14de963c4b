"""The independent re-timer (benchmarks/gpu/retime_independent.py) on H200 search winners (tests/fixtures/): it rebuilds
the very cubin the search timed (or flags one that differs), launches it outside mage-tune's harness, finds it
correct, and times it beside torch. Skipped where no CUDA device is present."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNS = [
    ROOT / "tests/fixtures/matmul-3xtf32/searches/matmul-3xtf32-m512n512k512",
    ROOT / "tests/fixtures/layernorm-winner/searches/layernorm-m2048d1536",
]

pytestmark = pytest.mark.gpu


def _retimer():
    spec = importlib.util.spec_from_file_location("retime_independent", ROOT / "benchmarks/gpu/retime_independent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_winners_retimed_outside_the_harness(tmp_path):
    out = tmp_path / "retime.json"
    assert _retimer().main([*map(str, RUNS), "--rounds", "1", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["harness"].startswith("single launches") and record["environment"]["gpu"]
    for run, row in zip(RUNS, record["winners"], strict=True):
        best = json.loads((run / "best" / "best.json").read_text())
        assert row["same_binary"] and row["cubin_sha256"] == best["cubin_sha256"]  # the binary the search timed
        assert row["ok"] and row["rel_err"] <= row["tolerance"]
        assert row["ours_us"] > 0 and row["torch_us"] > 0 and row["search_torch_us"] > 0


def test_a_changed_binary_is_flagged(tmp_path):
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    for name in ("run.json", "baselines.jsonl"):
        (run / name).write_text((RUNS[0] / name).read_text())
    best = json.loads((RUNS[0] / "best" / "best.json").read_text())
    (run / "best" / "best.json").write_text(json.dumps({**best, "cubin_sha256": "0" * 64}))
    out = tmp_path / "retime.json"
    assert _retimer().main([str(run), "--rounds", "1", "--json", str(out)]) == 1
    (row,) = json.loads(out.read_text())["winners"]
    assert row["ok"] and not row["same_binary"]
