"""A tuned kernel or the remembering autotune called where torch has no CUDA device (CPU torch): one NoDeviceError
line, not torch's AssertionError. Skipped where torch is not installed or has a device."""

from __future__ import annotations

import importlib.util

import pytest

_spec = importlib.util.find_spec("torch")
if _spec is None or _spec.origin in (None, "namespace"):  # tests/torch itself is no torch
    pytest.skip("torch is not installed (the gpu extra)", allow_module_level=True)

import torch

import mage_tune
from mage_tune.errors import NoDeviceError

if torch.cuda.is_available():
    pytest.skip("a CUDA device is here: the GPU tests cover the launches", allow_module_level=True)


def test_a_tuned_kernel_says_there_is_no_device():
    kernel = mage_tune.load("layernorm")
    with pytest.raises(NoDeviceError, match="no CUDA device for torch here"):
        kernel(torch.randn(8, 768), torch.ones(768), torch.zeros(768))
    with pytest.raises(NoDeviceError, match="no CUDA device for torch here"):
        kernel.prepare({"m": 8, "d": 768})


def test_the_autotune_says_there_is_no_device():
    from mage_tune.tuning.autotune import RememberingAutotuner as Autotuner  # device_of: its first GPU step

    assert hasattr(Autotuner, "device_of")
    with pytest.raises(NoDeviceError, match="no CUDA device for torch here"):
        Autotuner.device_of(object.__new__(Autotuner), {"x": torch.randn(4)})
