"""The census table's Hopper profile (`hopper_rows`): built from the census fields alone, checked here against those
fields on the Hopper fixtures (tests/fixtures/kernels/hopper/) and on the BF16 matmul family's default config for
sm_90a; a kernel with no Hopper feature prints exactly as before (no Hopper row)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mage_tune.arch import get_arch
from mage_tune.census import census_path, census_variant
from mage_tune.census.table import hopper_rows, rows, wgmma_shapes
from mage_tune.cli import cli
from mage_tune.kernels.matmul_bf16 import FAMILY
from mage_tune.kernels.select import build_all

ROOT = Path(__file__).resolve().parents[2]
HOPPER = ROOT / "tests" / "fixtures" / "kernels" / "hopper"


def _census(name: str, arch: str):
    return {c.kernel: c for c in census_path(HOPPER / name, arch=arch)}


def test_wgmma_and_tma_kernel_profile():
    (c,) = _census("wgmma_tma.cu", "sm_90a").values()
    got = dict(hopper_rows(c))
    s = c.sass
    loads = s.bulk["load"] + s.bulk["multicast"]
    assert (s.bulk["load"], s.bulk["multicast"], s.bulk["store"], s.bulk["prefetch"]) == (3, 1, 2, 1)
    assert got["Hopper TMA / bulk copies [SASS]"] == f"{loads} loads, 1 multicast, 2 stores, 1 prefetch"
    assert wgmma_shapes(s) == wgmma_shapes(c.ptx) == {"m64n16k16": 1, "m64n8k8": 1}
    assert got["Hopper wgmma [SASS]"] == "m64n16k16 ×1, m64n8k8 ×1; fences 1, commits 1, waits 0"
    waits = s.mbarrier["try_wait"] + s.mbarrier["test_wait"]
    arrives = s.mbarrier["arrive"] + s.mbarrier["arrive_expect_tx"]
    assert got["Hopper mbarrier [SASS]"].startswith(f"{waits} waits, {arrives} arrives (arrive 1, arrive_expect_tx 1")
    assert got["Hopper cluster [SASS]"] == "none declared, 1 multicast loads"
    assert "Hopper setmaxnreg [SASS]" not in got


def test_setmaxnreg_and_cluster_profiles():
    (ws,) = _census("warp_specialized.cu", "sm_90a").values()
    assert hopper_rows(ws) == [("Hopper setmaxnreg [SASS]", "dec 40, inc 232")]
    pair = _census("cluster_pair.cu", "sm_90")["cluster_pair"]
    assert pair.cluster.dims == (2, 1, 1) and pair.sass.cluster_barriers == {"arrive": 2, "wait": 2}
    assert hopper_rows(pair) == [("Hopper cluster [SASS]", "2x1x1, 0 multicast loads, barriers arrive 2, wait 2")]


def test_matmul_bf16_default_config_profile():
    shape = {"m": 4096, "n": 4096, "k": 4096}
    arch = get_arch("sm_90a")
    config = FAMILY.complete({}, shape, arch)
    (variant,) = build_all(FAMILY, shape, arch, [config], lambda error: pytest.fail(str(error)))
    c = census_variant(variant)
    got = dict(hopper_rows(c))
    s = c.sass
    assert wgmma_shapes(s) == {"m64n256k16": s.matrix["HGMMA"]} == {"m64n256k16": 4}
    waits = "/".join(map(str, s.wgmma_waits))
    assert got["Hopper wgmma [SASS]"] == (
        f"m64n256k16 ×4; fences {s.wgmma_fences}, commits {s.wgmma_commits}, waits {waits}"
    )
    assert got["Hopper TMA / bulk copies [SASS]"].startswith(f"{s.bulk['load']} loads, ")
    assert got["Hopper setmaxnreg [SASS]"] == f"dec 40, inc {FAMILY.consumer_registers(config)}"
    mb = s.mbarrier
    waits_n = sum(n for k, n in mb.items() if k.endswith("_wait"))
    assert got["Hopper mbarrier [SASS]"].startswith(f"{waits_n} waits, {mb['arrive'] + mb['arrive_expect_tx']} arrives")


def test_a_kernel_without_hopper_features_has_no_hopper_row():
    out = CliRunner().invoke(cli, ["census", str(ROOT / "tests" / "fixtures" / "kernels" / "cp_async_double.cu")])
    assert out.exit_code == 0, out.output
    assert "Hopper" not in out.output
    (c,) = census_path(ROOT / "tests" / "fixtures" / "kernels" / "cp_async_double.cu")
    assert hopper_rows(c) == [] and not any(key.startswith("Hopper") for key, _ in rows(c))
