"""Every command's output fits 100 columns by default (tables wrap their widest cells, long lines wrap), `--wide`
prints at full width, and `search` says what happened: a new study or how many recorded trials it resumes, then
the trials by outcome and the run directory (also in --json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import has_gpu

from mage_tune.cli import cli, main_error_text
from mage_tune.errors import MageError

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "runs"
LN_ALL = RUNS / "h200-2026-11-29" / "ln_d768_all.json"
SHAPES = RUNS / "h200-2026-11-29-shapes"
MM = ("--m", "1024", "--n", "1024", "--k", "1024")


class Ran:
    """A command's exit code and output, with an error said as `mage-tune` (cli.main) says it."""

    def __init__(self, result):
        self.exit_code, self.output, self.stdout = result.exit_code, result.output, result.stdout
        if isinstance(result.exception, MageError):
            self.exit_code = result.exception.exit_code
            self.output += main_error_text(result.exception) + "\n"
        elif result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception


def run(*args: str, columns: int = 100) -> Ran:
    return Ran(CliRunner().invoke(cli, list(args), env={"COLUMNS": str(columns)}))


def too_wide(output: str, columns: int = 100) -> list[str]:
    """Lines wider than the columns; an error stays one line (for logs and grep: the terminal wraps it)."""
    return [line for line in output.splitlines() if len(line) > columns and not line.startswith("mage-tune: error:")]


COMMANDS = [
    ("--help",),
    ("search", "--help"),
    ("doctor",),
    ("space", "layernorm", "--d", "768"),
    ("space", "matmul", *MM),
    ("census", str(ROOT / "tests" / "kernels" / "flight.cu")),
    ("census", "layernorm", "--d", "768"),
    ("census", "matmul", *MM),
    ("compare", "layernorm", "--d", "768"),
    ("compare", "matmul", *MM),
    ("report", str(LN_ALL)),
    ("report", str(RUNS / "h200-2026-11-29" / "planted.json")),
    ("explain", str(LN_ALL)),
    (
        "explain",
        str(SHAPES / "rerun" / "ln_m16384_d4096.json"),
        "--counters",
        str(SHAPES / "ln" / "counters_ln_16384x4096.json"),
    ),
    ("explain", str(SHAPES / "rerun" / "mm_2048.json"), "--counters", str(SHAPES / "matmul" / "counters_mm_2048.json")),
    ("census", "layernrom"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_every_command_fits_100_columns(args):
    result = run(*args)
    assert not too_wide(result.output), "\n".join(too_wide(result.output))


def test_render_prints_the_source_and_space_lists_every_config_within_100_columns():
    """render's CUDA source lines are the template's own (exempt); its exit code and the --list table are not."""
    assert run("render", "layernorm", "--d", "768").exit_code == 0
    listed = run("space", "layernorm", "--d", "768", "--list")
    assert listed.exit_code == 0 and not too_wide(listed.output)


def test_wide_prints_at_full_width_and_a_wider_terminal_is_used():
    narrow = run("report", str(LN_ALL))
    wide = run("report", str(LN_ALL), "--wide")
    assert not too_wide(narrow.output) and too_wide(wide.output)
    assert "threads=64,rows=2,vec=8,hint=cs" in narrow.output  # the knobs that differ from the defaults
    roomy = run("explain", str(LN_ALL), columns=300)
    assert too_wide(roomy.output) and not too_wide(roomy.output, 300)


@pytest.mark.skipif(has_gpu(), reason="the error path of a GPU command, where no GPU is present")
def test_bench_without_a_gpu_fits():
    result = run("bench", "layernorm", "--d", "768")
    assert result.exit_code == 2 and not too_wide(result.output)
    (error,) = result.output.splitlines()
    assert error.startswith("mage-tune: error: no CUDA device found") and "no NVIDIA GPU here" in error


def test_search_says_new_study_then_resuming_with_outcomes_and_run_dir(tmp_path):
    run_dir = tmp_path / "run"
    args = ("search", "layernorm", "--d", "768", "--trials", "3", "--static", "--seed", "0", "--workers", "1")
    first = run(*args, "--run-dir", str(run_dir))
    assert first.exit_code == 0, first.output
    assert "new study layernorm-m4096-d768-sm_90-static" in first.output
    assert "trials by outcome: " in first.output and f"run directory: {run_dir}" in first.output
    assert not too_wide(first.output)
    again = run(*args, "--run-dir", str(run_dir), "--json")
    assert again.exit_code == 0, again.output
    assert "resuming 3 recorded trial(s)" in again.output and "nothing left to run" in again.output
    said = json.loads(again.stdout)
    assert said["run_dir"] == str(run_dir) and said["resumed_trials"] == 3 and sum(said["outcomes"].values()) == 3


def test_report_of_a_search_run_fits(tmp_path):
    run_dir = tmp_path / "search_mm"
    shutil.copytree(RUNS / "h200-2026-11-29" / "search_mm", run_dir)
    result = run("report", str(run_dir), "--no-plots")
    assert result.exit_code == 0 and not too_wide(result.output)
    assert "trials by outcome:" in result.output


def test_equal_values_are_equal_whatever_their_source():
    from mage_tune.census.table import render

    table = render([("a", [("registers", "32 [ptxas -v]")]), ("b", [("registers", "32 [cuobjdump]")])])
    assert "≠" not in table
    table = render([("a", [("registers", "32 [ptxas -v]")]), ("b", [("registers", "40 [ptxas -v]")])])
    assert "≠" in table


def test_did_you_mean_for_a_family_and_a_file():
    def said(*args: str) -> str:
        return " ".join(run(*args).output.split())  # unwrapped

    assert "did you mean the family layernorm?" in said("census", "layernrom")
    assert f"did you mean {ROOT / 'tests' / 'kernels' / 'flight.cu'}?" in said(
        "census", str(ROOT / "tests" / "kernels" / "flight.c")
    )
    assert "did you mean layernorm?" in said("space", "layernrom")


def test_compare_is_faithful_by_default_and_says_which_kernel():
    """Triton's kernel compiled as its JIT launches it for the shape unless --no-specialize; the output says which."""
    launched = run("compare", "layernorm", "--d", "768", "--wide").output
    generic = run("compare", "layernorm", "--d", "768", "--no-specialize", "--wide").output
    assert "(as launched)" in launched and "(unspecialized)" in generic
