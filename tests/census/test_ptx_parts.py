"""A large PTX is assembled in parts side by side (mage_tune/ptx_parts.py): every kernel's census must be the one the
whole module gives, on a real NVRTC module with a shared out-of-line function, module variables, constant memory,
static and dynamic shared memory and braces inside comments."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import nvrtc_compile, ptx_functions

from mage_tune import ptx_parts
from mage_tune.arch import get_arch
from mage_tune.census import census_artifact
from mage_tune.compile import _from_ptx, _from_ptx_in_parts
from mage_tune.errors import InputError

KERNELS = Path(__file__).resolve().parents[1] / "fixtures" / "kernels"


@pytest.fixture(scope="module")
def module() -> str:
    return nvrtc_compile((KERNELS / "many_kernels.cu").read_text(), "sm_90", "many_kernels.cu")


def test_split_keeps_every_kernel_once_and_everything_else_everywhere(module):
    items = ptx_parts.top_level_items(module)
    assert "".join(text for text, _ in items) == module
    kernels = [text for text, is_kernel in items if is_kernel]
    assert len(kernels) == 7  # tile_sum at four sizes, count_hits, blend, blend_twice
    parts = ptx_parts.split(module, 3)
    assert len(parts) == 3
    entries = [set(ptx_functions(part)) for part in parts]
    names = set(ptx_functions(module))
    assert set().union(*entries) == names
    for name in names:  # each kernel in exactly one part
        assert sum(name in e for e in entries) == 1, name
    shared = [text for text, is_kernel in items if not is_kernel]
    for part in parts:
        assert all(text in part for text in shared)  # header, .func, .global, .const in every part


def test_each_kernel_censuses_the_same_assembled_in_parts(module):
    whole = census_artifact(_from_ptx(module, get_arch("sm_90"), "many_kernels.ptx"))
    parts = _from_ptx_in_parts(module, get_arch("sm_90"), "many_kernels.ptx", (), parts=3)
    assert parts.cubin is None and parts.tools["ptxas parts"] == "3"
    split = census_artifact(parts)
    assert [c.kernel for c in split] == [c.kernel for c in whole] and len(whole) == 7

    def comparable(census) -> dict:
        data = census.to_json()
        data.pop("tools")
        return data

    for a, b in zip(whole, split, strict=True):
        assert comparable(a) == comparable(b), a.demangled


def test_what_cannot_be_split_is_assembled_whole(module):
    assert ptx_parts.split(module, 1) == [module]
    unbalanced = module.replace("}", "", 1)
    assert ptx_parts.split(unbalanced, 3) == [unbalanced]
    header = module[: re.search(r"^\.(visible|weak) \.entry", module, re.M).start()]  # no kernel at all
    assert ptx_parts.split(header, 4) == [header]


def test_an_error_in_one_part_is_reported_for_the_whole_file(module):
    """ptxas's line numbers are the file's: a part that fails sends the whole module to ptxas, so the error is the
    one a whole compile gives."""
    broken = module.replace("ret;", "not_an_instruction;", 1)
    with pytest.raises(InputError) as whole:
        _from_ptx(broken, get_arch("sm_90"), "broken.ptx")
    with pytest.raises(InputError) as parts:
        _from_ptx_in_parts(broken, get_arch("sm_90"), "broken.ptx", (), parts=3)
    assert str(parts.value) == str(whole.value) and whole.value.line


TWO_KERNELS = """
extern "C" __global__ void first(const float* x, float* y) { y[threadIdx.x] = 2.f * x[threadIdx.x]; }
extern "C" __global__ void second(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x] + 1.f; }
"""


def test_a_first_kernel_right_after_the_header_is_in_one_part_only():
    """nvcc's PTX (and NVRTC's with nothing else at module level) puts the first `.entry` right after the header
    directives, which end with no `;`: the header is an item of every part, the kernel of one, so its SASS is counted
    once (it was assembled in every part, and censused twice)."""
    module = nvrtc_compile(TWO_KERNELS, "sm_90", "two.cu")
    first = re.search(r"^\.visible \.entry first", module, re.M)
    assert first and not module[: first.start()].count(";")  # the case: no `;` between the header and the kernel
    items = ptx_parts.top_level_items(module)
    assert "".join(text for text, _ in items) == module
    assert [is_kernel for _, is_kernel in items if is_kernel] == [True, True]
    assert ".entry" not in items[0][0] and not items[0][1]  # the header alone
    parts = ptx_parts.split(module, 2)
    assert [sorted(ptx_functions(part)) for part in parts] == [["first"], ["second"]]
    whole = census_artifact(_from_ptx(module, get_arch("sm_90"), "two.ptx"))
    split = census_artifact(_from_ptx_in_parts(module, get_arch("sm_90"), "two.ptx", (), parts=2))
    assert [c.sass.instructions for c in split] == [c.sass.instructions for c in whole]
