"""Several outputs and in-place buffers on a real GPU, with tests/fixtures/data/inplace_axpy_family.py (y = a·x + y in
place, and the new y summed per chunk into `sums`): checked output by output and timed in both regimes, a planted
error failing the one output it is in, and buffers not restored before timed launches caught after timing. Skipped
where no CUDA device is present."""

from __future__ import annotations

from pathlib import Path

import pytest

from mage_tune.problem import Problem

pytestmark = pytest.mark.gpu

AXPY = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "inplace_axpy_family.py"
N = 1 << 20


def _family(name: str = ""):
    from mage_tune.kernels import load_family

    family = load_family(f"{AXPY}:{name}" if name else str(AXPY))
    return family, family.shape_from(n=N)


def _arch() -> str:
    from mage_tune.measure import device

    return device.arch_of_device()


def _build(family, shape, **settings):
    arch = _arch()
    return family.build(family.parse_settings([f"{k}={v}" for k, v in settings.items()], shape, arch), shape, arch)


def _timing(result, regime):
    return next(t for t in result.timings if t.regime == regime)


@pytest.mark.parametrize("name", ["", "AXPY_ONLY"])
def test_an_in_place_family_is_checked_output_by_output_and_timed_cold_and_hot(name):
    from mage_tune.measure import bench

    family, shape = _family(name)
    variants = [_build(family, shape, threads=256), _build(family, shape, threads=128)]
    run = bench(
        Problem(family, shape, variants[0].arch),
        variants,
        regimes=("cold", "hot"),
        baselines=(),
        rounds=3,
        job_timeout_s=120,
    )
    assert len(run.results) == 2 and run.bytes_moved == family.bytes_moved(shape)
    for result in run.results:
        assert result.ok, result.error
        by_name = {o.name: o for o in result.outputs}
        assert list(by_name) == [o.name for o in family.outputs]
        assert all(o.ok for o in result.outputs)
        assert by_name["y"].metric == "ulp" and by_name["y"].error <= 0.5  # fmaf rounds once
        if "sums" in by_name:
            assert by_name["sums"].metric == "rel_l2" and by_name["sums"].error < 1e-5
        cold, hot = _timing(result, "cold"), _timing(result, "hot")
        assert cold.median_us > 0 and hot.median_us > 0 and result.single_launch_us > 0
        assert cold.launches_per_graph == cold.buffer_sets >= 10  # a buffer set per launch
        assert hot.launches_per_graph == hot.buffer_sets == 1  # one launch per replay


def test_a_planted_error_fails_the_one_output_it_is_in():
    from mage_tune.measure import bench

    family, shape = _family()
    good, broken = _build(family, shape, broken=0), _build(family, shape, broken=1)
    run = bench(Problem(family, shape, good.arch), [good, broken], baselines=(), rounds=3, job_timeout_s=120)
    results = {r.label: r for r in run.results}
    assert results[good.label].ok, results[good.label].error
    wrong = results[broken.label]
    assert not wrong.ok and not wrong.timings
    assert wrong.error.startswith("sums: relative error 0.01 over tolerance") and "y:" not in wrong.error
    checks = {o.name: o for o in wrong.outputs}
    assert checks["y"].ok and not checks["sums"].ok
    assert checks["sums"].error == pytest.approx(0.01, rel=1e-3)
    assert wrong.rel_err == pytest.approx(0.01, rel=1e-3)  # the largest over the outputs


@pytest.mark.parametrize("regime", ["cold", "hot"])
def test_buffers_not_restored_before_timed_launches_fail_after_timing(monkeypatch, regime):
    """In this process (a worker would not see the patch): restored, the job passes; restoring nothing, the check
    still passes (its launch is the first) but the timed launches step y again and again."""
    from mage_tune.measure import harness, variant_job
    from mage_tune.measure.records import Plan

    family, shape = _family()
    job = variant_job(_build(family, shape))
    plan = Plan(family=family.origin, shape=shape, jobs=(job,), regimes=(regime,), rounds=3, seed=1)
    restored = harness.Runner(plan, 0).run(job)
    assert restored.ok and restored.timings, restored.error
    monkeypatch.setattr(harness.Buffers, "restore", lambda self, sets: None)
    result = harness.Runner(plan, 0).run(job)
    assert [o.ok for o in result.outputs] == [True, True]
    assert not result.ok and not result.timings
    assert result.error == (
        "in-place buffer y of set 0 is not one step from the pristine inputs after timing (not restored before a "
        "launch?)"
    )
