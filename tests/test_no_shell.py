"""No shell, ever: a user's file name, folders, macros and options never reach a shell as commands.

nvcc runs its steps through /bin/sh, so each injection below would run `touch` if any of it reached nvcc verbatim;
every test runs the real CLI (or the Python API) on a real kernel and checks that no file appeared. The payloads
write to $MAGE_PWNED (an absolute path set in the environment), since nvcc's steps run in a temporary folder and a
file name cannot hold a `/`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import KERNELS, count, nvidia_view, nvrtc_compile, ptx_functions, sass_functions

import mage_tune
from mage_tune import toolchain
from mage_tune.arch import get_arch
from mage_tune.census import SourceOptions, census_path, load
from mage_tune.compile import build_from_cu, nvcc_ptx
from mage_tune.errors import CompileError, InputError

HEADERS = KERNELS / "headers"
needs_nvcc = pytest.mark.skipif(toolchain.nvcc() is None, reason="nvcc not found")


@pytest.fixture
def pwned(tmp_path, monkeypatch) -> Path:
    """Where a payload would write: $MAGE_PWNED, in this test's folder (subprocesses and nvcc inherit it)."""
    target = tmp_path / "PWNED"
    monkeypatch.setenv("MAGE_PWNED", str(target))
    return target


def census(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mage_tune", "census", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd, env=os.environ.copy())


def one_line_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr and not run.stdout
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("mage-tune: error: ")
    return line


def notes_of(run: subprocess.CompletedProcess) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.startswith("mage-tune: note: ")]


# --- the user's file and folders -----------------------------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize("compiler", ["auto", "nvcc"])
def test_file_name_with_command_substitution_runs_nothing(tmp_path, pwned, compiler):
    """coop_softmax.cu uses INFINITY, which NVRTC lacks: auto falls back to nvcc, which gets the file as kernel.cu."""
    path = tmp_path / "x$(touch $MAGE_PWNED)`touch $MAGE_PWNED`.cu"
    shutil.copy(HEADERS / "coop_softmax.cu", path)
    run = census(str(path), "--arch", "sm_89", "--compiler", compiler, "--json", cwd=tmp_path)
    assert not pwned.exists(), "the file name ran as a command"
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    assert record["demangled"] == "row_softmax" and "nvcc" in record["tools"]
    art = load(path, "sm_89", source_options=SourceOptions(compiler="nvcc"))
    assert record["registers"] == nvidia_view(art.ptx, "sm_89", "softmax")["ptxas"][record["kernel"]]["registers"]
    assert not pwned.exists()


@needs_nvcc
def test_source_and_include_folders_with_metacharacters_run_nothing(tmp_path, pwned):
    """The source's own folder and a -I folder reach nvcc only as links inc0, inc1, ...; the header still counts."""
    source_dir = tmp_path / "src$(touch $MAGE_PWNED)"
    include_dir = tmp_path / "inc;touch $MAGE_PWNED;`touch $MAGE_PWNED`, x"
    source_dir.mkdir()
    include_dir.mkdir()
    shutil.copy(HEADERS / "scaled_copy.cu", source_dir)
    shutil.copy(HEADERS / "include" / "scale_helpers.h", include_dir)
    path = source_dir / "scaled_copy.cu"
    for compiler in ("nvcc", "auto"):
        run = census(str(path), "--arch", "sm_89", "--compiler", compiler, "-I", str(include_dir), "-D", "UNROLL=4")
        assert not pwned.exists(), "a folder name ran as a command"
        assert run.returncode == 0, run.stderr
    opts = SourceOptions(includes=(str(include_dir),), defines=("UNROLL=4",), compiler="nvcc")
    art = load(path, "sm_89", source_options=opts)
    (c,) = census_path(path, arch="sm_89", source_options=opts)
    assert sum(c.sass.global_loads.values()) == count(sass_functions(art.sass)["scaled_copy"], r"\bLDG\b") == 4
    assert not pwned.exists()


@needs_nvcc
@pytest.mark.parametrize("name", ["-v.cu", "--foo.cu", "-o.cu"])
def test_option_looking_file_name_is_a_file(tmp_path, name):
    """nvcc once got the file's own name, so `-v.cu` read as an option; now every file is kernel.cu to nvcc."""
    path = tmp_path / name
    shutil.copy(HEADERS / "coop_softmax.cu", path)  # NVRTC rejects it: auto runs nvcc too
    for compiler in ("nvcc", "auto"):
        run = census("--arch", "sm_89", "--compiler", compiler, "--json", "--", name, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        record = json.loads(run.stdout)
        assert record["demangled"] == "row_softmax" and record["source"] == name


@needs_nvcc
def test_nvcc_errors_name_the_users_file_and_folder(tmp_path):
    """The fixed names nvcc saw (kernel.cu, incN) are put back: the error names the header in the user's folder."""
    folder = tmp_path / "my headers, v2"
    folder.mkdir()
    (folder / "bad.h").write_text("__device__ int broken() { return undefined_thing; }\n")
    path = tmp_path / "uses_bad.cu"
    path.write_text('#include "bad.h"\nextern "C" __global__ void k(int* p) { p[0] = broken(); }\n')
    message = one_line_error(census(str(path), "--arch", "sm_89", "--compiler", "nvcc", "-I", str(folder)))
    assert message.startswith(f"mage-tune: error: {folder / 'bad.h'}:1: ") and "undefined_thing" in message
    assert "inc0" not in message and "kernel.cu" not in message and "/tmp/mage-" not in message


def test_missing_include_folder(tmp_path):
    path = tmp_path / "k.cu"
    shutil.copy(KERNELS / "vec_scale.cu", path)
    message = one_line_error(census(str(path), "-I", str(tmp_path / "nowhere")))
    assert "nowhere: no such folder" in message and "k.cu" in message


# --- defines, --std, --compiler ------------------------------------------------------------------------------------

INJECTIONS = ["SCALE=$(touch $MAGE_PWNED)", "SCALE=2.0f;`touch $MAGE_PWNED`", "SCALE=2.0f && touch $MAGE_PWNED"]


@needs_nvcc
@pytest.mark.parametrize("define", INJECTIONS)
@pytest.mark.parametrize("compiler", ["auto", "nvcc"])
def test_define_injection_refused(tmp_path, pwned, define, compiler):
    path = tmp_path / "softmax.cu"  # NVRTC rejects it, so auto would have run nvcc with the define
    shutil.copy(HEADERS / "coop_softmax.cu", path)
    run = census(str(path), "--arch", "sm_89", "--compiler", compiler, "-D", define)
    assert not pwned.exists(), "the define ran as a command"
    message = one_line_error(run)
    assert f"-D {define!r}" in message and "not allowed in a macro value" in message
    bad = next(c for c in define.partition("=")[2] if c in "$`;&")
    assert f"character {bad!r}" in message
    with pytest.raises(InputError):
        mage_tune.census(path, arch="sm_89", source_options=SourceOptions(defines=(define,), compiler=compiler))
    assert not pwned.exists()


@pytest.mark.parametrize(
    "define, why",
    [
        ("F(x)=x", "function-like macros"),
        ("2X=1", "C identifier"),
        ("-X", "C identifier"),
        ("X=a,b", "','"),
        ("X=a=b", "'='"),
        ('X="s"', "'\"'"),
        ("X='s'", '"\'"'),
        ("X=a\\b", "'\\\\'"),
        ("X=#a", "'#'"),
        ("X=a\nb", "'\\n'"),
        ("X={1}", "'{'"),
        ("X=a|b", "'|'"),
        ("X=a>b", "'>'"),
        ("X=!a", "'!'"),
    ],
)
def test_bad_defines_refused_by_source_options(define, why):
    with pytest.raises(InputError) as info:
        SourceOptions(defines=(define,))
    assert repr(define) in str(info.value) and why in str(info.value)


@pytest.mark.parametrize("compiler", ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)])
def test_allowed_define_values_mean_the_same_to_both_compilers(tmp_path, compiler):
    """Space, parentheses and operators pass; nvcc and NVRTC give the same constant (2 * 3 + 0.5 = 6.5f)."""
    path = tmp_path / "scale.cu"
    path.write_text('extern "C" __global__ void scale(float* p) { p[threadIdx.x] *= SCALE; }\n')
    opts = SourceOptions(defines=("SCALE=(2.0f * 3 + HALF)", "HALF=0.5f", "UNUSED"), compiler=compiler)
    art = load(path, "sm_89", source_options=opts)
    assert compiler in art.tools
    assert count(ptx_functions(art.ptx)["scale"], r"\bmul\.f32\b.*0f40D00000") == 1  # 6.5f


def test_std_and_compiler_checked():
    assert SourceOptions(std="20").flags()[0] == "-std=c++20"
    assert SourceOptions(std="c++17").flags()[0] == "-std=c++17"
    for std in ("gnu++17", "c++1z", "17 -o x", "c++17;x"):
        with pytest.raises(InputError, match="--std"):
            SourceOptions(std=std)
    with pytest.raises(InputError, match="unknown compiler 'clang'"):
        SourceOptions(compiler="clang")
    run = census(str(KERNELS / "vec_scale.cu"), "--std", "c++17$(id)")
    assert "--std 'c++17$(id)'" in one_line_error(run)


@needs_nvcc
def test_nvcc_ptx_refuses_unsafe_options(pwned):
    """The last guard: whatever calls nvcc_ptx, an option the shell would read is refused before nvcc runs."""
    source = (KERNELS / "vec_scale.cu").read_text()
    with pytest.raises(InputError, match="not safe to give nvcc"):
        nvcc_ptx(source, get_arch("sm_89"), "vec_scale.cu", ("-DX=`touch $MAGE_PWNED`",))
    assert not pwned.exists()
    assert ".entry vec_scale" in nvcc_ptx(source, get_arch("sm_89"), "vec_scale.cu", ("-DX=(1 + 2)",))


# --- the fallback said aloud ---------------------------------------------------------------------------------------


@needs_nvcc
def test_fallback_to_nvcc_is_said_and_recorded(tmp_path, capsys):
    path = tmp_path / "softmax.cu"
    shutil.copy(HEADERS / "coop_softmax.cu", path)
    version = toolchain.nvcc().version
    expected = f'{path}: NVRTC rejected it (line 14: identifier "INFINITY" is undefined); compiled with nvcc {version}'
    for _ in range(2):  # compiled, then from the cache: said both times
        table = census(str(path), "--arch", "sm_89", "--wide")
        assert table.returncode == 0, table.stderr
        assert table.stderr == f"mage-tune: note: {expected}\n"
        assert re.search(rf"^\s*note\s+{re.escape(expected)}$", table.stdout, re.M), table.stdout
        run = census(str(path), "--arch", "sm_89", "--json")  # the record says it, and stderr for the person
        assert run.returncode == 0 and run.stderr == f"mage-tune: note: {expected}\n"
        assert json.loads(run.stdout)["notes"] == [expected] and "nvcc" in json.loads(run.stdout)["tools"]
    # the Python API: the census's notes; a copy under another name (same cache entry) names itself
    other = tmp_path / "copy.cu"
    shutil.copy(path, other)
    (c,) = mage_tune.census(other, arch="sm_89")
    assert c.notes == (expected.replace(str(path), str(other)),)
    assert capsys.readouterr().err == ""  # the library prints nothing; the CLI says it
    # NVRTC alone still fails, and nvcc alone is not a fallback: no note
    with pytest.raises(CompileError):
        census_path(path, arch="sm_89", source_options=SourceOptions(compiler="nvrtc"))
    assert census_path(path, arch="sm_89", source_options=SourceOptions(compiler="nvcc"))[0].notes == ()


def test_no_note_when_nvrtc_compiles(tmp_path):
    run = census(str(KERNELS / "vec_scale.cu"), "--arch", "sm_89")
    assert run.returncode == 0 and not run.stderr and " note " not in run.stdout
    assert build_from_cu((KERNELS / "vec_scale.cu").read_text(), get_arch("sm_89"), "v.cu").notes == ()


@needs_nvcc
def test_host_header_source_falls_back_to_nvcc(tmp_path):
    """NVRTC has no <cstdio>: its missing-header error sends the file to nvcc, which has it (printf from a kernel)."""
    path = tmp_path / "hello.cu"
    path.write_text('#include <cstdio>\nextern "C" __global__ void hello(float* p) { printf("%f\\n", p[0]); }\n')
    run = census(str(path), "--arch", "sm_89")
    assert run.returncode == 0, run.stderr
    (note,) = notes_of(run)
    assert f"{path}: NVRTC rejected it (line 1: header 'cstdio' not found); compiled with nvcc" in note
    ptx = load(path, "sm_89").ptx
    assert count(ptx_functions(ptx)["hello"], r"\bvprintf\b") == 1


@needs_nvcc
def test_both_compilers_errors_shown(tmp_path):
    path = tmp_path / "broken.cu"
    path.write_text('extern "C" __global__ void k(float* p) {\n    p[0] = 1.0f\n    p[1] = 2.0f;\n}\n')
    message = one_line_error(census(str(path), "--arch", "sm_89"))  # the same error: said once, with one log
    assert message.startswith(f'mage-tune: error: {path}:3: expected a ";" (NVRTC and nvcc agree; NVRTC log: {path}(3)')
    assert message.count('error: expected a ";"') == 1 and "nvcc log" not in message
    assert "kernel.cu" not in message and "/tmp/mage-" not in message
    path.write_text("#include <cstdio>\n" + path.read_text())  # NVRTC stops at the header, nvcc at line 4
    message = one_line_error(census(str(path), "--arch", "sm_89"))
    assert message.startswith(f"mage-tune: error: {path}:1: NVRTC: header 'cstdio' not found")
    assert f'; nvcc: {path}:4: expected a ";" (nvcc log: {path}(4): error' in message


@needs_nvcc
def test_same_missing_header_said_once(tmp_path):
    path = tmp_path / "scaled_copy.cu"
    shutil.copy(HEADERS / "scaled_copy.cu", path)
    message = one_line_error(census(str(path), "--arch", "sm_89"))
    assert message.count("'scale_helpers.h' not found") == 1 and f"{path}:2: " in message and "-I DIR" in message


# --- --ptxas-options -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("options", ["-O3 '", '-O3 "--maxrregcount=32', "-O3 \\"])
def test_unmatched_quote_in_ptxas_options(tmp_path, options):
    path = tmp_path / "vec_scale.ptx"
    path.write_text(nvrtc_compile((KERNELS / "vec_scale.cu").read_text(), "sm_89", "vec_scale.cu"))
    message = one_line_error(census(str(path), "--ptxas-options", options))
    assert message.startswith(f"mage-tune: error: --ptxas-options {options!r}: ")
    run = census(str(path), "--ptxas-options", "-O3 '--maxrregcount=32'", "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["tools"]["ptxas options"].startswith("-O3 --maxrregcount=32")
