"""A Triton family's search redraws what would build a kernel already tried, as a CUDA family's redraws a config
already tried: num_stages only sets how Triton pipelines loops, so where the kernel has no loop at a config's
constexprs every num_stages builds one kernel (TritonFamily.equivalents), and the search neither spends a trial on
the others nor waits for them to call its space exhausted.

The RMSNorm example's Triton kernel (examples/rmsnorm/triton_rmsnorm.py) keeps the row in registers, without a
loop, where BLOCK covers the row (SINGLE), and loops over it otherwise. Static searches, real Triton compiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from mage_tune.arch import get_arch
from mage_tune.kernels.neighbours import config_key
from mage_tune.kernels.registry import load_family
from mage_tune.kernels.triton_family import may_loop
from mage_tune.search import record
from mage_tune.search.runner import COUNTED, Search
from mage_tune.search.spec import SearchSpec
from mage_tune.user_files import import_file

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
FAMILY = str(ROOT / "examples" / "rmsnorm" / "triton_family.py")
ARCH = get_arch("sm_90")


def test_every_num_stages_of_a_kernel_without_a_loop_is_one_kernel():
    family = load_family(FAMILY)
    shape = {"m": 64, "d": 2048}
    single = {"BLOCK": 2048, "num_warps": 4, "num_stages": 2}
    assert family.equivalents(single, shape, ARCH) == [single, {**single, "num_stages": 1}, {**single, "num_stages": 3}]
    looped = {"BLOCK": 512, "num_warps": 4, "num_stages": 2}  # BLOCK < d: the loops over the row
    assert family.equivalents(looped, shape, ARCH) == [looped]


def test_a_loop_counts_wherever_the_constexprs_do_not_rule_it_out(tmp_path):
    source = tmp_path / "kernels.py"
    source.write_text(
        "import triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\ndef helper(x, N, BLOCK: tl.constexpr):\n"
        "    for i in range(0, N, BLOCK):\n        tl.store(x + i, 0.0)\n\n\n"
        "@triton.jit\ndef calls(x, N, HELP: tl.constexpr, BLOCK: tl.constexpr):\n"
        "    if HELP and BLOCK > 64:\n        helper(x, N, BLOCK)\n    else:\n        tl.store(x, 1.0)\n\n\n"
        "@triton.jit\ndef runtime_if(x, N, BLOCK: tl.constexpr):\n"
        "    if N > BLOCK:\n        while N > 0:\n            N -= 1\n\n\n"
        "@triton.jit\ndef reassigned(x, ONE: tl.constexpr):\n"
        "    ONE = not ONE\n    if ONE:\n        for i in range(4):\n            tl.store(x + i, 0.0)\n"
    )
    module = import_file(source)
    assert may_loop(module.calls, {"HELP": True, "BLOCK": 128})  # the helper's loop
    assert not may_loop(module.calls, {"HELP": True, "BLOCK": 64})  # ruled out: BLOCK > 64 is False
    assert not may_loop(module.calls, {"HELP": False, "BLOCK": 128})
    assert may_loop(module.runtime_if, {"BLOCK": 1 << 20})  # decided at run time: counts
    assert may_loop(module.reassigned, {"ONE": False})  # set in the body: not the argument's value


def _search(run_dir: Path, shape: dict, trials: int) -> tuple[list[dict], list[str]]:
    family = load_family(FAMILY)
    spec = SearchSpec(
        family.name, shape, ARCH, trials, "tpe", None, "triton-redraw", run_dir, 2, True, 0, family.origin, db="off"
    )
    said = []
    Search(spec, family, said.append).run(lambda *a: None)
    return record.trials(run_dir), said


def test_a_triton_search_of_a_small_space_spends_no_trial_on_a_kernel_it_has(tmp_path, compile_cache):
    # d = 512: BLOCK 512 or 1024 (at most twice the row), both covering it: no loop anywhere, so the space's 33
    # configs (11 BLOCK × num_warps, 3 num_stages each) are 11 kernels
    trials, said = _search(tmp_path / "run", {"m": 64, "d": 512}, 40)
    counted = [t for t in trials if t["outcome"] in COUNTED]
    kernels = {(t["config"]["BLOCK"], t["config"]["num_warps"]) for t in counted}
    assert len(counted) == len(kernels) == 11, [t["config"] for t in counted]
    assert not [t for t in trials if t["outcome"] == "duplicate"], [t["config"] for t in trials]
    assert len({t["sass_sha256"] for t in counted}) == 11
    assert any("all 33 valid configs of the space have been modelled (or build the same kernel" in line
               for line in said), said  # fmt: skip
    keys = [config_key(t["config"]) for t in trials]
    assert len(keys) == len(set(keys))
