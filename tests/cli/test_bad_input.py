"""Bad input through the real console entry point: exit code 2 and one line on stderr that names the file (and the
line, for PTX and CUDA source), never a traceback.

Every broken file is made from a real one (NVRTC's PTX, ptxas's cubin) by cutting or overwriting part of it.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import KERNELS, nvrtc_compile, run_tool, tool


def census(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mage_tune", "census", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def assert_one_line_error(run: subprocess.CompletedProcess, path: Path, line: int | None = None) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr and not run.stdout
    assert "/tmp/mage-" not in run.stderr  # the user's file is named, never the temporary copy a tool was given
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    (message,) = lines
    assert message.startswith("mage-tune: error:")
    assert path.name in message
    if line is not None:
        assert f"{path.name}:{line}:" in message
    return message


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A real PTX module (two kernels) and its cubin, for sm_89."""
    folder = tmp_path_factory.mktemp("real")
    ptx = folder / "flight.ptx"
    ptx.write_text(nvrtc_compile((KERNELS / "flight.cu").read_text(), "sm_89", "flight.cu"))
    cubin = folder / "flight.cubin"
    run_tool(tool("ptxas"), "-arch=sm_89", str(ptx), "-o", str(cubin))
    return ptx, cubin


def test_empty_file(tmp_path):
    path = tmp_path / "empty.ptx"
    path.write_text("")
    assert "empty" in assert_one_line_error(census(str(path)), path)


def test_truncated_ptx(real, tmp_path):
    ptx, _ = real
    text = ptx.read_text()
    path = tmp_path / "truncated.ptx"
    path.write_text(text[: len(text) // 2])
    message = assert_one_line_error(census(str(path)), path)
    assert re.search(rf"{re.escape(path.name)}:\d+: ", message)  # where the file ends, mid-kernel


def _replace_instruction(ptx: Path, junk: str) -> tuple[str, int]:
    lines = ptx.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if "ld.global.nc.v4.f32" in line)
    lines[index] = junk
    return "\n".join(lines) + "\n", index + 1


def test_garbled_ptx_names_the_line(real, tmp_path):
    text, line = _replace_instruction(real[0], "\t#### 0xdeadbeef this is not ptx ####;")
    path = tmp_path / "garbled.ptx"
    path.write_text(text)
    assert_one_line_error(census(str(path)), path, line)


def test_unknown_instruction_names_the_line(real, tmp_path):
    """Shaped like an instruction, so the census reads it; ptxas rejects it, and its line is reported."""
    text, line = _replace_instruction(real[0], "\tfrobnicate.f32 \t%f1, %f2;")
    path = tmp_path / "unknown.ptx"
    path.write_text(text)
    assert "frobnicate" in assert_one_line_error(census(str(path)), path, line)


def test_random_bytes(tmp_path):
    path = tmp_path / "noise.bin"
    path.write_bytes(random.Random(0).randbytes(4096))
    assert_one_line_error(census(str(path)), path)


def test_half_a_cubin(real, tmp_path):
    data = real[1].read_bytes()
    path = tmp_path / "half.cubin"
    path.write_bytes(data[: len(data) // 2])
    message = assert_one_line_error(census(str(path)), path)
    assert "cubin" in message


def test_not_utf8_text(tmp_path):
    path = tmp_path / "latin1.cu"
    path.write_bytes("// café au lait\n__global__ void k(float* p) { p[0] = 1.0f; }\n".encode("latin-1"))
    assert "UTF-8" in assert_one_line_error(census(str(path)), path)


def test_unknown_arch(tmp_path):
    path = KERNELS / "vec_scale.cu"
    message = assert_one_line_error(census(str(path), "--arch", "sm_75"), path)
    assert "sm_75" in message


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.cu"
    assert_one_line_error(census(str(path)), path)


def test_cuda_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "broken.cu"
    path.write_text('extern "C" __global__ void k(float* p) {\n    p[0] = 1.0f\n    p[1] = 2.0f;\n}\n')
    message = assert_one_line_error(census(str(path), "--arch", "sm_89"), path, 3)
    assert "error" in message.split(f"{path.name}:3:", 1)[1]
