"""How a built-in family is named: by its name, by its module's path as a user types it (the package's own file
only), and as records name it (text only, never the disk). The Hopper matmuls were searched by path before they had
names, so their records carry `mage_tune/kernels/matmul_bf16.py` relative to wherever the search ran."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mage_tune.errors import InputError
from mage_tune.kernels import load_family, recorded
from mage_tune.kernels.registry import builtin_at, builtin_named
from mage_tune.search import sources

ROOT = Path(__file__).resolve().parents[2]
BF16_FILE = ROOT / "mage_tune/kernels/matmul_bf16.py"
BENCH = ROOT / "tests/fixtures/data/bench_matmul_bf16_4096.json"  # an older record: no "arch", origin matmul-bf16


@pytest.mark.parametrize(
    ("origin", "name"),
    [
        ("matmul-bf16", "matmul-bf16"),
        ("mage_tune/kernels/matmul_bf16.py", "matmul-bf16"),
        ("/elsewhere/checkout/mage_tune/kernels/matmul_bf16.py:FP32_OUT", "matmul-bf16-f32out"),
        ("C:\\work\\mage_tune\\kernels\\matmul_3xtf32_sm90.py", "matmul-3xtf32-sm90"),
        ("mage_tune/kernels/matmul_bf16.py:F16", "matmul-f16"),
        ("mage_tune/kernels/matmul_bf16.py:SOMETHING", None),  # no such built-in in that module
        ("mage_tune/kernels/base.py", None),
        ("kernels/matmul_bf16.py", None),
        ("../x.py", None),
        ("a" * 5000 + ".py", None),  # too long a file name for the disk: never looked up there
        ("mage_tune/kernels/matmul_bf16.py\0", None),
    ],
)
def test_a_record_names_a_builtin_by_name_or_module_path_as_text(origin, name):
    assert builtin_named(origin) == name
    found = recorded.builtin(origin)
    assert (found.name if found else None) == name


def test_a_path_to_the_package_s_own_module_is_the_builtin_and_a_copy_is_not(tmp_path, monkeypatch):
    assert load_family(str(BF16_FILE)).origin == "matmul-bf16"
    assert load_family(f"{BF16_FILE}:FP32_OUT").name == "matmul-bf16-f32out"
    assert builtin_at("a" * 5000 + ".py") is None and builtin_at(str(tmp_path)) is None
    copy = tmp_path / "mage_tune" / "kernels" / "matmul_bf16.py"  # a copy being edited: a family file of its own
    copy.parent.mkdir(parents=True)
    shutil.copy(BF16_FILE, copy)
    monkeypatch.chdir(tmp_path)
    assert builtin_at("mage_tune/kernels/matmul_bf16.py") is None


def test_a_bench_record_is_filed_under_the_arch_its_variants_were_built_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # wherever the import runs
    data = json.loads(BENCH.read_text())
    older = tmp_path / "older.json"
    older.write_text(json.dumps({**data, "family_origin": "mage_tune/kernels/matmul_bf16.py"}))
    assert sources.bench_record(older)[0].arch == "sm_90a"  # the device's sm_90, as the built-in builds there
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({**data, "family": "my-matmul", "family_origin": "my_matmul.py"}))
    assert sources.bench_record(plain)[0].arch == "sm_90"  # a family file's: the device's, as recorded
    said = tmp_path / "said.json"
    said.write_text(json.dumps({**data, "arch": "sm_90a"}))
    assert sources.bench_record(said)[0].arch == "sm_90a"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**data, "arch": "sm_xx"}))
    with pytest.raises(InputError, match=r"bad\.json"):
        sources.bench_record(bad)
