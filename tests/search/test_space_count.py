"""How many configs are valid, as `mage-tune space` says it (search/space.py count_valid), never by walking a large
space:

  * a space whose constrained knobs have at most ENUMERABLE combinations is counted exactly, "count": "exact";
  * a larger one is estimated from a seeded sample of SAMPLED of its combinations: the constraints are checked
    SAMPLED times (counted, not timed), the 95% interval holds the true count (10^12 combinations of the endless
    family, matmul's 7.5 million at 1024³), the same every time, and labelled an estimate with "valid" null;
  * --exact (exact=True) counts whatever it takes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.kernels.registry import load_family
from mage_tune.problem import Problem
from mage_tune.search import space
from mage_tune.search.space import ENUMERABLE, SAMPLED, Count, count_valid

DATA = Path(__file__).parents[1] / "fixtures" / "data"
SM90 = get_arch("sm_90")
TINY = f"{DATA / 'tiny_layernorm_family.py'}:TINY"
ENDLESS = str(DATA / "endless_family.py")
VALID = 10**12 // 2 * 3  # the endless family's: half its digit combinations, times its free knob's three values
MM_1024 = {"m": 1024, "n": 1024, "k": 1024}
MM_1024_VALID = 7_531_680  # Family.count_configs, every combination checked (about 10 s)


@pytest.fixture
def endless():
    family = load_family(ENDLESS)
    type(family).checked = 0
    return family


def counting(monkeypatch, family) -> list[int]:
    """Count the family's constraint checks from now on: the returned list's one item."""
    calls = [0]
    check = type(family).violations

    def violations(self, config, shape, arch):
        calls[0] += 1
        return check(self, config, shape, arch)

    monkeypatch.setattr(type(family), "violations", violations)
    return calls


def test_a_small_space_is_counted_exactly():
    count = count_valid(Problem(load_family(TINY), {"m": 256, "d": 64}, SM90))
    assert count == Count.of(6, 6 * 1) and count.exact and count.valid == count.estimate == 6
    assert count.json() == {"count": "exact"} and count.text() == "6 valid configs" and count.note() == ""


def test_a_space_too_large_to_walk_is_estimated_from_a_sample(endless):
    shape = endless.shape_from({"d": 64})
    count = count_valid(Problem(endless, shape, SM90))
    assert type(endless).checked == SAMPLED  # never the 10^12 combinations
    assert not count.exact and count.valid is None and count.combinations == 10**12 and count.sampled == SAMPLED
    assert count.low <= VALID <= count.high and count.low <= count.estimate <= count.high
    assert (count.high - count.low) / VALID < 0.03  # 50 000 draws: within about ±1%
    assert count_valid(Problem(endless, shape, SM90)) == count  # seeded: the same answer every time
    said = count.json()
    assert said["count"] == "estimate" and said["estimate"]["valid"] == count.estimate
    assert said["estimate"]["confidence"] == 0.95 and said["estimate"]["sampled"] == SAMPLED
    assert count.text().startswith("about 1.5") and "--exact counts them all" in count.note()


def test_what_the_caller_has_seen_is_a_floor(endless):
    shape = endless.shape_from({"d": 64})
    count = count_valid(Problem(endless, shape, SM90), known=2 * 10**12)
    assert count.low == count.estimate == count.high == 2 * 10**12


def test_matmul_is_estimated_within_its_interval_from_a_sample_of_its_combinations(monkeypatch):
    family = get_family("matmul")
    calls = counting(monkeypatch, family)
    count = count_valid(Problem(family, MM_1024, SM90))
    assert calls[0] == SAMPLED < ENUMERABLE < count.combinations == 1_990_656
    assert not count.exact and count.low <= MM_1024_VALID <= count.high
    assert count.text().startswith("about 7.5") and "million" in count.text()


def test_exact_counts_every_combination(monkeypatch):
    """With the caps lowered, matmul-3xtf32's 8640 combinations are a large space: estimated from SAMPLED of them,
    or, with exact, every one checked."""
    monkeypatch.setattr(space, "ENUMERABLE", 100)
    monkeypatch.setattr(space, "SAMPLED", 1000)
    family = get_family("matmul-3xtf32")
    calls = counting(monkeypatch, family)
    estimated = count_valid(Problem(family, MM_1024, SM90))
    assert calls[0] == 1000 and not estimated.exact and estimated.sampled == 1000
    calls[0] = 0
    count = count_valid(Problem(family, MM_1024, SM90), exact=True)
    assert calls[0] == count.combinations == 8640 and count.exact
    assert count.valid == family.count_configs(MM_1024, SM90) > 0
    assert estimated.low <= count.valid <= estimated.high
