"""A tuned kernel or the remembering autotune called where torch has no CUDA device (CPU torch): one NoDeviceError
line, not torch's AssertionError. Skipped where torch is not installed or has a device."""

from __future__ import annotations

import importlib.util

import pytest

_spec = importlib.util.find_spec("torch")
if _spec is None or _spec.origin in (None, "namespace"):  # tests/torch itself is no torch
    pytest.skip("torch is not installed (the gpu extra)", allow_module_level=True)

import torch  # noqa: E402  (only once torch is known to be installed)

import mage_tune  # noqa: E402
from mage_tune.errors import NoDeviceError  # noqa: E402

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


def test_a_module_s_fallback_is_said_once_at_the_caller_s_line():
    """On CPU tensors LayerNorm falls back to PyTorch, says so once, and the warning points at the line that called
    the module (not torch.nn's call machinery it passed through)."""
    import warnings

    import mage_tune.torch as mt
    from mage_tune.torch import ops

    ops._said.clear()
    norm = mt.LayerNorm(64)
    x = torch.randn(4, 64)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        expected = torch.nn.functional.layer_norm(x, (64,), norm.weight, norm.bias, norm.eps)
        line = _line() + 1
        got = norm(x)
        norm(x)
    ours = [w for w in said if "mage_tune.torch: LayerNorm" in str(w.message)]
    assert len(ours) == 1 and ours[0].filename == __file__ and ours[0].lineno == line
    assert torch.equal(got, expected)


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_every_operator_on_cpu_tensors_is_pytorch_s_computation_said_once():
    """The operators are registered for the CPU too: CPU tensors get PyTorch's computation (the operator's own
    fallback), said once per family, never PyTorch's "could not run with arguments from the CPU backend"."""
    import warnings

    from mage_tune.torch import ops

    ops._said.clear()
    F = torch.nn.functional
    d = 64
    x, res, row = torch.randn(6, d), torch.randn(6, d), torch.randn(d)
    w, b, eps = torch.randn(d), torch.randn(d), 1e-5
    table, index = torch.randn(10, d), torch.tensor([[1, 3], [9, 0]])
    a, bm = torch.randn(8, 16), torch.randn(16, 8)
    norm = lambda t: F.layer_norm(t, (d,), w, b, eps)  # noqa: E731
    mt = torch.ops.mage_tune
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        cases = [
            (mt.layer_norm(x, w, b, eps), norm(x)),
            (mt.embedding_layer_norm(table, index, w, b, eps), norm(table[index])),
            (mt.add_layer_norm(x, res, w, b, eps), norm(x + res)),
            (mt.add_layer_norm_sum(x, res, w, b, eps)[0], norm(x + res)),
            (mt.add_layer_norm_sum(x, res, w, b, eps)[1], x + res),
            (mt.add_row_layer_norm(x, res, row, w, b, eps), norm(x + (res + row))),
            (mt.add_row_layer_norm_sum(x, res, row, w, b, eps)[0], norm(x + (res + row))),
            (mt.matmul_fp32(a, bm), a @ bm),
        ]
    for got, expected in cases:
        assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    messages = [str(w.message) for w in said if "mage_tune.torch" in str(w.message)]
    assert messages and all("on cpu tensors; PyTorch computes it" in m for m in messages)
    assert len(messages) == len(set(messages))  # each said once
