"""Which mode search and bench run in: measured where a CUDA device answers, the static model where the machine
shows no NVIDIA GPU, and an error that says what is missing where a GPU is here but cannot be used."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from mage_tune.cli import cli
from mage_tune.errors import NoDeviceError
from mage_tune.measure import device


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    device.gpu_mode.cache_clear()
    yield
    device.gpu_mode.cache_clear()


def test_no_gpu_here_is_the_static_model(no_cupy, monkeypatch):
    monkeypatch.setattr(device, "gpu_hardware", lambda: "")
    mode, why = device.gpu_mode()
    assert mode == "static" and "no NVIDIA GPU here" in why


def test_a_gpu_that_cannot_be_used_is_an_error_not_a_static_run(no_cupy, monkeypatch, tmp_path):
    monkeypatch.setattr(device, "gpu_hardware", lambda: "GPU 0: NVIDIA H200")
    with pytest.raises(NoDeviceError, match=r"NVIDIA GPU is here \(GPU 0: NVIDIA H200\) but cupy will not import"):
        device.gpu_mode()
    args = ["search", "layernorm", "--d", "768", "--trials", "2", "--run-dir", str(tmp_path / "run")]
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, NoDeviceError) and "./setup.sh" in str(result.exception)
    assert "STATIC" not in result.output
    doctor = CliRunner().invoke(cli, ["doctor"], env={"COLUMNS": "100"})
    assert doctor.exit_code == 1 and "mode: none: an NVIDIA GPU is here" in doctor.output
