"""A baseline timed for context only (kind "context": cuBLAS TF32 beside the FP32-accurate matmuls), without a GPU.

What each test shows:
  * matmul-3xtf32 and matmul-3xtf32-sm90 list cuBLAS TF32 as a context baseline and run it by default; the SIMT
    `matmul` does not offer it; `--baselines context` plans it alone; its launcher allows TF32 around the call only,
    restoring the setting even when the call fails;
  * the worker's run times a context job whose error is over the tolerance and records that error, but fails one
    whose outputs are not finite (and any other kind over its tolerance);
  * bench's summary never takes it as a best baseline (its ratio is shown apart, labelled context), nor do
    BenchResult.baselines, the record's "vs", or explain's ours / best lines; the table shows its error;
  * a measured search writes it to baselines.jsonl but keeps it out of the tuning database's baselines, and the
    database's import of a bench record leaves it out too.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from mage_tune.api import bench_loop, search_loop
from mage_tune.arch import get_arch
from mage_tune.cli import cli
from mage_tune.errors import ConfigError, InputError
from mage_tune.kernels import load_family
from mage_tune.kernels import matmul_3xtf32 as tf32_module
from mage_tune.measure import harness, plan_jobs
from mage_tune.measure.explain import explain_bench
from mage_tune.measure.records import BenchRun, Job, OutputCheck, Result, Session, Timing
from mage_tune.measure.summary import best_baselines, check_text, rows
from mage_tune.problem import Problem
from mage_tune.search import record, report, sources
from mage_tune.search.runner import Search
from mage_tune.search.spec import SearchSpec

ROOT = Path(__file__).resolve().parents[2]
SM90 = str(ROOT / "mage_tune" / "kernels" / "matmul_3xtf32_sm90.py")
TINY = Path(__file__).parents[1] / "fixtures" / "data" / "tiny_layernorm_family.py"
MATMUL = {"m": 256, "n": 256, "k": 256}
SMALL = {"m": 256, "d": 64}
CONTEXT_LABEL = "torch.matmul (cuBLAS TF32, context only)"
OVER = "relative error 0.0011 over tolerance 2.7e-07"


# --- the families ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["matmul-3xtf32", SM90])
def test_the_fp32_accurate_families_time_cublas_tf32_for_context_by_default(spec):
    family = load_family(spec)
    assert family.baselines == ("triton", "torch", "context")
    listed = [(b.label, b.kind) for b in family.baseline_kernels(MATMUL)]
    assert listed[-2:] == [("torch.matmul (cuBLAS FP32)", "torch"), (CONTEXT_LABEL, "context")]
    problem = Problem(family, MATMUL, get_arch("sm_90a" if spec == SM90 else "sm_90"))
    assert [j.kind for j in plan_jobs(problem, [])][-1] == "context"  # by default
    assert [(j.label, j.kind) for j in plan_jobs(problem, [], ("context",))] == [(CONTEXT_LABEL, "context")]
    assert "context" not in {j.kind for j in plan_jobs(problem, [], ("torch",))}


def test_the_simt_matmul_offers_no_context_baseline():
    family = load_family("matmul")
    assert "context" not in family.baselines
    assert "context" not in {b.kind for b in family.baseline_kernels(MATMUL)}
    with pytest.raises(ConfigError, match="has no baseline context"):
        plan_jobs(Problem(family, MATMUL, get_arch("sm_90")), [], ("context",))


def test_bench_accepts_and_explains_the_context_kind():
    assert bench_loop._baseline_names("context") == ("context",)
    assert bench_loop._baseline_names("torch,context") == ("torch", "context")
    # the option given twice: the kinds of both, once each (click's last-one-wins dropped the first)
    assert bench_loop._baseline_names(("torch", "triton,torch")) == ("torch", "triton")
    assert bench_loop._baseline_names(("none",)) == ()
    with pytest.raises(InputError, match="'none' cannot go with other kinds"):
        bench_loop._baseline_names(("none", "torch"))
    shown = CliRunner().invoke(cli, ["bench", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "context: a kernel timed for context only" in " ".join(shown.output.split())


def test_the_baselines_option_given_twice_keeps_the_kinds_of_both(monkeypatch):
    import mage_tune.api

    seen = {}

    def fake_bench(*args, baselines=None, **kwargs):
        seen["baselines"] = baselines
        raise InputError("stopped before measuring")

    monkeypatch.setattr(mage_tune.api, "bench", fake_bench)
    runner = CliRunner()
    twice = runner.invoke(cli, ["bench", "layernorm", "--baselines", "torch", "--baselines", "triton"])
    assert isinstance(twice.exception, InputError)  # the stand-in's stop: the entry point turns it into exit 2
    assert bench_loop._baseline_names(seen["baselines"]) == ("torch", "triton")
    runner.invoke(cli, ["bench", "layernorm"])
    assert seen["baselines"] is None  # not given: the family's own


class _Flag:
    allow_tf32 = False


class _FakeTorch:
    """torch.matmul that remembers the TF32 setting it ran under (and fails where told to)."""

    def __init__(self, fail: bool = False):
        self.backends = SimpleNamespace(cuda=SimpleNamespace(matmul=_Flag()))
        self.seen: list[bool] = []
        self.fail = fail

    def matmul(self, a, b, out):
        self.seen.append(self.backends.cuda.matmul.allow_tf32)
        if self.fail:
            raise RuntimeError("cuBLAS failed")
        out.append((a, b))


def test_the_context_launcher_allows_tf32_around_the_call_only(monkeypatch):
    family = load_family("matmul-3xtf32")
    launch = family.launcher(Job(CONTEXT_LABEL, "context"), MATMUL)
    fake = _FakeTorch()
    monkeypatch.setattr(tf32_module.gpu, "torch", lambda: fake)
    out: list = []
    launch({"A": "a", "B": "b", "__out__": out})
    assert fake.seen == [True] and out == [("a", "b")]
    assert fake.backends.cuda.matmul.allow_tf32 is False  # restored

    failing = _FakeTorch(fail=True)
    monkeypatch.setattr(tf32_module.gpu, "torch", lambda: failing)
    with pytest.raises(RuntimeError, match="cuBLAS failed"):
        launch({"A": "a", "B": "b", "__out__": []})
    assert failing.seen == [True] and failing.backends.cuda.matmul.allow_tf32 is False  # restored on error too
    assert family.launcher(Job("torch.matmul (cuBLAS FP32)", "torch"), MATMUL) is not launch


# --- the worker's run -------------------------------------------------------------------------------------------------


def _checked(rel: float) -> harness.Checked:
    ok = rel <= 1e-5
    check = OutputCheck("__out__", "rel_l2", rel, 1e-5, ok)
    why = "" if ok else ("1 of 4 outputs not written or not finite" if math.isnan(rel) else OVER)
    return harness.Checked(ok, rel, rel, why, (check,))


def _runner(monkeypatch, rel: float, timed: bool = True) -> harness.Runner:
    """A Runner whose launch, check and timing are stand-ins: the run's own decisions are what is under test."""
    runner = object.__new__(harness.Runner)
    runner.plan = SimpleNamespace(shape=MATMUL, timed=timed, regimes=("cold",), rounds=3)
    runner.family = SimpleNamespace(name="matmul-3xtf32")
    runner.session_index = 0
    runner.bufs = SimpleNamespace(sets=[{}], inplace=(), outputs=("__out__",))
    runner.references = {}
    runner._bar, runner._bar_checked = None, True  # no accuracy bar: the tolerance alone
    monkeypatch.setattr(harness, "make_launcher", lambda job, family, shape: lambda bufs: None)
    monkeypatch.setattr(harness, "check_outputs", lambda *args: _checked(rel))
    monkeypatch.setattr(harness, "single_launch_us", lambda *args, **kw: 6.0)
    monkeypatch.setattr(harness, "time_graph", lambda *args: [5.0, 4.0, 6.0])
    return runner


def test_a_context_job_over_its_tolerance_is_timed_and_keeps_its_error(monkeypatch):
    result = _runner(monkeypatch, 1.1e-3).run(Job(CONTEXT_LABEL, "context"))
    assert result.ok and result.time("cold") == 5.0 and result.single_launch_us == 6.0
    assert result.error == OVER and result.rel_err == pytest.approx(1.1e-3)
    assert [(o.error, o.tolerance, o.ok) for o in result.outputs] == [(1.1e-3, 1e-5, False)]  # honest per output
    unt = _runner(monkeypatch, 1.1e-3, timed=False).run(Job(CONTEXT_LABEL, "context"))
    assert unt.ok and not unt.timings and unt.error == OVER


def test_a_context_job_with_outputs_not_finite_fails(monkeypatch):
    result = _runner(monkeypatch, math.nan).run(Job(CONTEXT_LABEL, "context"))
    assert not result.ok and not result.timings and "not finite" in result.error


def test_any_other_job_over_its_tolerance_still_fails(monkeypatch):
    for kind in ("torch", "triton", "variant"):
        result = _runner(monkeypatch, 1.1e-3).run(Job("other", kind))
        assert not result.ok and not result.timings and result.error == OVER, kind


def test_a_passing_job_records_no_error(monkeypatch):
    result = _runner(monkeypatch, 1e-7).run(Job("torch.matmul (cuBLAS FP32)", "torch"))
    assert result.ok and result.error == "" and result.time("cold") == 5.0


# --- bench's summary, record, table and explain -----------------------------------------------------------------------


def _result(label: str, kind: str, us: float, rel: float = 1e-7, error: str = "") -> Result:
    timing = Timing("cold", us, us, us, 10, 2, 7)
    check = OutputCheck("__out__", "rel_l2", rel, 1e-5, rel <= 1e-5)
    return Result(label, kind, 0, True, error=error, rel_err=rel, timings=(timing,), outputs=(check,))


@pytest.fixture(scope="module")
def tiny_run():
    """A bench run where the context baseline is the fastest kernel of all."""
    family = load_family(f"{TINY}:UNSHIPPED")
    variant = family.build(family.with_defaults({"threads": 64}), SMALL, get_arch("sm_90"))
    results = (
        _result("triton[num_warps=1]", "triton", 12.0),
        _result("torch.layer_norm", "torch", 10.0),
        _result(CONTEXT_LABEL, "context", 4.0, rel=1.1e-3, error=OVER),
        _result(variant.label, "variant", 8.0),
    )
    sessions = (Session(0, 900.0, 4000.0, {}, 60.0, {"gpu": "none"}),)
    run = BenchRun(family.name, SMALL, sessions, results, family.bytes_moved(SMALL), 0, {"gpu": "none"})
    return family, variant, run


def test_the_context_baseline_is_never_the_best_baseline(tiny_run):
    _, variant, run = tiny_run
    best = best_baselines(run, "cold")
    assert {g: r.label for (_, g), r in best.items()} == {"triton": "triton[num_warps=1]", "torch": "torch.layer_norm"}
    by_label = {row.result.label: row for row in rows(run, "cold")}
    ours = by_label[variant.label]
    assert ours.vs == pytest.approx({"triton": 8 / 12, "torch": 0.8})  # not 8 / 4
    assert ours.vs_context == pytest.approx(2.0)  # shown apart
    assert by_label[CONTEXT_LABEL].vs_context is None and by_label[CONTEXT_LABEL].vs["torch"] == pytest.approx(0.4)
    assert check_text(by_label[CONTEXT_LABEL].result) == f"context only: {OVER}"
    assert check_text(by_label["torch.layer_norm"].result) == "ok"


def test_bench_keeps_the_context_baseline_apart(tiny_run):
    family, variant, run = tiny_run
    saved = bench_loop.run_record(run, [variant], family)
    result = bench_loop._result(run, saved, get_arch("sm_90"), ("cold",), None, ())
    assert result.baselines == {"triton[num_warps=1]": 12.0, "torch.layer_norm": 10.0}
    assert result.context == {CONTEXT_LABEL: 4.0}
    assert result.best.label == variant.label
    summary = {row["label"]: row for row in saved["summary"]["cold"]}
    assert set(summary[variant.label]["vs"]) == {"triton", "torch"}
    assert summary[variant.label]["vs_context"] == pytest.approx(2.0)
    kept = next(r for r in saved["results"] if r["kind"] == "context")
    assert kept["ok"] and kept["error"] == OVER and kept["outputs"][0]["ok"] is False

    table = " ".join(bench_loop.format_run(run, ("cold",)).split())
    assert f"context only: {OVER} 1.1e-03" in table  # the check and the error columns
    assert "triton 0.67x torch 0.80x (context only 2.00x)" in table

    said = explain_bench(saved)
    assert "ours/torch 0.800" in said and "ours/triton 0.667" in said
    assert f"vs a context-only baseline (not held to the accuracy bound): {CONTEXT_LABEL} 4.00 µs" in said
    assert "ours/context 2.000" in said


def test_the_tuning_database_never_takes_the_context_baseline(tiny_run):
    _, _, run = tiny_run
    recorded = [r.to_json() for r in run.results if r.kind != "variant"]
    assert sources._baselines(recorded) == {"triton[num_warps=1]": 12.0, "torch.layer_norm": 10.0}


# --- a measured search ------------------------------------------------------------------------------------------------


class _Recorder:
    def __init__(self):
        self.said: list[dict] = []

    def baselines(self, baselines: dict) -> None:
        self.said.append(baselines)


def test_a_search_records_the_context_baseline_but_keeps_it_out_of_its_baselines(tmp_path):
    family = load_family(f"{TINY}:UNSHIPPED")
    run_dir = tmp_path / "run"
    spec = SearchSpec(
        family.name, SMALL, get_arch("sm_90"), 4, "tpe", None, "m", run_dir, 1, False, 1, family.origin, db="off"
    )
    search = Search(spec, family, print)  # a GPU is needed by run() only
    search.heartbeat.close()
    search.measurer = SimpleNamespace(sessions=[Session(0, 900.0, 4000.0, {}, 60.0, {})])
    search.recorder = _Recorder()
    search._baseline_measured(_result("torch.layer_norm", "torch", 10.0))
    search._baseline_measured(_result(CONTEXT_LABEL, "context", 4.0, rel=1.1e-3, error=OVER))
    assert [b["result"]["kind"] for b in record.baselines(run_dir)] == ["torch", "context"]  # both recorded
    assert search.baselines == {"torch.layer_norm": 10.0}
    assert search.recorder.said == [{"torch.layer_norm": 10.0}]
    assert search_loop._baseline_times(run_dir) == {"torch.layer_norm": 10.0}
    assert search_loop._baseline_times(run_dir, context=True) == {CONTEXT_LABEL: 4.0}
    table = " ".join(report.baseline_table(run_dir, 8.0).split())
    assert f"context only: {OVER}" in table
