"""docs/results.md is what the commands under its tables print: each fenced block of suite_from_runs.py and
results_table.py commands is run as it stands (argument lists, no shell; the suite records written to a temporary
folder instead of runs/suites/) on the published archives, and the tables it prints are on the page word for word."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "results.md"

pytestmark = pytest.mark.records


def _blocks() -> list[list[list[str]]]:
    """The page's command blocks: each a list of commands, each an argument list."""
    found = []
    for block in re.findall(r"```\n(.*?)```", PAGE.read_text(), re.S):
        if "benchmarks/results_table.py" in block:
            found.append([shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()])
    return found


def test_the_page_has_a_table_per_family_and_commands_under_each():
    blocks = _blocks()
    suites = {word.removeprefix("runs/suites/") for block in blocks for cmd in block for word in cmd}
    assert {"layernorm-h200.json", "matmul-h200.json", "matmul-3xtf32-h200.json"} <= suites
    assert len(blocks) >= 3 and all(block[-1][1] == "benchmarks/results_table.py" for block in blocks)


@pytest.mark.parametrize("number", range(len(_blocks())))
def test_each_table_is_what_its_commands_print(number, tmp_path):
    page = PAGE.read_text()
    for command in _blocks()[number]:
        assert command[0] == "python" and command[1].startswith("benchmarks/")
        argv = [sys.executable, *(word.replace("runs/suites/", f"{tmp_path}/") for word in command[1:])]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    tables = done.stdout.strip()
    assert tables.count("| ") > 10 and tables in page
