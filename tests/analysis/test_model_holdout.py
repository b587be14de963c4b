"""analysis/model_holdout.py on one published campaign: the time model, trained on the other shapes' records, ranks
the configs measured at each held-out shape, for an arch-specific Hopper family (sm_90a records) too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.records


def test_the_model_ranks_held_out_hopper_bf16_shapes(tmp_path):
    out = tmp_path / "holdout.json"
    done = subprocess.run(
        [sys.executable, "analysis/model_holdout.py", "--family", "matmul-bf16", "--runs",
         "records/h200-2026-12-04-ragged.tar.xz", "--min-trials", "50", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    shapes = {json.dumps(r["shape"], sort_keys=True) for r in rows}
    assert shapes == {json.dumps(s, sort_keys=True) for s in ({"k": 3104, "m": 2900, "n": 4704},
                                                               {"k": 4000, "m": 5000, "n": 2600})}  # fmt: skip
    for r in rows:
        assert r["family"] == "matmul-bf16" and r["configs"] >= 50 and r["trained_on_runs"] >= 2
        assert -1 <= r["spearman"] <= 1 and r["top5_regret"] >= 1 and r["random5_regret"] >= 1
        assert r["spearman"] > 0.3  # the ranking says something: well above a random order's 0
    assert "median rho" in done.stdout
