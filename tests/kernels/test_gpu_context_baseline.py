"""cuBLAS TF32 timed beside matmul-3xtf32 for context only, on a GPU: at 2048³ it is timed (and faster than cuBLAS
FP32), its error is over the family's FP32 bound and recorded as such, its result is ok, and it is never the best
baseline nor in a variant's ratios to the best. Skipped where no CUDA device is present; what holds without one is
tests/measure/test_context_baseline.py's."""

from __future__ import annotations

import pytest

from mage_tune.arch import get_arch
from mage_tune.problem import Problem

SHAPE = {"m": 2048, "n": 2048, "k": 2048}
ARCH = get_arch("sm_90")

pytestmark = pytest.mark.gpu


def test_cublas_tf32_is_timed_for_context_and_never_the_best_baseline():
    from mage_tune.kernels import load_family
    from mage_tune.measure import bench
    from mage_tune.measure.summary import best_baselines, rows

    family = load_family("matmul-3xtf32")
    variant = family.build(family.complete({}, SHAPE, ARCH), SHAPE, ARCH)
    run = bench(Problem(family, SHAPE, ARCH), [variant], baselines=("torch", "context"), rounds=3, job_timeout_s=120)
    by_kind = {r.kind: r for r in run.results}
    assert set(by_kind) == {"torch", "context", "variant"}
    fp32, tf32, ours = by_kind["torch"], by_kind["context"], by_kind["variant"]
    assert fp32.ok and ours.ok, (fp32.error, ours.error)

    bound = family.tolerance_for(SHAPE)
    assert tf32.ok and tf32.time("cold") is not None  # timed although over the bound
    assert tf32.rel_err > 10 * bound  # TF32's ~1e-3, far over u·√K
    (check,) = tf32.outputs
    assert not check.ok and check.error == pytest.approx(tf32.rel_err) and check.tolerance == pytest.approx(bound)
    assert "over tolerance" in tf32.error

    assert tf32.time("cold") < min(fp32.time("cold"), ours.time("cold"))  # the fastest kernel here
    assert [r.kind for r in best_baselines(run, "cold").values()] == ["torch"]
    row = next(r for r in rows(run, "cold") if r.result is ours)
    assert set(row.vs) == {"torch"} and row.vs["torch"] == pytest.approx(ours.time("cold") / fp32.time("cold"))
    assert row.vs_context == pytest.approx(ours.time("cold") / tf32.time("cold"))
