"""Every command's output fits 100 columns by default (tables wrap their widest cells, long lines wrap), `--wide`
prints at full width, and `search` says what happened: a new study or how many recorded trials it resumes, then
the trials by outcome and the run directory (also in --json)."""

from __future__ import annotations

import io
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import has_gpu

from mage_tune import textwidth
from mage_tune.cli import cli, main_error_text
from mage_tune.errors import MageError
from mage_tune.kernels.registry import load_family
from mage_tune.search.space import SAMPLED

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "fixtures"  # real records, cut down (analysis/make_fixtures.py)
LN_ALL = RUNS / "oldest-records" / "ln_d768_all.json"
SHAPES = RUNS / "shape-benches"
MM = ("--m", "1024", "--n", "1024", "--k", "1024")
DATA = ROOT / "tests" / "fixtures" / "data"
ENDLESS = str(DATA / "endless_family.py")  # 10^12 combinations: a walk of its space would never end
TINY = f"{DATA / 'tiny_layernorm_family.py'}:TINY"


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
    ("census", str(ROOT / "tests" / "fixtures" / "kernels" / "flight.cu")),
    ("census", "layernorm", "--d", "768"),
    ("census", "matmul", *MM),
    ("compare", "layernorm", "--d", "768"),
    ("compare", "matmul", *MM),
    ("report", str(LN_ALL)),
    ("report", str(RUNS / "oldest-records" / "planted.json")),
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


def test_compare_with_every_triton_config_shows_them_in_groups_beside_ours():
    """Nine kernels do not fit 100 columns whole: groups of them, each beside ours, every item and name whole."""
    result = run("compare", "matmul", *MM, "--config", "all", "--json")
    kernels = json.loads(result.output)["kernels"]
    shown = run("compare", "matmul", *MM, "--config", "all").output
    assert not too_wide(shown) and len(kernels) > 4
    groups = shown.split("\n\n")
    tables = [g for g in groups if "property" in g]
    assert len(tables) >= 2 and all("ours: matmul" in t for t in tables)
    items = {item for line in shown.splitlines() for item in line.split()}
    assert {"matmul_kernel", "(16×16)"} <= items
    for k in kernels[1:]:
        assert all(f"{key}={value}" in items for key, value in k["config"].items()), k["config"]
    assert sum(t.count("triton:") for t in tables) == len(kernels) - 1


def test_render_prints_the_source_and_space_lists_configs_within_100_columns():
    """render's CUDA source lines are the template's own (exempt); its exit code and the --list lines are not (the
    first 20,000 of the 857,665: every line is made alike, and the whole list takes a minute)."""
    assert run("render", "layernorm", "--d", "768").exit_code == 0
    shown = run("render", "matmul-bf16", *MM).output.splitlines()  # 17 knobs: the header's config wraps
    assert shown[0] == "// matmul-bf16 m=1024 n=1024 k=1024 sm_90a" and shown[1].startswith("// config: bm=")
    assert shown[2].startswith("//   ") and all(len(line) <= 100 for line in shown[:3])
    triton = run("render", str(ROOT / "examples" / "rmsnorm" / "triton_family.py"), "--d", "1024").output
    assert triton.startswith("# triton_rmsnorm m=4096 d=1024 sm_90\n# config: BLOCK=")  # Python's comments
    listed = run("space", "layernorm", "--d", "768", "--list", "--limit", "20000")
    assert listed.exit_code == 0 and not too_wide(listed.output)


@pytest.mark.parametrize(
    "command",
    [("census",), ("compare",), ("search",), ("space",), ("bench",), ("db", "export"), ("db", "list"), ("explain",)],
    ids=" ".join,
)
def test_help_never_breaks_a_hyphenated_word(command):
    """Help wraps at spaces only: an option named in a help text (--extra-device-vectorization) or a command
    (`mage-tune space`) stays on one line."""
    text = run(*command, "--help").output
    broken = [line for line in text.splitlines() if re.search(r"\w-$", line)]
    assert not broken, broken
    assert not too_wide(text)


@pytest.mark.parametrize("limit", ["3", "400"])
def test_space_list_never_splits_a_knob_name(limit):
    """Knobs the listed configs share are said once above them; the rest are a table's headers, whole, or where
    those do not fit, each config a line of knob=value items."""
    from mage_tune.kernels import get_family

    listed = run("space", "layernorm", "--d", "768", "--list", "--limit", limit).output
    tail = listed.split(f"(--limit {limit}):", 1)[1]
    words = set(re.findall(r"\w+", tail))
    for knob in get_family("layernorm").knobs:
        assert knob.name in words, knob.name
    assert not too_wide(listed)


def test_wide_prints_at_full_width_and_a_wider_terminal_is_used():
    narrow = run("report", str(LN_ALL))
    wide = run("report", str(LN_ALL), "--wide")
    assert not too_wide(narrow.output) and too_wide(wide.output)
    assert "threads=64,rows=2,vec=8,hint=cs" in narrow.output  # the knobs that differ from the defaults
    roomy = run("explain", str(LN_ALL), columns=300)
    assert too_wide(roomy.output) and not too_wide(roomy.output, 300)


def test_wide_is_taken_after_a_db_subcommand_as_before_it_and_holds_for_that_run_only():
    args = ("query", "matmul-3xtf32", "--shipped")
    after, before = run("db", *args, "--wide"), run("db", "--wide", *args)
    assert after.exit_code == 0 and after.output == before.output and too_wide(after.output)
    assert not too_wide(run("db", *args).output)  # the next run fits again


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
    shutil.copytree(RUNS / "oldest-records" / "search_mm", run_dir)
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

    assert "did you mean the family layernorm" in said("census", "layernrom")  # (or another close name after it)
    assert f"did you mean {ROOT / 'tests' / 'fixtures' / 'kernels' / 'flight.cu'}?" in said(
        "census", str(ROOT / "tests" / "fixtures" / "kernels" / "flight.c")
    )
    assert "did you mean layernorm or" in said("space", "layernrom")  # the closest name first


def test_compare_is_faithful_by_default_and_says_which_kernel():
    """Triton's kernel compiled as its JIT launches it for the shape unless --no-specialize; the output says which."""
    launched = run("compare", "layernorm", "--d", "768", "--wide").output
    generic = run("compare", "layernorm", "--d", "768", "--no-specialize", "--wide").output
    assert "(as launched)" in launched and "(unspecialized)" in generic


# --- space --json streams; progress in a log; tables never split a knob=value item -----------------------------


def mage(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`mage-tune` as a user runs it, output captured (pipes, not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def test_space_json_lists_up_to_limit_with_the_count_without_building_the_space():
    """matmul at 1024³ has 7.5 M valid configs: --json --limit 5 is a header, 5 configs and the count, an estimate
    said as one (a second, not the ten of counting every one, nor the minutes and gigabytes of building them)."""
    ran = mage("space", "matmul", *MM, "--json", "--limit", "5", timeout=120)
    assert ran.returncode == 0, ran.stderr
    header, *configs, last = (json.loads(line) for line in ran.stdout.splitlines())
    assert header["family"] == "matmul" and header["shape"] == {"m": 1024, "n": 1024, "k": 1024}
    assert header["arch"] == "sm_90" and [k["name"] for k in header["knobs"]][:2] == ["bm", "bn"]
    assert header["constraints"] and header["size"] == 39813120
    assert len(configs) == 5 and all(set(c["config"]) == {k["name"] for k in header["knobs"]} for c in configs)
    estimate = last.pop("estimate")
    assert last == {"valid": None, "listed": 5, "count": "estimate"}
    assert estimate["low"] <= 7531680 <= estimate["high"] and estimate["low"] <= estimate["valid"] <= estimate["high"]
    assert estimate == {**estimate, "confidence": 0.95, "sampled": SAMPLED, "combinations": 1990656}


def test_space_limit_never_walks_the_space(monkeypatch):
    """Counted, not timed: --limit N checks the constraints for the first N configs and the sample, never for
    matmul's 2 million combinations; nor for the endless family's 10^12, where a walk would never end."""
    from mage_tune.kernels import get_family

    matmul = type(get_family("matmul"))
    calls = [0]
    check = matmul.violations

    def counted(self, *args):
        calls[0] += 1
        return check(self, *args)

    monkeypatch.setattr(matmul, "violations", counted)
    listed = run("space", "matmul", *MM, "--json", "--limit", "5")
    assert listed.exit_code == 0 and json.loads(listed.stdout.splitlines()[-1])["count"] == "estimate"
    assert calls[0] <= SAMPLED + 5

    endless = load_family(ENDLESS)
    type(endless).checked = 0
    streamed = run("space", ENDLESS, "--d", "64", "--json", "--limit", "3")
    assert streamed.exit_code == 0 and len(streamed.stdout.splitlines()) == 5
    last = json.loads(streamed.stdout.splitlines()[-1])
    assert last["valid"] is None and last["listed"] == 3 and last["count"] == "estimate"
    assert last["estimate"]["low"] <= 1_500_000_000_000 <= last["estimate"]["high"]
    assert type(endless).checked <= SAMPLED + 1
    table = run("space", ENDLESS, "--d", "64", "--list", "--limit", "3")
    assert table.exit_code == 0 and not too_wide(table.output) and "the first 3 (--limit 3):" in table.output
    assert "about 1.5" in table.output and "--exact counts them all" in table.output


def test_space_json_streams_its_first_lines_at_once_and_a_reader_may_stop():
    """Without --limit every config is written as it is found: the first lines come at once, and a reader that
    stops (head) ends the command quietly (exit 0, no traceback)."""
    with subprocess.Popen(
        [sys.executable, "-m", "mage_tune", "space", "matmul", *MM, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as proc:
        first = [json.loads(proc.stdout.readline()) for _ in range(4)]
        proc.stdout.close()
        assert proc.wait(timeout=120) == 0
        assert "Traceback" not in proc.stderr.read()
    assert first[0]["family"] == "matmul" and all("config" in line for line in first[1:])


def test_space_list_limit_and_whole_small_space():
    """layernorm at d = 768 has 1 078 272 combinations of its constrained knobs: estimated unless --exact, counted
    (857 664 valid) with it; a space listed whole is counted as it is listed."""
    listed = run("space", "layernorm", "--d", "768", "--list", "--limit", "3")
    assert listed.exit_code == 0 and "the first 3 (--limit 3):" in listed.output and not too_wide(listed.output)
    assert re.search(r"\nabout 8\d\d thousand valid configs of 6469632 ", listed.output)
    assert "estimated from 50,000 of the 1,078,272 combinations" in " ".join(listed.output.split())
    whole = run("space", "layernorm", "--d", "768", "--json", "--limit", "0", "--exact")
    last = json.loads(whole.stdout.splitlines()[-1])
    assert whole.exit_code == 0 and last == {"valid": 857664, "listed": 0, "count": "exact"}
    small = run("space", "matmul-3xtf32", *MM, "--json", "--limit", "0")
    assert json.loads(small.stdout.splitlines()[-1]) == {"valid": 12192, "listed": 0, "count": "exact"}
    every = run("space", str(TINY), "--shape", "m=256,d=64", "--json")
    assert json.loads(every.stdout.splitlines()[-1]) == {"valid": 6, "listed": 6, "count": "exact"}


def test_progress_in_a_log_is_plain_lines(tmp_path):
    """With stderr a pipe (a log file, CI), search's progress is a line every tenth of the trials: no carriage
    returns, no bar redrawn thousands of times."""
    ran = mage("search", "layernorm", "--d", "768", "--static", "--trials", "12", "--run-dir", str(tmp_path / "r"))
    assert ran.returncode == 0, ran.stderr
    assert "\r" not in ran.stderr and "\r" not in ran.stdout
    lines = [line for line in ran.stderr.splitlines() if re.match(r"search layernorm\S*: \d+/12 trials", line)]
    assert 2 <= len(lines) <= 12, ran.stderr
    assert lines[-1].startswith("search layernorm-m4096-d768-sm_90-static: 12/12 trials (100%), best ")


def test_progress_helper_draws_only_on_a_terminal():
    from mage_tune.progress import Progress

    log = io.StringIO()
    with Progress(40, "work", unit="trial", file=log) as bar:
        assert not bar.live
        for n in range(40):
            bar.update(note=f"best {n}")
    said = log.getvalue().splitlines()
    assert len(said) == 10 and said[0].startswith("work: 4/40 trials (10%), best 3,")
    assert said[-1].startswith("work: 40/40 trials (100%), best 39,") and "\r" not in log.getvalue()
    log = io.StringIO()
    with Progress(3, "few", file=log) as bar:
        for _ in bar.iterate(range(2)):
            pass
    assert [line.split(",")[0] for line in log.getvalue().splitlines()] == [
        "few: 1/3 items (33%)",
        "few: 2/3 items (66%)",
    ]


KNOBS = (
    "threads=96,rows=8,vec=8,passes=twopass,reduce=smem,rsqrt=precise,hint=nc_na,y_hint=cs,full_occupancy=1,"
    "x_prefetch=256,l2_ahead=2"
)
CENSUS = ["regs", "smem B", "occ", "limiter", "load bits", "loads in flight", "cp.async groups", "barriers"]


def census_rows(n: int = 6) -> list[list]:
    return [
        [k, f"8.{k}1", "polish x_prefetch=256 on #6", KNOBS, 40, 6144, "0.75", "warps", 64, 8, 0, 6] for k in range(n)
    ]


def items_whole(text: str, config: str = KNOBS) -> list[str]:
    """The knob=value items of `config` that no line of `text` holds whole."""
    return [item for item in config.split(",") if not any(item in line for line in text.splitlines())]


@pytest.mark.parametrize("width", range(60, 141, 5))
def test_a_table_never_splits_a_knob_value_item(monkeypatch, width):
    monkeypatch.setattr(textwidth, "columns", lambda: width)
    headers = ["trial", "µs (model)", "from", "config (≠ defaults)", *CENSUS]
    text = textwidth.table(census_rows(), headers, optional=CENSUS[::-1])
    assert not too_wide(text, width), text
    assert not items_whole(text), (width, items_whole(text), text)


def test_a_table_fitting_100_columns_drops_columns_rather_than_split_items(monkeypatch):
    monkeypatch.setattr(textwidth, "columns", lambda: 100)
    headers = ["trial", "µs (model)", "from", "config (≠ defaults)", *CENSUS]
    text = textwidth.table(census_rows(), headers, optional=CENSUS[::-1])
    assert not too_wide(text) and not items_whole(text)
    body, note = text.split("\nnot shown, to fit 100 columns: ")
    body = body.splitlines()
    assert note.startswith("barriers, cp.async groups,") and "(--wide shows every column)" in " ".join(note.split())
    assert "barriers" not in body[0] and body[0].startswith("trial")
    starts = [n for n, line in enumerate(body) if re.match(r"\d+ ", line)] + [len(body)]
    assert len(starts) == 7 and all(b - a <= 4 for a, b in itertools.pairwise(starts)), text  # rows of 4 lines at most
    monkeypatch.setattr(textwidth, "columns", lambda: None)  # --wide: every column
    assert "barriers" in textwidth.table(census_rows(), headers, optional=CENSUS[::-1])


def test_wrapped_lines_break_a_config_between_its_items():
    line = f"winner: trial 1 layernorm[{KNOBS},persist=0,affine=early] at 8.31 µs"
    for width in range(60, 101, 7):
        text = textwidth.wrap(line, width)
        assert not too_wide(text, width) and not items_whole(text), text


def test_progress_takes_a_total_learned_once_the_plan_is_made():
    """bench learns its total (baselines included) only once its plan is made: the lines count to it, never past
    100 %."""
    import io

    from mage_tune.progress import Progress

    out = io.StringIO()
    with Progress(3, "measuring", unit="result", file=out) as bar:
        bar.set_total(20)
        for _ in range(20):
            bar.update(1)
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("measuring: 20/20 results (100%)") and len(lines) == 10
    assert not any("/3 " in line or ("%)" in line and int(line.split("(")[1].split("%")[0]) > 100) for line in lines)


def test_doctor_lists_every_tool_the_readme_names_with_paths_whole():
    """NVRTC, nvcc (optional), ptxas, cuobjdump and nvdisasm each have a row; a path is never split across lines."""
    from mage_tune import toolchain
    from mage_tune.cli.doctor_cmd import _shown

    out = run("doctor").output
    tools = {line.split()[0] for line in out.splitlines() if line and not line.startswith((" ", "-"))}
    assert {"nvrtc", "nvcc", "ptxas", "cuobjdump", "nvdisasm"} <= tools
    shown = [*toolchain.candidates("ptxas"), *filter(None, [toolchain.nvcc()])]  # every ptxas, the nvcc used
    for tool in shown:
        assert _shown(tool.path) in out.split(), tool.path  # one cell, whole
        assert _shown(tool.path).endswith(Path(tool.path).name)


def test_doctor_json_holds_what_the_tables_show():
    """`doctor --json` for a script (a CI step checking the toolchain): every tool with its full path, the archs."""
    from mage_tune import toolchain

    result = run("doctor", "--json")
    found = json.loads(result.output)
    assert found["schema"] == "mage-tune.doctor/1" and found["mode"].startswith("mode: ")
    paths = {t["path"] for t in found["tools"] if t["tool"] == "ptxas"}
    assert paths == {tool.path for tool in toolchain.candidates("ptxas")}
    assert {"nvrtc", "nvcc", "ptxas", "cuobjdump", "nvdisasm", "triton", "torch"} <= {t["tool"] for t in found["tools"]}
    assert {"sm_80", "sm_90a"} <= {a["arch"] for a in found["archs"]}
    missing = [t for t in found["tools"] if t["version"] == "missing" and t["required"]]
    assert result.exit_code == (1 if missing or not found["usable"] else 0)
