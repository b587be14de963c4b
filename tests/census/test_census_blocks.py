"""Blocks of 2 and 3 dimensions: `census --block 32x8`, a PTX's `.reqntid 32, 4, 1`, and a family launched with a
2-D block (tests/fixtures/data/transpose2d_family.py) through census, space, render and a static search. The
occupancy is of the block's threads; the table shows its shape and the JSON adds `block_dims`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import KERNELS, nvrtc_compile

from mage_tune.census import census_path
from mage_tune.census.occupancy import occupancy
from mage_tune.census.table import block_cell, rows
from mage_tune.cli import cli
from mage_tune.cli.options import BlockDims

ROOT = Path(__file__).resolve().parents[2]
TRANSPOSE = ROOT / "tests" / "fixtures" / "data" / "transpose2d_family.py"


def mage(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mage_tune", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd)


def ok(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run.stdout


# --- --block ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "dims"),
    [("256", (256, 1, 1)), ("32x8", (32, 8, 1)), ("32x8x2", (32, 8, 2)), ("32X4", (32, 4, 1)), ("1024", (1024, 1, 1))],
)
def test_block_text(text, dims):
    assert BlockDims().convert(text, None, None) == dims


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("0", "every dimension is at least 1"),
        ("32x0", "every dimension is at least 1"),
        ("64x32", "2048 threads; a block has at most 1024"),
        ("1025", "1025 threads"),
        ("1x1x65", "z is at most 64"),
        ("32x8x2x2", "expected threads per block"),
        ("32*8", "expected threads per block"),
        ("", "expected threads per block"),
        ("-4", "every dimension is at least 1"),
        ("32x-1", "every dimension is at least 1"),
    ],
)
def test_block_text_refused(text, why):
    with pytest.raises(click.BadParameter, match=re.escape(why)):
        BlockDims().convert(text, None, None)
    out = CliRunner().invoke(cli, ["census", str(KERNELS / "vec_scale.cu"), "--block", text])
    assert out.exit_code == 2 and "Invalid value for '--block'" in out.output and why in out.output


def test_a_2d_block_shows_its_shape_and_counts_its_threads():
    (flat,) = census_path(KERNELS / "vec_scale.cu", arch="sm_90", block=256)
    (tiled,) = census_path(KERNELS / "vec_scale.cu", arch="sm_90", block=(32, 8, 1))
    assert tiled.occupancy == flat.occupancy  # occupancy is of threads, whatever the shape
    expected = occupancy("sm_90", 256, tiled.resources.registers, tiled.resources.shared_bytes or 0)
    assert tiled.occupancy.blocks_per_sm == expected.blocks_per_sm
    assert dict(rows(tiled))["block"] == "32×8 (256 threads)" and dict(rows(flat))["block"] == "256"
    assert tiled.to_json()["occupancy"]["block"] == 256 and tiled.to_json()["occupancy"]["block_dims"] == [32, 8, 1]
    assert flat.to_json()["occupancy"]["block_dims"] == [256, 1, 1]
    assert block_cell(128, (8, 8, 2)) == "8×8×2 (128 threads)" and block_cell(64, None) == "64"


def test_census_block_on_the_command_line():
    out = CliRunner().invoke(cli, ["census", str(KERNELS / "vec_scale.cu"), "--block", "32x8x2", "--json"])
    assert out.exit_code == 0, out.output
    occ = json.loads(out.stdout)["occupancy"]
    assert occ["block"] == 512 and occ["block_dims"] == [32, 8, 2]
    table = CliRunner().invoke(cli, ["census", str(KERNELS / "vec_scale.cu"), "--block", "32x8x2"])
    assert re.search(r"^\s*block\s+32×8×2 \(512 threads\)\s*$", table.stdout, re.M), table.stdout


def test_reqntid_dimensions_are_the_blocks(tmp_path):
    """A PTX entry that requires .reqntid 32, 4, 1: 128 threads, shown as 32×4."""
    ptx = nvrtc_compile((KERNELS / "vec_scale.cu").read_text(), "sm_90", "vec_scale.cu")
    ptx, n = re.subn(r"(\.entry vec_scale\([^)]*\))", r"\1\n.reqntid 32, 4, 1", ptx)
    assert n == 1
    path = tmp_path / "required.ptx"
    path.write_text(ptx)
    (c,) = census_path(path, arch="sm_90")
    assert c.launch_bounds["reqntid"] == 128 and c.block_dims == (32, 4, 1)
    assert c.occupancy.block == 128 and dict(rows(c))["block"] == "32×4 (128 threads)"
    assert c.to_json()["occupancy"]["block_dims"] == [32, 4, 1]


# --- a family launched with a 2-D block ----------------------------------------------------------------------------


def test_census_of_a_2d_block_family():
    record = json.loads(ok(mage("census", str(TRANSPOSE), "--set", "rows=8", "--json")))
    assert record["occupancy"]["block"] == 256 and record["occupancy"]["block_dims"] == [32, 8, 1]
    expected = occupancy("sm_90", 256, record["registers"], record["shared_bytes"])
    assert record["occupancy"]["blocks_per_sm"] == expected.blocks_per_sm
    assert record["sass"]["shared_loads"] and record["sass"]["barriers"] >= 1  # the tile goes through shared memory
    table = ok(mage("census", str(TRANSPOSE), "--set", "rows=4"))
    assert re.search(r"^\s*block\s+32×4 \(128 threads\)\s*$", table, re.M), table


def test_space_and_render_of_a_2d_block_family():
    space = ok(mage("space", str(TRANSPOSE)))
    assert "4 valid configs of 4" in space
    listed = [json.loads(line) for line in ok(mage("space", str(TRANSPOSE), "--json")).splitlines()]
    assert [c["config"]["rows"] for c in listed[1:-1]] == [8, 4, 16, 32]
    source = ok(mage("render", str(TRANSPOSE), "--set", "rows=16"))
    assert "__launch_bounds__(512)" in source and "j += 16" in source


def test_static_search_of_a_2d_block_family(tmp_path):
    run = mage("search", str(TRANSPOSE), "--static", "--trials", "5", "--run-dir", "run", "--db", "off",
               "--seed", "0", "--json", cwd=tmp_path)  # fmt: skip
    best = json.loads(ok(run))
    trials = [json.loads(line) for line in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    scored = [t for t in trials if t["outcome"] == "modelled"]
    assert scored and best["value"] == min(t["value"] for t in scored)
    for t in scored:
        assert t["block"] == [32, t["config"]["rows"], 1]  # records keep a 2-D block as [x, y, z]
        assert t["grid"] == [512 // 32, 1024 // 32, 1]
    census = json.loads((tmp_path / "run" / "best" / "census.json").read_text())
    rows_ = next(t for t in scored if t["value"] == best["value"])["config"]["rows"]
    assert census["occupancy"]["block"] == 32 * rows_ and census["occupancy"]["block_dims"] == [32, rows_, 1]
