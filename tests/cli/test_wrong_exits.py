"""Wrong exits and silent drops, through the real console entry point: each bad input is exit 2 and one
`mage-tune: error:` line naming the file (and line where there is one), or a click usage error; never a traceback,
never an exit 0 that ignores what was asked.

Searches are static (no GPU) on the planted family (four configs), with the tuning database off.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
PLANTED = DATA / "planted_crash_family.py"


def mage(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def clean_error(run: subprocess.CompletedProcess, *names: str) -> str:
    """Exit 2, no traceback, one error message naming each of `names` (wrapped lines joined back); returned."""
    assert run.returncode == 2, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert "Traceback" not in run.stderr + run.stdout, run.stderr
    lines = run.stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("mage-tune: error:")]
    assert len(starts) == 1, run.stderr
    message = " ".join(line.strip() for line in lines[starts[0] :])
    squeezed = "".join(message.split())
    for name in names:
        assert "".join(name.split()) in squeezed, (name, message)
    return message


def usage_error(run: subprocess.CompletedProcess, *words: str) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert "Traceback" not in run.stderr + run.stdout and "Error:" in run.stderr, run.stderr
    for word in words:
        assert word in run.stderr, (word, run.stderr)
    return run.stderr


def planted_family(folder: Path, body: str, name: str = "family.py") -> Path:
    """A family file subclassing the planted family, `body` in its class."""
    path = folder / name
    path.write_text(
        "from pathlib import Path\n\n"
        "from mage_tune.families import Knob, import_file\n\n"
        f"Planted = import_file(Path({str(PLANTED)!r})).PlantedCrash\n\n\n"
        "class Odd(Planted):\n"
        "    name = 'odd'\n"
        f"{body}\n\n\n"
        "FAMILY = Odd\n"
    )
    return path


def static_search(family: Path, run_dir: str, *extra: str) -> list[str]:
    return [
        "search",
        str(family),
        "--static",
        "--trials",
        "3",
        "--seed",
        "1",
        "--db",
        "off",
        "--run-dir",
        run_dir,
        *extra,
    ]


# --- 1: a search where no trial scored ----------------------------------------------------------------------------

NEVER_VALID = "    def violations(self, config, shape, arch):\n        return ['never valid']"
NOT_CUDA = "    template_dir = str(Path(__file__).parent)\n    template = 'broken.cu.j2'"


@pytest.mark.parametrize(("body", "outcome"), [(NEVER_VALID, "pruned 3"), (NOT_CUDA, "compile_error 3")])
def test_a_search_where_no_trial_scored_fails(tmp_path, body, outcome):
    (tmp_path / "broken.cu.j2").write_text('extern "C" __global__ void twice(float* x) { this is not cuda; }\n')
    family = planted_family(tmp_path, body)
    run = mage(*static_search(family, "run"), cwd=tmp_path)
    message = clean_error(run, "run/trials.jsonl", "no trial scored", outcome)
    assert "report.md" not in run.stdout and "best/" not in run.stdout  # nothing named that was not written
    assert "no report.md nor best/" in message
    assert not (tmp_path / "run" / "report.md").exists() and not (tmp_path / "run" / "best").exists()
    assert (tmp_path / "run" / "trials.jsonl").read_text().count("\n") == 3
    clean_error(mage(*static_search(family, "run"), "--json", cwd=tmp_path), "no trial scored")  # resumed: the same


# --- 2: sys.exit in a family file ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "said"),
    [
        ("import sys\n\nsys.exit(0)\n", 3, "sys.exit(0)"),
        ("raise SystemExit\n", 1, "sys.exit()"),
        ("import sys\nsys.exit('bye')\n", 2, "sys.exit('bye')"),
    ],
)
def test_sys_exit_while_importing_a_family_file_is_an_error(tmp_path, text, line, said):
    path = tmp_path / "family.py"
    path.write_text(text)
    message = clean_error(mage("space", str(path), cwd=tmp_path), f"{path}:{line}:", said)
    assert "while being imported" in message


# --- 3: census --block out of range -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "why"),
    [("-3", "at least 1"), ("0", "at least 1"), ("1025", "at most 1024"), ("64x32", "at most 1024"),
     ("32x0", "at least 1"), ("8x8", None)],
)  # fmt: skip
def test_census_block_out_of_range_is_a_usage_error(tmp_path, block, why):
    run = mage("census", "anything.ptx", "--block", block, cwd=tmp_path)
    if why is None:  # a valid block: the file is what is wrong
        clean_error(run, "anything.ptx")
        return
    usage_error(run, "'--block'", why)


def test_census_block_with_a_family_is_refused(tmp_path):
    clean_error(mage("census", str(PLANTED), "--block", "128", cwd=tmp_path), "--block", "--set")


@pytest.mark.parametrize("args", [["--set", "threads=128"], ["--d", "768"], ["--shape", "m=64", "--k", "8"]])
def test_census_of_a_kernel_file_refuses_a_family_s_knobs_and_shape(tmp_path, args):
    """A kernel file has no knobs or shape: census would have ignored them, and shown another kernel than asked."""
    kernel = tmp_path / "k.cu"
    kernel.write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    clean_error(mage("census", str(kernel), *args, cwd=tmp_path), str(kernel), args[0], "censused as it is")
    plain = mage("census", str(kernel), "--json", cwd=tmp_path)  # without them, the file is censused
    assert plain.returncode == 0 and '"kernel": "_Z1kPf"' in plain.stdout


# --- 4: --polish with the grid ------------------------------------------------------------------------------------


def test_polish_with_the_grid_is_a_usage_error(tmp_path):
    run = mage(*static_search(PLANTED, "run", "--sampler", "grid", "--polish", "2"), cwd=tmp_path)
    usage_error(run, "--polish", "grid")
    assert not (tmp_path / "run").exists()
    for extra in ((), ("--polish", "0")):  # the default (none for the grid) and an explicit none both run
        done = mage(*static_search(PLANTED, f"run{len(extra)}", "--sampler", "grid", *extra), cwd=tmp_path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert "run directory:" in done.stdout and "report.md" in done.stdout


# --- 5: explain RUN_DIR --counters --------------------------------------------------------------------------------


def test_explain_counters_with_a_run_directory_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "trials.jsonl").write_text("")
    (tmp_path / "counters.json").write_text("{}")
    run = mage("explain", "run", "--counters", "counters.json", cwd=tmp_path)
    clean_error(run, "run:", "--counters counters.json", "bench")


# --- 6: a family whose space is ill-defined, or whose constructor raises ------------------------------------------


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            "    knobs = (Knob('threads', (256, 128), 't'), Knob('threads', (64,), 'again'))",
            "'threads' is declared twice",
        ),
        ("    knobs = (Knob('threads', (), 't'), Knob('crash', (0, 1), 'c'))", "'threads' has an empty domain"),
        ("    def __init__(self):\n        raise RuntimeError('no budget')", "RuntimeError: no budget"),
        ("    def violations(self, config, shape, arch):\n        raise ValueError('boom')", "ValueError: boom"),
        ("    def violations(self, config, shape, arch):\n        return [config['nope']]", "KeyError: 'nope'"),
    ],
)
def test_a_broken_family_is_refused_naming_its_file(tmp_path, body, said):
    """A family whose space is ill-defined, or whose own code raises (its constructor, a constraint): one line
    naming the file and the line that raised, exit 2, no traceback."""
    family = planted_family(tmp_path, body)
    message = clean_error(mage("space", str(family), cwd=tmp_path), str(family), said)
    if "__init__" in body:
        assert f"{family}:11:" in message and "Odd()" in message
    if "violations" in body:
        assert f"{family}:11:" in message  # the line of the raise


# --- 7: a missing family file is never another one under the current folder --------------------------------------


def test_a_missing_absolute_family_file_is_not_looked_for_under_the_current_folder(tmp_path):
    (tmp_path / "fam").mkdir()
    planted_family(tmp_path / "fam", "    pass")
    assert mage("space", "fam/family.py", cwd=tmp_path).returncode == 0
    missing = "/no-such-root-for-mage-tune/fam/family.py"
    message = clean_error(mage("space", missing, cwd=tmp_path), missing)
    assert "no such family file" in message


# --- 8: a damaged journal -----------------------------------------------------------------------------------------

CREATED = '{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\n'


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (bytes(range(128, 256)) + b"\x00garbage", "bad.journal:1:"),
        (CREATED.encode() + b"[1, 2]\n", "bad.journal:2:"),
        (CREATED.encode() + b"not json at all\n", "bad.journal:2:"),  # a last line Optuna would skip until a write
        (b'{"a": 1}\n', "bad.journal:"),  # JSON, but not a journal's
    ],
)
def test_a_damaged_journal_names_the_file(tmp_path, content, where):
    (tmp_path / "bad.journal").write_bytes(content)
    run = mage(*static_search(PLANTED, "run", "--storage", "journal:bad.journal"), cwd=tmp_path)
    assert "journal" in clean_error(run, where)
    clean_error(mage("db", "list", "--db", "journal:bad.journal", cwd=tmp_path), where)


def test_a_journal_damaged_between_runs_is_an_error_when_resumed(tmp_path):
    """A partial last line (a writer killed mid-line) passes Optuna's open, then joins the next write: the resumed
    search says which journal line, and that the finished trials are kept."""
    args = static_search(PLANTED, "run", "--storage", "journal:run.journal")
    first = mage(*args, "--trials", "2", cwd=tmp_path)  # the last --trials counts
    assert first.returncode == 0, first.stderr
    with (tmp_path / "run.journal").open("a") as journal:
        journal.write('{"op_code": 4, "stu')
    message = clean_error(mage(*args, cwd=tmp_path), "run.journal:", "run/trials.jsonl")
    assert "unreadable" in message


def test_a_value_given_twice_is_refused_not_overridden(tmp_path):
    """Two values for one dimension or one knob: the user means one of them, so neither is picked silently."""
    usage_error(mage("space", "layernorm", "--shape", "d=768,d=512", cwd=tmp_path), "d is given twice (768 and 512)")
    clean_error(
        mage("render", "layernorm", "--d", "768", "--set", "threads=128", "--set", "threads=256", cwd=tmp_path),
        "--set threads is given twice (128 and 256)",
    )
    same = mage("render", "layernorm", "--d", "768", "--set", "threads=128", "--set", "threads=128", cwd=tmp_path)
    assert same.returncode == 0 and "// config: threads=128 " in same.stdout
