"""`bench` times the config a family's authors ship (`as_shipped`) as a baseline, and says ours / yours.

What each test shows, without a GPU:
  * bench's plan holds the shipped config's job (built here, launched from its cubin like a variant, labelled
    `as shipped[...]`) among the baselines by default; --baselines selects it as "shipped", leaves it out when not
    named, and names it among the kinds offered; a family with none refuses "shipped";
  * a shipped config not valid at the shape is said in one line and left out of the plan;
  * the worker times it with the baselines of every session, never as a variant;
  * bench's record gives it kind "shipped", a summary entry with its time and the best's over it, and each
    variant's time over it ("vs": "shipped"); the table shows the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from mage_tune.arch import get_arch
from mage_tune.cli import cli
from mage_tune.cli.bench_cmd import format_run, run_record
from mage_tune.errors import ConfigError
from mage_tune.kernels.registry import load_family
from mage_tune.measure import plan_jobs, worker
from mage_tune.measure.records import BenchRun, Plan, Result, Session, Timing
from mage_tune.problem import Problem

FAMILIES = Path(__file__).parents[1] / "fixtures" / "data" / "tiny_layernorm_family.py"
SHAPE = {"m": 256, "d": 64}
LABEL = "as shipped[threads=256,rows=2]"


@pytest.fixture(scope="module")
def tiny():
    family = load_family(f"{FAMILIES}:TINY")
    return family, family.build(family.with_defaults({"threads": 64}), SHAPE, get_arch("sm_90"))


def test_the_plan_holds_the_shipped_config_by_default(tiny):
    family, variant = tiny
    jobs = plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant])
    labels = [j.label for j in jobs]
    assert labels[-2:] == [LABEL, variant.label]  # after the family's baselines, before the variants
    assert {j.kind for j in jobs[:-2]} == {"triton", "torch", "copy"}
    job = jobs[-2]
    assert job.kind == "variant" and job.cubin and job.kernel_name == variant.kernel_name  # launched from its cubin
    assert job.config == family.shipped_config(SHAPE, get_arch("sm_90")) and job.block == (
        512,
        1,
        1,
    )  # 256 threads × 2 rows

    assert [j.label for j in plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant], ("shipped",))] == [
        LABEL,
        variant.label,
    ]
    assert LABEL not in [j.label for j in plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant], ("torch",))]
    assert [j.label for j in plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant], ())] == [variant.label]
    with pytest.raises(ConfigError, match=r"no baseline nope; it offers: copy, torch, triton; and shipped"):
        plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant], ("nope",))


def test_a_family_without_a_shipped_config_has_no_shipped_baseline(tiny):
    _, variant = tiny
    family = load_family(f"{FAMILIES}:UNSHIPPED")
    assert [j.kind for j in plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant])][-1:] == ["variant"]
    assert not any(
        j.label.startswith("as shipped") for j in plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant])
    )
    with pytest.raises(ConfigError, match="names no as_shipped config"):
        plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant], ("shipped",))


def test_a_shipped_config_not_valid_at_the_shape_is_said_and_left_out(tiny):
    _, variant = tiny
    family = load_family(f"{FAMILIES}:SHIPS_INVALID")
    said: list[str] = []
    jobs = plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant], None, said.append)
    assert not any(j.label.startswith("as shipped") for j in jobs)
    (note,) = said
    assert note.startswith("as shipped: not valid at m=256, d=64 (") and "\n" not in note


def test_bench_help_names_the_shipped_kind():
    shown = CliRunner().invoke(cli, ["bench", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "shipped: the config the family's authors ship" in " ".join(shown.output.split())


class _Measurer:
    """Records what run_plan hands it: the baselines every session runs, and the variants."""

    made: ClassVar[list] = []

    def __init__(self, plan, baselines, on_result=None):
        self.baselines, self.measured, self.started = list(baselines), [], False
        self.sessions = [Session(0, 900.0, 4000.0, {}, 60.0, {"gpu": "none"})]
        self.results = []
        _Measurer.made.append(self)

    def start(self):
        self.started = True

    def measure(self, job):
        self.measured.append(job)

    def close(self):
        pass


def test_the_worker_times_the_shipped_config_in_every_session(tiny, monkeypatch):
    family, variant = tiny
    monkeypatch.setattr(worker, "Measurer", _Measurer)
    jobs = tuple(plan_jobs(Problem(family, SHAPE, get_arch("sm_90")), [variant], ("torch", "shipped")))
    worker.run_plan(Plan(family=family.origin, shape=SHAPE, jobs=jobs))
    made = _Measurer.made[-1]
    assert [j.label for j in made.baselines] == ["torch.layer_norm", LABEL]  # run again at each session's start
    assert [j.label for j in made.measured] == [variant.label]


def _result(label: str, kind: str, session: int, us: float) -> Result:
    timing = Timing("cold", us, us, us, 10, 2, 7)
    return Result(label, kind, session, True, rel_err=1e-7, timings=(timing,), config={})


def test_bench_says_ours_over_yours(tiny):
    family, variant = tiny
    sessions = (Session(0, 900.0, 4000.0, {}, 60.0, {"gpu": "none"}),)
    results = (
        _result("torch.layer_norm", "torch", 0, 20.0),
        _result(LABEL, "variant", 0, 16.0),  # as the worker gives it back
        _result(variant.label, "variant", 0, 12.0),
    )
    run = BenchRun(family.name, SHAPE, sessions, results, family.bytes_moved(SHAPE), 0, {"gpu": "none"})
    saved = run_record(run, [variant], family)
    assert [r["kind"] for r in saved["results"]] == ["torch", "shipped", "variant"]
    rows = {row["label"]: row for row in saved["summary"]["cold"]}
    assert rows[LABEL]["kind"] == "shipped" and rows[LABEL]["time_us"] == 16.0
    assert rows[variant.label]["vs"]["shipped"] == pytest.approx(0.75)
    assert "shipped" not in rows[LABEL]["vs"] and rows[LABEL]["vs"]["torch"] == pytest.approx(0.8)
    summary = saved["as_shipped"]
    assert (summary["label"], summary["ok"]) == (LABEL, True)
    assert summary["cold"] == {
        "session": 0,
        "time_us": 16.0,
        "best": variant.label,
        "best_us": 12.0,
        "ratio": pytest.approx(0.75),
    }

    text = format_run(run, ("cold",))
    assert "shipped 0.75x" in text
    assert f"as shipped: 16.00 µs; best 12.00 µs, 0.75 × as shipped ({variant.label}, session 0)" in text
    shipped_row = next(line for line in text.splitlines() if line.startswith(LABEL))
    assert " shipped " in shipped_row

    left_out = run_record(
        BenchRun(family.name, SHAPE, sessions, results[::2], 0, 0, {}), [variant], family, "as shipped: not valid"
    )
    assert left_out["as_shipped"] == {"error": "as shipped: not valid"}
