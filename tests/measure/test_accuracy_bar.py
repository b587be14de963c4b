"""The accuracy bar, without a GPU: a family may name, for a shape, a baseline kind whose error on the same inputs no
variant may exceed besides its tolerance (the FP32-accurate matmuls: cuBLAS FP32's where M, N and K reach 2048), and
a variant over it fails saying so. Its
GPU side: tests/kernels/test_gpu_matmul_3xtf32_sm90.py (a chain of 128 products worse than cuBLAS at 2304 × 4096 ×
2048)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mage_tune.kernels import load_family
from mage_tune.kernels.base import Baseline
from mage_tune.measure import harness, shipped
from mage_tune.measure.harness import Checked, over_bar
from mage_tune.measure.records import Job, OutputCheck
from mage_tune.search import sources

BENCH = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "bench_matmul_bf16_4096.json"

BAR = ("torch.matmul (cuBLAS FP32)", 8.09e-7)


def _checked(error: float) -> Checked:
    return Checked(ok=True, rel_err=error, max_abs_err=0.0, why="", outputs=(OutputCheck("__out__", "rel_l2", error,
                                                                                          1e-5, True),))  # fmt: skip


def test_a_variant_over_the_bar_fails_saying_whose_error_it_exceeds():
    why = over_bar(_checked(9.1e-7), BAR)
    assert why == (
        "relative error 9.10e-07 is over torch.matmul (cuBLAS FP32)'s 8.09e-07 on the same inputs (the accuracy bar)"
    )
    assert over_bar(_checked(2.8e-7), BAR) == "" and over_bar(_checked(8.09e-7), BAR) == ""  # equal is not worse
    assert over_bar(_checked(9.1e-7), None) == ""  # no bar: the tolerance alone
    assert over_bar(_checked(math.nan), BAR) == ""  # a NaN error already failed its check


def test_the_fp32_accurate_matmuls_hold_to_cublas_fp32_where_all_dims_reach_2048():
    """There cuBLAS FP32 sums K-long chains above the split's own error; under it cuBLAS's short sums fall below that
    floor, and the tolerance alone holds (the other families: the tolerance everywhere)."""
    big, thin = {"m": 2304, "n": 4096, "k": 2048}, {"m": 300, "n": 200, "k": 4100}
    short = {"m": 4096, "n": 4096, "k": 1030}
    for name in ("matmul-3xtf32", "matmul-3xtf32-sm90"):
        family = load_family(name)
        assert family.accuracy_bar(big) == "torch"
        assert family.accuracy_bar(thin) is None and family.accuracy_bar(short) is None
        assert [b.label for b in family.baseline_kernels(big) if b.kind == "torch"] == ["torch.matmul (cuBLAS FP32)"]
    for name in ("matmul", "matmul-bf16"):
        assert load_family(name).accuracy_bar(big) is None
    assert load_family("layernorm").accuracy_bar({"m": 4096, "d": 4096}) is None


def _fp32_bench(tmp_path, shape: dict, errors: list[float], cublas: float):
    """The 4096³ bench fixture made a matmul-3xtf32-sm90 record at `shape`: cuBLAS FP32 with error `cublas`, and a
    passing variant for each of `errors`."""
    data = json.loads(BENCH.read_text())
    data |= {"family": "matmul-3xtf32-sm90", "family_origin": "matmul-3xtf32-sm90", "shape": shape, "census": {}}
    data["arch"] = "sm_90a"
    torch_result, variant = (next(r for r in data["results"] if r["kind"] == kind) for kind in ("torch", "variant"))
    results = [{**torch_result, "label": "torch.matmul (cuBLAS FP32)", "rel_err": cublas}]
    for i, error in enumerate(errors):
        results.append({**variant, "label": f"v{i}", "config": {"chain": i + 1}, "rel_err": error, "outputs": []})
    data["results"] = results
    path = tmp_path / f"bench-{shape['m']}.json"
    path.write_text(json.dumps(data))
    return path


def test_the_warm_start_reads_a_trial_over_the_bar_as_failed(tmp_path):
    """A record measured before the bar: at 2304 × 4096 × 2048 the variant worse than the run's own cuBLAS FP32 is a
    failed trial for the warm start, the one better measured; at 1024³ (no bar) both stay measured."""
    big = _fp32_bench(tmp_path, {"m": 2304, "n": 4096, "k": 2048}, [9.1e-7, 2.8e-7], cublas=8.09e-7)
    _, rows = sources.bench_record(big)
    assert [r["outcome"] for r in rows] == ["failed", "measured"]
    small = _fp32_bench(tmp_path, {"m": 1024, "n": 1024, "k": 1024}, [9.1e-7, 2.8e-7], cublas=8.09e-7)
    _, rows = sources.bench_record(small)
    assert [r["outcome"] for r in rows] == ["measured", "measured"]


def test_each_session_s_variants_are_held_to_that_session_s_bar(tmp_path):
    """Sessions of one record may hold different inputs: a variant is held to its own session's cuBLAS error (here
    8.09e-7 in session 0, 9.5e-7 in session 1), and a damaged error (0, a string) holds nothing."""
    path = _fp32_bench(tmp_path, {"m": 2304, "n": 4096, "k": 2048}, [9.1e-7, 9.1e-7], cublas=8.09e-7)
    data = json.loads(path.read_text())
    data["sessions"].append(dict(data["sessions"][0], index=1))
    cublas = data["results"][0]
    data["results"].append({**cublas, "session": 1, "rel_err": 9.5e-7})
    data["results"][2]["session"] = 1  # the second variant
    path.write_text(json.dumps(data))
    assert [r["outcome"] for r in sources.bench_record(path)[1]] == ["failed", "measured"]
    limits = sources.Limits(2.7e-6, {1: 9.5e-7, 0: 8.09e-7})  # a run directory's trial names its session too
    assert limits.allows({"rel_err": 9.1e-7, "session": 1}) and not limits.allows({"rel_err": 9.1e-7, "session": 0})
    for odd in ([1], True, None, "1"):  # not a session: the lowest session's bar, no crash
        assert not limits.allows({"rel_err": 9.1e-7, "session": odd})
    assert sources.Limits(2.7e-6, {1: 9.5e-7}).allows({"rel_err": 9.1e-7, "session": 0})  # no bar in session 0
    for damaged in (0, "8e-7"):
        data["results"][0]["rel_err"] = data["results"][-1]["rel_err"] = damaged
        path.write_text(json.dumps(data))
        assert [r["outcome"] for r in sources.bench_record(path)[1]] == ["measured", "measured"]


CUBLAS = "torch.matmul (cuBLAS FP32)"


def _runner(monkeypatch, errors: dict[str, float], fails: Exception | None = None):
    """A Runner whose launches say whose they are and whose check gives `errors` by label (untimed): the run's own
    decisions about the bar are what is under test. Returns it and the labels checked, in order."""
    runner = object.__new__(harness.Runner)
    runner.plan = SimpleNamespace(shape={"m": 2304, "n": 4096, "k": 2048}, timed=False)
    runner.family = SimpleNamespace(
        name="matmul-3xtf32",
        accuracy_bar=lambda shape: "torch",
        baseline_kernels=lambda shape: [Baseline("triton[x]", "triton"), Baseline(CUBLAS, "torch")],
        output_shapes=lambda shape: {"__out__": (shape["m"], shape["n"])},  # what a copy writes
    )
    runner.session_index = 0
    runner.bufs = SimpleNamespace(sets=[{}], inplace=(), outputs=("__out__",), host={"A": np.zeros(1)})
    runner.references = {}
    runner._bar, runner._bar_checked = None, False
    checked = []

    def launcher_for(job, *_):
        def launch(bufs):
            if fails is not None and job.kind == "torch":
                checked.append(f"{job.label} (raised)")
                raise fails
            return job.label

        return launch

    def check(launch, *_):
        label = launch({})
        checked.append(label)
        return _checked(errors[label])

    monkeypatch.setattr(harness, "make_launcher", launcher_for)
    monkeypatch.setattr(harness.baselines, "launcher", launcher_for)
    monkeypatch.setattr(harness, "check_outputs", check)
    return runner, checked


def test_a_session_checks_the_bar_once_and_fails_the_variants_over_it(monkeypatch):
    runner, checked = _runner(monkeypatch, {CUBLAS: 8.09e-7, "long": 9.1e-7, "short": 2.8e-7})
    long_chain, short_chain = runner.run(Job("long", "variant")), runner.run(Job("short", "variant"))
    assert not long_chain.ok and long_chain.error == over_bar(_checked(9.1e-7), (CUBLAS, 8.09e-7))
    assert long_chain.rel_err == 9.1e-7 and [o.ok for o in long_chain.outputs] == [True]  # within its tolerance
    assert short_chain.ok and short_chain.error == ""
    assert checked == [CUBLAS, "long", "short"]  # the bar's baseline first, once


def test_baselines_copies_and_the_shipped_config_are_not_held_to_the_bar(monkeypatch):
    as_shipped = f"{shipped.NAME}[chain=4]"
    runner, checked = _runner(monkeypatch, {CUBLAS: 8.09e-7, "triton[x]": 9e-7, as_shipped: 9e-7, "copy": 9e-7})
    for job in (Job("triton[x]", "triton"), Job(as_shipped, "variant"), Job("copy", "variant", expect="A")):
        assert runner.run(job).ok, job.label
    assert CUBLAS not in checked  # nothing asked for the bar


def test_a_bar_baseline_that_cannot_run_holds_to_the_tolerance_alone_unless_the_context_is_gone(monkeypatch):
    runner, checked = _runner(monkeypatch, {"long": 9.1e-7}, fails=ValueError("no cuBLAS here"))
    assert runner.run(Job("long", "variant")).ok and runner.run(Job("long", "variant")).ok
    assert checked == [f"{CUBLAS} (raised)", "long", "long"]  # tried once, before the first variant's check
    sticky = RuntimeError("an illegal memory access was encountered")
    runner, _ = _runner(monkeypatch, {"long": 9.1e-7}, fails=sticky)
    with pytest.raises(RuntimeError, match=r"^torch\.matmul \(cuBLAS FP32\), the accuracy bar's baseline: .*illegal"):
        runner.run(Job("long", "variant"))  # the worker is replaced, and the error names whose it was


def test_a_family_hook_that_raises_fails_every_variant_alike(monkeypatch):
    """An error in the family's own accuracy_bar (a user's family file) reaches each variant's job, not the first
    alone: the bar is never left unchecked in silence."""
    runner, _ = _runner(monkeypatch, {"long": 9.1e-7, "short": 2.8e-7})

    def broken(shape):
        raise KeyError("k")

    runner.family.accuracy_bar = broken
    for label in ("long", "short"):
        with pytest.raises(KeyError):
            runner.run(Job(label, "variant"))
