"""`mage-tune compare`: our variant and Triton's kernel in one table, run as a user runs it (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import triton
from conftest import read_ptxas_v

from mage_tune.arch import get_arch

SEED = ["--set", "threads=128", "--set", "rows=1", "--set", "vec=16", "--set", "passes=regs"]
SEED += ["--set", "reduce=shfl", "--set", "rsqrt=approx"]
LN = ["compare", "layernorm", "--d", "768", "--arch", "sm_89", "--against", "triton", "--num-warps", "4"]
GENERIC = ["--no-specialize"]  # Triton's plain offline compile: the assertions below read its scalar loads
OK = "tests/fixtures/data/user_triton_ok.py"
TRITON_39 = tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 9)  # 3.6 has more bar.sync


def mage(*args: str) -> subprocess.CompletedProcess:
    """`compare` tables are read at full width (--wide), one line per property."""
    wide = ["--wide"] if args[:1] == ("compare",) and "--json" not in args and "--help" not in args else []
    return subprocess.run(
        [sys.executable, "-m", "mage_tune", *args, *wide], capture_output=True, text=True, timeout=300
    )


def table(text: str) -> tuple[list[str], dict[str, tuple[bool, list[str]]]]:
    """A `compare` table -> (column headers, {property: (marked different, [value per kernel])})."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("--"))
    spans, start = [], None
    for i, ch in enumerate(lines[rule] + " "):
        if ch == "-" and start is None:
            start = i
        elif ch != "-" and start is not None:
            spans.append(start)
            start = None

    def cells(line: str) -> list[str]:
        bounds = [*spans[1:], None]
        return [line[a:b].strip() for a, b in zip(spans, bounds, strict=True)]

    headers = cells(lines[rule - 1])[2:]
    rows = {}
    for line in lines[rule + 1 :]:
        if not line.strip():
            break
        mark, prop, *values = cells(line)
        rows[prop] = (mark == "≠", values)
    return headers, rows


@pytest.fixture(scope="module")
def seed_run():
    run = mage(*LN, *SEED, *GENERIC)
    assert run.returncode == 0, run.stderr
    return run


def test_triton_is_compiled_as_launched_by_default():
    """By default Triton's kernel is specialized as its JIT launches it at this shape (aligned pointers, d % 16 == 0):
    its loads are 128-bit, as the kernel really run has them; the table says so."""
    run = mage(*LN, *SEED)
    assert run.returncode == 0, run.stderr
    _, rows = table(run.stdout)
    assert rows["PTX global loads"][1][1] == "6×128b"
    assert "(as launched)" in rows["config"][1][1]
    data = json.loads(mage(*LN, *SEED, "--json").stdout)
    assert data["kernels"][1]["specialized"] is True


def test_layernorm_against_triton_table(seed_run):
    headers, rows = table(seed_run.stdout)
    assert headers == ["ours: layernorm", "triton: norm_kernel"]
    ours, triton = 0, 1
    values = {prop: vals for prop, (_, vals) in rows.items()}
    # Triton: one program of 4 warps per row, 24 scalar loads (8 each of x, scale, bias), 8 scalar stores
    assert values["grid × block"][triton] == "4096 × 128"
    assert values["PTX global loads"][triton] == "24×32b" == values["SASS global loads"][triton]
    assert values["PTX global stores"][triton] == "8×32b" == values["SASS global stores"][triton]
    traffic = values["PTX global traffic by parameter"][triton]
    for part in ("x: ld 8 (32b)", "scale: ld 8 (32b)", "bias: ld 8 (32b)", "y: st 8 (32b)"):
        assert part in traffic
    assert values["passes over x"][triton].startswith("1 (8 of 8 floats")
    assert values["PTX barriers"][triton] == values["SASS barriers"][triton] == ("3" if TRITON_39 else "5")
    assert values["config"][triton] == "BLOCK=1024 num_warps=4 (unspecialized)"
    # the seed-shaped variant: one block of 128 threads a row, quad loads, the row read once, rsqrt.approx
    assert values["grid × block"][ours] == "4096 × 128"
    assert values["PTX global loads"][ours] == "6×128b"
    assert "x: ld 2 (128b)" in values["PTX global traffic by parameter"][ours]
    assert values["passes over x"][ours].startswith("1 (8 of 8 floats")
    # one barrier per reduction, and regs mode reduces twice (the mean, then the squared deviations)
    assert values["PTX barriers"][ours] == "2" == values["SASS barriers"][ours]
    assert values["SASS special functions"][ours] == "MUFU.RSQ 1"
    assert values["registers"][ours].endswith("[ptxas -v]") and values["registers"][triton].endswith("[ptxas -v]")
    # the differences are marked, the equalities are not
    assert rows["PTX global loads"][0] and rows["PTX barriers"][0]
    assert not rows["grid × block"][0] and not rows["passes over x"][0] and not rows["arch"][0]
    assert "passes over x:" in seed_run.stdout  # the definition is printed under the table


def test_layernorm_against_triton_json():
    run = mage(*LN, *SEED, *GENERIC, "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["schema"] == "mage-tune.compare/1"
    assert data["family"] == "layernorm" and data["shape"] == {"m": 4096, "d": 768} and data["arch"] == "sm_89"
    ours, triton = data["kernels"]
    assert [ours["role"], triton["role"]] == ["ours", "triton"]
    assert triton["kernel"] == "norm_kernel" and triton["grid"] == [4096, 1, 1] and triton["block"] == 128
    assert triton["specialized"] is False
    tc = triton["census"]
    assert tc["ptx"]["global_loads"] == {"32": 24} and tc["ptx"]["global_stores"] == {"32": 8}
    for name in ("x", "scale", "bias"):
        assert tc["ptx"]["params"][name] == {"loads": 8, "stores": 0, "load_bits": {"32": 8}, "store_bits": {}}
    assert tc["ptx"]["barriers"] == tc["sass"]["barriers"] == (3 if TRITON_39 else 5)
    assert triton["passes"] == {"value": 1.0, "loaded_floats": 8, "share_floats": 8, "loads": 8}
    assert tc["dynamic_shared_bytes"] > 0
    assert ours["config"]["threads"] == 128 and ours["config"]["vec"] == 16 and ours["config"]["passes"] == "regs"
    oc = ours["census"]
    assert oc["ptx"]["params"]["x"]["load_bits"] == {"128": 2} and ours["passes"]["value"] == 1.0
    assert oc["ptx"]["barriers"] == 2
    # the register counts are ptxas's own: read its report of each kernel independently
    for record in (oc, tc):
        assert record["resource_sources"]["registers"] == "ptxas -v"
        assert isinstance(record["registers"], int) and record["registers"] > 0
    from mage_tune.census import census_artifact
    from mage_tune.kernels import get_family

    fam = get_family("layernorm")
    shape = fam.shape_from(d=768, m=None)
    variant = fam.build(fam.parse_settings(SEED[1::2], shape, get_arch("sm_89")), shape, get_arch("sm_89"))
    (report,) = read_ptxas_v(variant.artifact.ptxas_log).values()
    assert oc["registers"] == report["registers"]
    assert census_artifact(variant.artifact)[0].resources.registers == oc["registers"]


def test_python_api_gives_what_the_cli_prints():
    """`mage_tune.compare(...)`: a typed result, callable again, equal to the command's JSON and table."""
    import mage_tune
    from mage_tune.census.model import Census

    settings = SEED[1::2]
    first = mage_tune.compare("layernorm", {"d": 768}, arch="sm_89", settings=settings, num_warps=4, specialize=False)
    again = mage_tune.compare("layernorm", {"d": 768}, arch="sm_89", settings=settings, num_warps=4, specialize=False)
    assert [k.role for k in first.kernels] == ["ours", "triton"] and isinstance(first.kernels[1].census, Census)
    assert first.to_json() == again.to_json()
    cli = json.loads(mage(*LN, *SEED, *GENERIC, "--json").stdout)
    assert first.to_json() == cli
    assert sum(first.kernels[1].census.ptx.global_loads.values()) == 24
    text = first.table()
    assert "triton: norm_kernel" in text and "ours: layernorm" in text and "≠" in text


def test_default_variant_and_best_run(tmp_path):
    from mage_tune.kernels import get_family

    fam = get_family("layernorm")
    shape = fam.shape_from(d=768, m=None)
    run = mage(*LN, "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["kernels"][0]["config"] == fam.default_config(shape, get_arch("sm_89"))

    config = {"threads": 256, "rows": 1, "vec": 8, "passes": "welford", "reduce": "smem", "rsqrt": "precise"}
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "best.json").write_text(json.dumps({"config": config, "value": 9.0}))
    run = mage(*LN, "--best", str(tmp_path), "--json")
    assert run.returncode == 0, run.stderr
    chosen = json.loads(run.stdout)["kernels"][0]
    assert {k: chosen["config"][k] for k in config} == config
    assert chosen["passes"]["value"] == 2.0  # welford reads x twice
    assert chosen["grid"] == [4096, 1, 1] and chosen["block"] == 256


def test_matmul_against_triton_json():
    run = mage("compare", "matmul", "--arch", "sm_89", "--config", "7", "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["shape"] == {"m": 1024, "n": 1024, "k": 1024}
    ours, triton = data["kernels"]
    assert triton["kernel"] == "matmul_kernel"
    assert triton["config"] == {
        "BLOCK_M": 32,
        "BLOCK_N": 64,
        "BLOCK_K": 16,
        "GROUP_M": 8,
        # as launched: the JIT makes integer arguments equal to 1 constants
        "stride_ak": 1,
        "stride_bn": 1,
        "stride_cn": 1,
        "num_warps": 2,
        "num_stages": 5,
    }
    assert triton["grid"] == [32 * 16, 1, 1] and triton["block"] == 64
    assert triton["census"]["sass"]["matrix"] == {} and triton["census"]["ptx"]["params"]["C"]["stores"] > 0
    assert ours["kernel"] == "matmul" and ours["census"]["ptx"]["params"]["A"]["loads"] > 0
    assert "passes" not in triton


def _one_line_error(run: subprocess.CompletedProcess, file: str) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"mage-tune: error: {file}")
    return lines[0]


def test_user_kernel_errors_are_one_line(tmp_path):
    bad = tmp_path / "user_triton_bad_syntax.py"
    bad.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr N):\n    pass\n")
    base = ["compare", "layernorm", "--d", "768", "--arch", "sm_89"]
    line = _one_line_error(mage(*base, "--against", f"{bad}:k", "--signature", "x_ptr:*fp32,N:i32"), str(bad))
    assert f"{bad}:6:" in line and "syntax" in line
    sig = "x_ptr:*fp32,y_ptr:*fp32,N:i32,factor:fp32"
    line = _one_line_error(mage(*base, "--against", f"{OK}:nope", "--signature", sig), OK)
    assert "'nope'" in line
    line = _one_line_error(
        mage(*base, "--against", f"{OK}:scale_kernel", "--signature", sig.replace("x_ptr", "x"), "--constexpr", "B=1"),
        OK,
    )
    assert "is not an argument" in line or "are not arguments" in line
    bad_type = sig.replace("i32", "int")
    line = _one_line_error(
        mage(*base, "--against", f"{OK}:scale_kernel", "--signature", bad_type, "--constexpr", "BLOCK=8"), OK
    )
    assert "'int'" in line and "not a Triton type" in line


def test_user_kernel_compare(tmp_path):
    run = mage(
        "compare", "layernorm", "--d", "768", "--arch", "sm_89", "--against", f"{OK}:scale_kernel",
        "--signature", "x_ptr:*fp32,y_ptr:*fp32,N:i32,factor:fp32", "--constexpr", "BLOCK=1024",
        "--num-warps", "4", "--grid", "3072",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    headers, rows = table(run.stdout)
    assert headers == ["ours: layernorm", "user: scale_kernel"]
    assert rows["grid × block"][1][1] == "3072 × 128"
    assert rows["PTX global loads"][1][1] == "8×32b"
    assert "x_ptr: ld 8 (32b)" in rows["PTX global traffic by parameter"][1][1]


def test_argument_errors():
    run = mage(*LN, "--set", "threads=128", "--best", "somewhere")
    assert run.returncode == 2 and "either --set" in run.stderr
    run = mage(*LN, "--best", "/nonexistent-run")
    assert run.returncode == 2 and "best.json" in run.stderr and "Traceback" not in run.stderr
    run = mage(*LN, "--signature", "x:*fp32")
    assert run.returncode == 2 and "--against path.py:kernel" in run.stderr
    run = mage("compare", "--help")
    assert run.returncode == 0 and "best.json" in run.stdout and "--against" in run.stdout
