"""A search with nothing measured of its family and arch starts from the family's defaults, its author's pick, where
they are valid at the shape (the database's seeds are tests/tuning/test_tuning_db.py's and test_shipped_data.py's)."""

from mage_tune.arch import get_arch
from mage_tune.kernels.matmul_bf16 import FAMILY as BF16
from mage_tune.problem import Problem
from mage_tune.tuning import warm


def test_with_nothing_measured_the_family_defaults_go_first_where_valid(monkeypatch):
    monkeypatch.setattr(warm.shipped, "entries", lambda *args: [])  # nothing shipped either (the package has some)
    problem = Problem(BF16, {"m": 2304, "n": 1792, "k": 3072}, get_arch("sm_90a"))
    cold = warm.plan(problem, [], "NVIDIA H200", False, 1, 0)
    assert [(s.config, s.source) for s in cold.seeds] == [(BF16.defaults(), "default")]
    assert "defaults first" in cold.notes[0]
    # The family refuses sm_80 (wgmma is sm_90a's): no seed, and the note says only that nothing was measured.
    refused = warm.plan(Problem(BF16, problem.shape, get_arch("sm_80")), [], "NVIDIA A100", False, 1, 0)
    assert refused.seeds == () and "defaults" not in refused.notes[0]
