"""Triton's reference kernels compiled offline (no GPU) for every supported arch, and a user's own Triton kernel.

Every count asserted here is read twice: from the census, and by a plain grep of Triton's PTX / `cuobjdump -sass`
of Triton's cubin / `cuobjdump -res-usage` (conftest's helpers), so the census is checked against the tools.
"""

from __future__ import annotations

import re

import pytest
import triton
from conftest import count, ptx_functions, read_res_usage, run_tool, sass_functions, tool

from mage_tune.arch import get_arch
from mage_tune.census import census_artifact
from mage_tune.errors import ConfigError, InputError
from mage_tune.kernels import load_family
from mage_tune.triton_kernels import MATMUL_CONFIGS, MATMUL_KEYS
from mage_tune.triton_ref import compile_user, next_power_of_2

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")
LN_SHAPE = {"m": 4096, "d": 768}
MM_SHAPE = {"m": 1024, "n": 1024, "k": 1024}
SMALL_MM = len(MATMUL_CONFIGS) - 1  # (32, 64, 16, 8, 2, 5): the quickest to compile
DATA = "tests/fixtures/data"


def compile_reference(family, shape, arch, num_warps, config, specialize=False):
    """A family's Triton reference kernels, compiled as the plain offline compile unless `specialize`."""
    fam = load_family(family)
    return fam.reference_kernels(shape, get_arch(arch), specialize=specialize, num_warps=num_warps, config=config)


def matmul_config(index: int) -> dict:
    return load_family("matmul").reference_configs()[index]


# The counts quoted here were read off Triton 3.9; the GPU machine's 3.6 synchronises its reductions more.
TRITON_39 = tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 9)


def _res_usage(art) -> dict[str, int]:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(art.cubin)
        (usage,) = read_res_usage(run_tool(tool("cuobjdump"), "-res-usage", str(path))).values()
    return usage


@pytest.fixture(scope="module")
def norm():
    """arch -> (TritonKernel, Census) of the layer norm at d=768, 4 warps."""
    done = {}

    def get(arch):
        if arch not in done:
            (k,) = compile_reference("layernorm", LN_SHAPE, arch, 4, None)
            (c,) = census_artifact(k.artifact, kernel=k.name, block=k.block, param_names=list(k.param_names))
            done[arch] = (k, c)
        return done[arch]

    return get


@pytest.mark.parametrize("arch", ARCHS)
def test_norm_kernel_compiles_offline_and_censuses(norm, arch):
    k, c = norm(arch)
    assert k.name == "norm_kernel"
    assert k.grid == (4096, 1, 1) and k.block == 128 and k.num_warps == 4
    assert k.config == {"BLOCK": 1024, "num_warps": 4}
    assert not k.specialized
    # jit argument names on the first PTX parameters; what Triton appends is labelled scratch
    assert k.param_names[:7] == ("x", "y", "scale", "bias", "stride", "N", "eps")
    assert all(name.startswith("scratch_") for name in k.param_names[7:])
    (ptx_lines,) = ptx_functions(k.artifact.ptx).values()
    n_params = len(re.findall(r"\.param\s", "\n".join(ptx_lines)))
    assert len(k.param_names) == n_params
    # Triton's metadata: the launcher's shared memory, the name
    assert k.artifact.dynamic_shared == c.resources.dynamic_shared_bytes > 0
    assert c.kernel == "norm_kernel" and c.arch == arch

    # 1024 columns over 128 threads: 8 scalar accesses a thread of x, scale and bias each, and of y
    assert count(ptx_lines, r"ld\.global\.b32") == 24 == c.ptx.global_loads.get(32)
    assert count(ptx_lines, r"st\.global\.b32") == 8 == c.ptx.global_stores.get(32)
    for name in ("x", "scale", "bias"):
        assert c.ptx.params[name].loads == 8 and c.ptx.params[name].load_bits == {32: 8}
    assert c.ptx.params["y"].stores == 8 and c.ptx.params["y"].loads == 0
    assert count(ptx_lines, r"\bbar\.sync\b") == c.ptx.barriers == (3 if TRITON_39 else c.ptx.barriers) >= 3
    (sass_lines,) = sass_functions(k.artifact.sass).values()
    assert count(sass_lines, r"\bLDG\.E\b(?!\.)") == 24 == c.sass.global_loads.get(32)
    assert count(sass_lines, r"\bBAR\.SYNC") == c.sass.barriers == (3 if TRITON_39 else c.sass.barriers) >= 3
    assert c.sass.special.get("MUFU.SQRT") == 1  # 1 / tl.sqrt: a square root and a reciprocal, no MUFU.RSQ
    assert "MUFU.RSQ" not in c.sass.special

    # resources: ptxas -v (Triton's ptxas on Triton's PTX) agrees with -res-usage of Triton's own cubin
    assert c.resources.sources["registers"] == "ptxas -v"
    assert c.resources.registers == _res_usage(k.artifact)["REG"]
    assert c.resources.spill_store_bytes == 0
    assert c.occupancy is not None and c.occupancy.block == 128
    assert k.artifact.tools["triton"]


@pytest.mark.parametrize("arch", ARCHS)
def test_matmul_compiles_for_every_arch_as_fp32_fma(arch):
    cfg = matmul_config(SMALL_MM)
    (k,) = compile_reference("matmul", MM_SHAPE, arch, None, cfg)
    (c,) = census_artifact(k.artifact, kernel=k.name, block=k.block, param_names=list(k.param_names))
    assert k.name == "matmul_kernel"
    assert k.grid == (1024 // 32 * (1024 // 64), 1, 1) and k.block == 32 * cfg["num_warps"]
    assert k.param_names[:3] == ("A", "B", "C")
    assert k.config["num_stages"] == cfg["num_stages"] and k.config["BLOCK_K"] == cfg["BLOCK_K"]
    (sass_lines,) = sass_functions(k.artifact.sass).values()
    # input_precision="ieee": FP32 products on the FMA units, no tensor-core op (no TF32 HMMA, no wgmma on sm_90)
    assert count(sass_lines, r"\b(HMMA|HGMMA)") == 0 and not c.sass.matrix and not c.ptx.matrix
    assert "wgmma" not in k.artifact.ptx and "mma.sync" not in k.artifact.ptx
    assert count(sass_lines, r"\bFFMA\b") >= 32 * 64 * 16 // (32 * cfg["num_warps"])
    # a cp.async pipeline into shared memory Triton sizes at launch
    assert count(sass_lines, r"\bLDGSTS") > 0
    assert k.artifact.dynamic_shared > 0 and c.resources.dynamic_shared_bytes == k.artifact.dynamic_shared
    assert c.ptx.params["A"].loads > 0 and c.ptx.params["B"].loads > 0 and c.ptx.params["C"].stores > 0
    assert c.resources.registers == _res_usage(k.artifact)["REG"]


def test_matmul_configs_and_first_default():
    assert matmul_config(0) == {
        "BLOCK_M": 128,
        "BLOCK_N": 256,
        "BLOCK_K": 32,
        "GROUP_M": 8,
        "num_warps": 8,
        "num_stages": 3,
    }
    # FP32: (num_stages - 1) stages of an A tile and a B tile must fit the 99 KB a block may opt into on sm_89
    for bm, bn, bk, _, _, stages in MATMUL_CONFIGS:
        assert (stages - 1) * (bm * bk + bk * bn) * 4 <= 99 * 1024
    assert [list(c) for c in load_family("matmul").reference_configs()] == [list(MATMUL_KEYS)] * len(MATMUL_CONFIGS)


def test_specialized_compile_vectorizes_like_a_real_launch():
    """What Triton's JIT would add at launch (16-byte aligned pointers, d % 16 == 0) turns scalar loads into quads."""
    (k,) = compile_reference("layernorm", LN_SHAPE, "sm_89", 4, None, specialize=True)
    (c,) = census_artifact(k.artifact, kernel=k.name, block=k.block, param_names=list(k.param_names))
    (ptx_lines,) = ptx_functions(k.artifact.ptx).values()
    assert k.specialized
    assert count(ptx_lines, r"ld\.global\.v4\.b32") == 6 == c.ptx.global_loads.get(128)
    assert count(ptx_lines, r"ld\.global\.b32") == 0
    assert c.ptx.params["x"].load_bits == {128: 2}


def test_layernorm_block_and_warps():
    assert next_power_of_2(768) == 1024 and next_power_of_2(1024) == 1024 and next_power_of_2(1) == 1
    (k,) = compile_reference("layernorm", {"m": 8, "d": 100}, "sm_89", None, None)
    assert k.config == {"BLOCK": 128, "num_warps": 1} and k.grid == (8, 1, 1) and k.block == 32
    with pytest.raises(InputError, match="BLOCK >= d"):
        compile_reference("layernorm", {"m": 8, "d": 100}, "sm_89", None, {"BLOCK": 64})
    with pytest.raises(InputError, match="unknown arch"):
        compile_reference("layernorm", LN_SHAPE, "sm_75", None, None)
    with pytest.raises(ConfigError, match="unknown kernel family 'softmax'"):
        compile_reference("softmax", LN_SHAPE, "sm_89", None, None)


# --- a user's kernel ------------------------------------------------------------------------------------------
OK = f"{DATA}/user_triton_ok.py"
OK_SIG = "x_ptr:*fp32,y_ptr:*fp32,N:i32,factor:fp32"


def test_user_kernel_compiles():
    k = compile_user(f"{OK}:scale_kernel", OK_SIG, ["BLOCK=1024"], get_arch("sm_89"), 4, grid=(3, 1, 1))
    assert k.name == "scale_kernel" and k.block == 128 and k.grid == (3, 1, 1)
    assert k.param_names[:4] == ("x_ptr", "y_ptr", "N", "factor")
    (c,) = census_artifact(k.artifact, kernel=k.name, block=k.block, param_names=list(k.param_names))
    assert c.ptx.params["x_ptr"].loads == 8 and c.ptx.params["y_ptr"].stores == 8
    # the constexpr may also be typed in the signature
    again = compile_user(f"{OK}:scale_kernel", OK_SIG + ",BLOCK:constexpr", ["BLOCK=1024"], get_arch("sm_89"), 4)
    assert again.artifact.cubin == k.artifact.cubin


def _error(spec, signature=OK_SIG, constexprs=("BLOCK=1024",)) -> InputError:
    with pytest.raises(InputError) as info:
        compile_user(spec, signature, list(constexprs), get_arch("sm_89"), 4)
    return info.value


def test_user_kernel_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "user_triton_bad_syntax.py"
    bad.write_text("import triton\n\n\n@triton.jit\ndef k(x_ptr, N:\n    pass\n")
    err = _error(f"{bad}:k", "x_ptr:*fp32,N:i32", ())
    assert err.file == str(bad) and err.line in (5, 6)
    assert "syntax" in err.message.lower() and "\n" not in str(err)


def test_user_kernel_errors_name_the_file():
    missing = _error(f"{OK}:nope")
    assert missing.file == OK and "nope" in missing.message and "scale_kernel" in missing.message
    plain = _error(f"{OK}:not_a_kernel")
    assert "not a @triton.jit kernel" in plain.message and plain.line == 22
    wrong_name = _error(f"{OK}:scale_kernel", "x:*fp32,y_ptr:*fp32,N:i32,factor:fp32")
    assert wrong_name.file == OK and wrong_name.line == 8 and "x is not an argument" in wrong_name.message
    wrong_type = _error(f"{OK}:scale_kernel", "x_ptr:*fp33,y_ptr:*fp32,N:i32,factor:fp32")
    assert "'*fp33'" in wrong_type.message and "not a Triton type" in wrong_type.message
    order = _error(f"{OK}:scale_kernel", "y_ptr:*fp32,x_ptr:*fp32,N:i32,factor:fp32")
    assert "order" in order.message
    no_value = _error(f"{OK}:scale_kernel", OK_SIG, ())
    assert "--constexpr BLOCK=" in no_value.message
    rejected = _error(f"{OK}:bad_range_kernel", "x_ptr:*fp32,N:i32")
    assert rejected.line == 18 and "power of 2" in rejected.message
    assert _error(f"{DATA}/absent.py:k").message == "no such file"
    assert "path.py:kernel" in _error(OK).message
    for err in (missing, plain, wrong_name, wrong_type, order, no_value, rejected):
        assert "\n" not in str(err)


# --- on a GPU: the reference kernels compute what they claim -------------------------------------------------
@pytest.mark.gpu
def test_reference_kernels_are_correct_on_the_gpu():
    torch = pytest.importorskip("torch")
    import triton

    from mage_tune.triton_kernels import matmul_kernel, norm_kernel

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(256, 768, device="cuda", generator=gen) + 3
    w = torch.randn(768, device="cuda", generator=gen)
    b = torch.randn(768, device="cuda", generator=gen)
    y = torch.empty_like(x)
    norm_kernel[(256,)](x, y, w, b, 768, 768, 1e-5, BLOCK=1024, num_warps=4)
    ref = torch.nn.functional.layer_norm(x.double(), (768,), w.double(), b.double(), 1e-5)
    assert (y.double() - ref).abs().max().item() < 1e-4

    a = torch.randn(256, 192, device="cuda", generator=gen)
    bm = torch.randn(192, 320, device="cuda", generator=gen)
    want = a.double() @ bm.double()
    for i in (0, SMALL_MM):
        cfg = matmul_config(i)
        c = torch.empty(256, 320, device="cuda")
        grid = (triton.cdiv(256, cfg["BLOCK_M"]) * triton.cdiv(320, cfg["BLOCK_N"]),)
        matmul_kernel[grid](
            a, bm, c, 256, 320, 192, *a.stride(), *bm.stride(), *c.stride(),
            BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"],
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
        )  # fmt: skip
        # IEEE FP32 products: far tighter than TF32's ~1e-2 on these magnitudes
        assert (c.double() - want).abs().max().item() < 1e-3
