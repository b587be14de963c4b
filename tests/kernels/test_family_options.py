"""How a CUDA family is compiled: a knob that chooses a compiler option, the family's include folders, defines and
compiler options from the command line (through every process a search builds in), a header found nowhere, and
options that are not allowed. The fixture families are tests/fixtures/data/options/family.py:NAME; what each test
asserts is read from the compiled PTX and SASS (grepped here), not from earlier census output."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.compile import CompileError, SourceOptions, build_from_cu
from mage_tune.errors import InputError
from mage_tune.kernels import load_family

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = ROOT / "tests" / "fixtures" / "data" / "options" / "family.py"
ARCH = get_arch("sm_90")


def family(name: str):
    return load_family(f"{OPTIONS}:{name}")


def mage(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mage_tune", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd)


def one_line_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr and not run.stdout
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("mage-tune: error: ")
    return line


def build(fam, settings=(), source: SourceOptions | None = None):
    fam = fam.with_source_options(source)
    shape = fam.shape_from({})
    return fam.build(fam.parse_settings(list(settings), shape, ARCH), shape, ARCH)


def global_loads_in_ptx(ptx: str) -> int:
    return len(re.findall(r"^\s*(?:@%p\d+\s+)?ld\.global\b", ptx, re.M))


# --- a knob chooses an option ------------------------------------------------------------------------------------


def test_fast_math_knob_compiles_sinf_to_the_hardware_approximation():
    precise, fast = (build(family("SINE"), [f"fast_math={v}"]) for v in (0, 1))
    assert "--use_fast_math" not in family("SINE").source_options({"fast_math": 0}, {"n": 1}).options
    assert "--use_fast_math" in family("SINE").source_options({"fast_math": 1}, {"n": 1}).options
    # PTX: sin.approx.f32 only with fast math; SASS: one MUFU.SIN, against the precise sequence's range reduction
    assert "sin.approx" in fast.artifact.ptx and "sin.approx" not in precise.artifact.ptx
    assert fast.artifact.sass.count("MUFU.SIN") == 1 and "MUFU.SIN" not in precise.artifact.sass
    c_precise, c_fast = census_variant(precise), census_variant(fast)
    assert c_fast.sass.special == {"MUFU.SIN": 1} and "MUFU.SIN" not in c_precise.sass.special
    assert c_fast.ptx.special == {"sin.approx": 1} and not c_precise.ptx.special
    assert c_fast.sass.instructions * 2 < c_precise.sass.instructions  # the precise sinf is several times longer


def test_fast_math_on_the_command_line():
    rows = {}
    for value in (0, 1):
        run = mage("census", f"{OPTIONS}:SINE", "--set", f"fast_math={value}", "--json")
        assert run.returncode == 0, run.stderr
        rows[value] = json.loads(run.stdout)
    assert rows[1]["sass"]["special"] == {"MUFU.SIN": 1} and "MUFU.SIN" not in rows[0]["sass"]["special"]
    # the same option given on the command line instead of by the knob
    run = mage("census", f"{OPTIONS}:SINE", "--set", "fast_math=0", "--compiler-option", "--use_fast_math", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["sass"]["special"] == {"MUFU.SIN": 1}


# --- include folders and defines ---------------------------------------------------------------------------------


def test_include_dirs_find_the_templates_header():
    """terms.cuh, in the family's include/ folder, sets TERMS 3: three loads a thread, where the template alone
    has one."""
    included, plain = build(family("INCLUDED_TERMS")), build(family("SUM_TERMS"))
    assert global_loads_in_ptx(included.artifact.ptx) == 3 and global_loads_in_ptx(plain.artifact.ptx) == 1
    assert len(re.findall(r"\bLDG\.", included.artifact.sass)) == 3
    assert sum(census_variant(included).ptx.global_loads.values()) == 3


def test_define_from_the_command_line_reaches_the_template():
    variant = build(family("SUM_TERMS"), source=SourceOptions(defines=("TERMS=4",)))
    assert global_loads_in_ptx(variant.artifact.ptx) == 4
    assert len(re.findall(r"\bLDG\.", variant.artifact.sass)) == 4
    run = mage("census", f"{OPTIONS}:SUM_TERMS", "-D", "TERMS=4", "--json")
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    assert sum(record["ptx"]["global_loads"].values()) == sum(record["sass"]["global_loads"].values()) == 4


def test_with_source_options_leaves_the_found_family_alone():
    """A found family reduces to its origin when copied or pickled: the copy with options is another object, and
    the cached one builds as it declares."""
    found = family("SUM_TERMS")
    extra = SourceOptions(defines=("TERMS=2",))
    copied = found.with_source_options(extra)
    assert copied is not found and found.extra_source_options is None and copied.extra_source_options == extra
    assert family("SUM_TERMS").extra_source_options is None


def test_a_pickled_family_keeps_its_command_line_options():
    """What a compile process or a GPU worker receives: the family found again by its origin, with the options."""
    extra = SourceOptions(includes=(str(ROOT / "tests"),), defines=("TERMS=2",), options=("-lineinfo",))
    sent = pickle.loads(pickle.dumps(family("SUM_TERMS").with_source_options(extra)))
    assert sent.extra_source_options == extra and sent.origin == family("SUM_TERMS").origin
    assert global_loads_in_ptx(build(sent).artifact.ptx) == 2
    assert pickle.loads(pickle.dumps(family("SUM_TERMS"))) is family("SUM_TERMS")


def test_a_static_search_builds_every_trial_with_the_command_lines_define(tmp_path):
    """The trials are compiled in other processes: each must see -D TERMS=4; run.json and search.json keep it,
    and the run directory refuses a resumed search with other options."""
    fam = f"{OPTIONS}:SUM_TERMS"
    run = mage("search", fam, "--static", "--trials", "1", "--run-dir", "run", "--db", "off", "-D", "TERMS=4",
               "--workers", "1", "--json", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    (trial,) = [json.loads(line) for line in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    assert trial["census"]["global_loads"] == 4
    recorded = {"includes": [], "defines": ["TERMS=4"], "options": [], "std": None, "compiler": "auto"}
    assert json.loads((tmp_path / "run" / "run.json").read_text())["source_options"] == recorded
    assert json.loads((tmp_path / "run" / "search.json").read_text())["source_options"] == recorded
    again = mage("search", fam, "--static", "--trials", "1", "--run-dir", "run", "--db", "off", cwd=tmp_path)
    assert "differs in source_options" in one_line_error(again)


def test_render_names_the_options_of_the_config():
    run = mage("render", f"{OPTIONS}:SINE", "--set", "fast_math=1", "-D", "TERMS=2", "-I", str(ROOT / "tests"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1] == f"// compiled with: --use_fast_math -DTERMS=2 -I{ROOT / 'tests'}"
    plain = mage("render", f"{OPTIONS}:SINE")
    assert "compiled with" not in plain.stdout


# --- what is refused ---------------------------------------------------------------------------------------------


def test_a_compile_option_not_allowed_is_named_with_its_family():
    with pytest.raises(InputError) as info:
        family("BOGUS_OPTION")
    assert "'--bogus' is not allowed" in info.value.message and "bogus_option" in info.value.message
    assert "compile_options" in info.value.message
    message = one_line_error(mage("census", f"{OPTIONS}:BOGUS_OPTION"))
    assert "'--bogus' is not allowed" in message and "family.py" in message
    # one made by hand, never through the registry, is refused when it builds
    module = sys.modules[type(family("SINE")).__module__]
    with pytest.raises(InputError, match="'--bogus' is not allowed"):
        build(module.BogusOption())


@pytest.mark.parametrize("command", ["census", "render", "search"])
def test_a_compiler_option_not_allowed_on_the_command_line(command):
    extra = ["--static", "--db", "off"] if command == "search" else []
    message = one_line_error(mage(command, f"{OPTIONS}:SINE", "--compiler-option", "-Xptxas=-O0", *extra))
    assert "'-Xptxas=-O0' is not allowed" in message and "--use_fast_math" in message


def test_a_missing_include_folder_is_said_once(tmp_path):
    message = one_line_error(mage("search", f"{OPTIONS}:SINE", "--static", "-I", str(tmp_path / "nowhere")))
    assert "nowhere: no such folder" in message


def test_a_triton_family_refuses_compile_options():
    pytest.importorskip("triton")
    triton_family = str(ROOT / "examples" / "rmsnorm" / "triton_family.py")
    message = one_line_error(mage("census", triton_family, "-D", "X=1", "--compiler-option", "-ftz=true"))
    assert "-D, --compiler-option" in message and "Triton family" in message
    message = one_line_error(mage("render", triton_family, "-I", str(ROOT)))
    assert "-I" in message and "Triton compiles its kernel itself" in message


# --- a header found nowhere --------------------------------------------------------------------------------------


def test_a_missing_header_in_a_familys_template_names_the_fix():
    with pytest.raises(CompileError) as info:
        build(family("MISSING_HEADER"))
    message = str(info.value)
    assert "'nowhere_to_be_found.cuh' not found" in message
    assert "add the folder that holds it to the family's include_dirs, or pass -I DIR" in message
    assert "CUDA_HOME" not in message
    line = one_line_error(mage("census", f"{OPTIONS}:MISSING_HEADER"))
    assert "family's include_dirs, or pass -I DIR" in line and "CUDA_HOME" not in line


def test_a_missing_header_is_found_with_dash_i(tmp_path):
    (tmp_path / "nowhere_to_be_found.cuh").write_text("#define TERMS 2\n")
    run = mage("census", f"{OPTIONS}:MISSING_HEADER", "-I", str(tmp_path), "--json")
    assert run.returncode == 0, run.stderr
    assert sum(json.loads(run.stdout)["ptx"]["global_loads"].values()) == 2


def test_header_advice_never_sends_a_user_header_to_cuda_home(tmp_path, monkeypatch):
    """Where no CUDA headers are found here, a CUDA header's fix is installing them; a user's header's is -I."""
    from mage_tune import compile as compiler
    from mage_tune import toolchain

    path = tmp_path / "k.cu"
    path.write_text('#include "mine.cuh"\nextern "C" __global__ void k(float* p) { p[0] = 1.f; }\n')
    monkeypatch.setattr(toolchain, "cuda_include_dirs", lambda: ())
    log = f'{path}(1): catastrophic error: cannot open source file "mine.cuh"'
    mine = compiler._header_error(log, str(path), ())
    assert "'mine.cuh' not found" in mine.message and mine.message.endswith("add the folder that holds it with -I DIR")
    assert "CUDA_HOME" not in mine.message and mine.file == str(path) and mine.line == 1
    cuda = compiler._header_error(log.replace("mine.cuh", "cuda_fp16.h"), str(path), ())
    assert "no CUDA headers found here" in cuda.message and "CUDA_HOME" in cuda.message
    in_family = compiler._header_error(log.replace(str(path), "fam[a=1]"), "fam[a=1]", ())
    assert in_family.message.endswith("add the folder that holds it to the family's include_dirs, or pass -I DIR")


def test_a_cuda_header_a_plain_family_build_did_not_search():
    from mage_tune import toolchain

    cuda = toolchain.cuda_include_dirs()
    if not cuda:
        pytest.skip("no CUDA headers on this machine")
    log = 'fam[a=1](1): catastrophic error: cannot open source file "cuda_fp16.h"'
    from mage_tune import compile as compiler

    message = compiler._header_error(log, "fam[a=1]", ()).message
    assert f"pass -I {cuda[0]}, or add that folder to the family's include_dirs" in message


# --- a register limit ----------------------------------------------------------------------------------------------

NO_BOUNDS = """extern "C" __global__ void live(const float* __restrict__ in, float* out, int n) {
    float acc[40];
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int j = 0; j < 40; ++j) acc[j] = in[t + j * n];
    for (int k = 0; k < n; ++k) {
#pragma unroll
        for (int j = 0; j < 40; ++j) acc[j] = acc[j] * acc[(j + 3) % 40] + 1.f;
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 40; ++j) s += acc[j];
    out[t] = s;
}
"""


def test_a_register_limit_reaches_ptxas():
    """NVRTC writes no trace of -maxrregcount in its PTX: ptxas is given it (a kernel without launch bounds, which
    would override it)."""
    free = build_from_cu(NO_BOUNDS, ARCH, "live[free]", source_options=SourceOptions(compiler="nvrtc"))
    limited = build_from_cu(
        NO_BOUNDS, ARCH, "live[32]", source_options=SourceOptions(compiler="nvrtc", options=("-maxrregcount=32",))
    )
    used = {name: int(re.search(r"Used (\d+) registers", a.ptxas_log).group(1)) for name, a in
            (("free", free), ("limited", limited))}  # fmt: skip
    assert used["free"] > 32 >= used["limited"]
    assert "maxrregcount" in limited.ptxas_log  # ptxas says it overrode its limit
