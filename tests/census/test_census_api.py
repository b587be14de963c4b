"""The Python API: `mage_tune.census(path)` returns typed records and can be called any number of times, whatever
was imported before it."""

from __future__ import annotations

import subprocess
import sys

from conftest import KERNELS


def test_census_callable_again_and_again():
    code = f"""
import mage_tune
first = mage_tune.census({str(KERNELS / "vec_scale.cu")!r}, arch="sm_89")
second = mage_tune.census({str(KERNELS / "vec_scale.cu")!r}, arch="sm_89")
import mage_tune.census
from mage_tune.census import Census, census_path
third = mage_tune.census({str(KERNELS / "vec_scale.cu")!r}, arch="sm_89", kernel="vec_scale")
assert all(isinstance(c, Census) for c in first + second + third)
assert first == second == third == census_path({str(KERNELS / "vec_scale.cu")!r}, arch="sm_89")
print(first[0].kernel, first[0].resources.registers is not None)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["vec_scale", "True"]


def test_census_after_subpackage_import():
    import mage_tune.census
    from mage_tune.census import Census

    (c,) = mage_tune.census(KERNELS / "vec_scale.cu", arch="sm_89")
    assert isinstance(c, Census) and c.to_json()["schema"] == "mage-tune.census/2"
