"""Triton's persistent TMA matmul as a baseline of the Hopper BF16 matmul family, without a GPU: the family lists one
Triton baseline per config that fits the shared memory (fewer for the FP32 output, whose staging tile of C is twice
the bytes); each compiles offline for Hopper to tensor copies in and tensor stores out (no global loads or stores),
wgmma, and the shared memory the family expects; its launcher builds the host-side tensor descriptors and launches
min(SMs, tiles) programs (a stand-in Triton kernel records the launch). Its correctness and timing on a GPU are
tests/kernels/test_gpu_matmul_bf16.py's."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from mage_tune import gpu
from mage_tune.arch import get_arch
from mage_tune.kernels import matmul_bf16
from mage_tune.kernels.matmul_bf16 import F16, FAMILY, FP32_OUT, TMA_KERNEL
from mage_tune.triton_kernels import MATMUL_KEYS, MATMUL_TMA_CONFIGS

ARCH = get_arch("sm_90a")
RAGGED = {"m": 1000, "n": 520, "k": 264}  # 8 × 5 tiles of 128 × 128, K a partial 64-deep k-tile past 256


def _tma(family, shape=RAGGED):
    return [b for b in family.baseline_kernels(shape) if b.config.get("kernel") == TMA_KERNEL]


def test_the_family_lists_a_triton_baseline_per_fitting_config():
    baselines = _tma(FAMILY)
    assert [b.config for b in baselines] == [
        {"kernel": TMA_KERNEL, **dict(zip(MATMUL_KEYS, c, strict=True))} for c in MATMUL_TMA_CONFIGS
    ]
    assert all(b.kind == "triton" for b in baselines)  # summarized with the tutorial matmul: "vs triton" is both's
    assert baselines[0].label == "triton-tma[BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3]"
    assert len({b.label for b in FAMILY.baseline_kernels(RAGGED)}) == len(FAMILY.baseline_kernels(RAGGED))
    for b in baselines:
        c = b.config
        assert c["BLOCK_K"] * 2 % 16 == 0 and c["BLOCK_M"] <= 256 and c["BLOCK_N"] <= 256  # a TMA box's limits
        assert c["num_warps"] in (4, 8) and c["BLOCK_M"] * c["BLOCK_N"] // (32 * c["num_warps"]) <= 128
    # C's staging tile in FP32 is twice the bytes: the 128 × 256 tile and the 128-deep k-tiles no longer fit
    fp32 = [(b.config["BLOCK_N"], b.config["BLOCK_K"]) for b in _tma(FP32_OUT)]
    assert len(fp32) == 4 and (256, 64) not in fp32 and (128, 128) not in fp32
    assert FP32_OUT.baseline_kernels(RAGGED)[-1].kind == "torch"


def test_the_tutorial_matmul_keeps_its_baselines():
    tutorial = [b for b in FAMILY.baseline_kernels(RAGGED) if b.kind == "triton" and "kernel" not in b.config]
    assert [b.config for b in tutorial] == FAMILY.tutorial_configs()
    assert all(b.label.startswith("triton[") for b in tutorial)


@pytest.mark.parametrize("family", [FAMILY, FP32_OUT, F16], ids=["bf16", "fp32", "fp16"])
def test_every_config_compiles_for_hopper_to_tensor_copies_and_wgmma(family):
    configs = family.tma_reference_configs()
    kernels = family.tma_reference_kernels(RAGGED, ARCH)
    assert len(kernels) == len(configs)
    out = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}[family.out_dtype]
    inputs = family.in_type.ptx
    for config, kernel in zip(configs, kernels, strict=True):
        ptx, sass = kernel.artifact.ptx, kernel.artifact.sass
        assert re.search(r"^\s*\.target\s+sm_90a\b", ptx, re.M)  # Triton's own arch-specific target: wgmma
        assert "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes" in ptx  # TMA loads
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx  # the tensor store of C
        assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.{inputs}\.{inputs}", ptx)
        assert not re.search(r"\b(ld|st)\.global", ptx), "A, B and C move by tensor copies only"
        assert "UTMALDG" in sass and "UTMASTG" in sass and "HGMMA" in sass
        assert not re.search(r"\b(LDG|STG|LDL|STL)\b", sass)  # nor global loads, nor spills
        if out == "f32":
            assert not re.search(r"cvt\.rn\.bf16x2\.f32", ptx)  # C keeps the FP32 sums
        # what the family's filter counts, plus Triton's barriers, within what a block may opt into
        shared = kernel.artifact.dynamic_shared
        assert 0 <= shared - family.tma_shared_bytes(config) <= matmul_bf16.TMA_BARRIER_BYTES
        assert shared <= ARCH.smem_per_block_optin
        tiles = -(-RAGGED["m"] // config["BLOCK_M"]) * -(-RAGGED["n"] // config["BLOCK_N"])
        assert kernel.grid == (min(ARCH.sms, tiles), 1, 1) and kernel.block == 32 * config["num_warps"]
        assert kernel.config["NUM_SMS"] == ARCH.sms


def test_the_shared_memory_filter_drops_what_would_not_launch():
    """The FP32 output's 128 × 256 config, left out by the family, really compiles to more than a block may have."""
    dropped = {"kernel": TMA_KERNEL, **dict(zip(MATMUL_KEYS, MATMUL_TMA_CONFIGS[0], strict=True))}
    assert dropped not in FP32_OUT.tma_reference_configs()
    (kernel,) = FP32_OUT.tma_reference_kernels(RAGGED, ARCH, [dropped])
    assert kernel.artifact.dynamic_shared > ARCH.smem_per_block_optin


class _Tensor:
    def __init__(self, address: int, itemsize: int):
        self.address, self.dtype = address, SimpleNamespace(itemsize=itemsize)

    def data_ptr(self) -> int:
        return self.address


@pytest.mark.parametrize("family", [FAMILY, FP32_OUT], ids=["bf16", "fp32"])
def test_the_launcher_passes_host_descriptors_and_min_sms_tiles_programs(family, monkeypatch):
    config = family.tma_reference_configs()[-1]  # 64 × 128 tiles: 16 × 5 of them at RAGGED, fewer than the SMs
    launches = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append((grid, args, kwargs))

    cuda = SimpleNamespace(current_device=lambda: 0, get_device_properties=lambda _: SimpleNamespace(
        multi_processor_count=132))  # fmt: skip
    monkeypatch.setattr(gpu, "torch", lambda: SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(gpu, "triton_kernels", lambda: SimpleNamespace(matmul_tma_persistent_kernel=Kernel()))
    job = SimpleNamespace(kind="triton", label="triton-tma[...]", config=config)
    launch = family.launcher(job, RAGGED)
    out_bytes = 2 if family is FAMILY else 4
    bufs = {"A": _Tensor(0x1000, 2), "B": _Tensor(0x2000, 2), "__out__": _Tensor(0x3000, out_bytes)}
    launch(bufs)
    launch(bufs)
    assert len(launches) == 2
    (grid, args, kwargs) = launches[0]
    m, n, k = RAGGED["m"], RAGGED["n"], RAGGED["k"]
    assert grid == (80,)
    a, b, c = args[:3]
    assert args[3:] == (m, n, k)
    assert (a.base, a.shape, a.strides, a.block_shape) == (bufs["A"], [m, k], [k, 1], [64, 64])
    assert (b.base, b.shape, b.strides, b.block_shape) == (bufs["B"], [k, n], [n, 1], [64, 128])
    assert (c.base, c.shape, c.strides, c.block_shape) == (bufs["__out__"], [m, n], [n, 1], [64, 128])
    assert kwargs == {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "NUM_SMS": 132, "num_warps": 4,
                      "num_stages": 4}  # fmt: skip
    big = {"m": 4096, "n": 4096, "k": 4096}
    family.launcher(job, big)(bufs)
    assert launches[-1][0] == (132,)  # persistent: one program per SM walks 2048 tiles


def test_compare_puts_triton_s_tma_kernel_beside_ours_first():
    """`compare matmul-bf16` reads our census against Triton's own Hopper path by default (its first reference config
    is the persistent TMA matmul's); `--config` past those picks the tutorial matmul, and `all` lists both kinds."""
    from mage_tune.comparison import compare

    tma = FAMILY.tma_reference_configs()
    assert FAMILY.reference_configs() == tma + FAMILY.tutorial_configs()
    first = compare("matmul-bf16", RAGGED, arch="sm_90a")
    ours, theirs = first.kernels
    assert theirs.kernel == "matmul_tma_persistent_kernel" and theirs.config["BLOCK_N"] == tma[0]["BLOCK_N"]
    assert theirs.census.sass.bulk["load"] > 0 and ours.census.sass.bulk["load"] > 0  # TMA beside TMA
    assert "Hopper TMA / bulk copies" in first.table()
    tutorial = compare("matmul-bf16", RAGGED, arch="sm_90a", config_index=len(tma))
    assert tutorial.kernels[1].kernel == "matmul_kernel" and not tutorial.kernels[1].census.sass.bulk
    kinds = [k.name for k in FAMILY.reference_kernels(RAGGED, ARCH)]
    assert kinds == ["matmul_tma_persistent_kernel"] * len(tma) + ["matmul_kernel"] * len(FAMILY.tutorial_configs())
