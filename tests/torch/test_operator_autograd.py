"""The operators' autograd kernel (mage_tune/torch/ops.py, Operator.register_autograd) without a GPU, where torch is
installed: an operator made the same way with a CPU kernel. A call that needs no gradient runs the kernel itself
(outside torch's below-autograd guard, so not through its redispatch); a call that needs one, fake tensors and
torch.compile go through torch's formula."""

from __future__ import annotations

import importlib.util

import pytest

_spec = importlib.util.find_spec("torch")
if _spec is None or _spec.origin in (None, "namespace"):
    pytest.skip("torch is not installed (the gpu extra)", allow_module_level=True)

import torch  # noqa: E402  (only once torch is known to be installed)

ops = pytest.importorskip("mage_tune.torch.ops")

calls: list[bool] = []  # per kernel call: whether torch's autograd wrapper redispatched to it


def _scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    below = torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutogradFunctionality)
    calls.append(below)
    return x * factor


def _scale_context(ctx, inputs, output) -> None:
    ctx.factor = inputs[1]


scale = ops.Operator("autograd_probe_scale(Tensor x, float factor) -> Tensor", _scale, backend="CPU")
scale.register_fake(lambda x, factor: torch.empty_like(x))
scale.register_autograd(lambda ctx, grad: (grad * ctx.factor, None), setup_context=_scale_context)


@pytest.fixture(autouse=True)
def _fresh_calls():
    calls.clear()


def test_a_call_without_gradients_runs_the_kernel_itself():
    x = torch.randn(4, 8)
    assert torch.equal(scale(x, 3.0), x * 3.0) and calls == [False]
    weight = torch.randn(4, 8, requires_grad=True)
    with torch.no_grad():
        y = scale(weight, 2.0)
    assert y.grad_fn is None and not y.requires_grad and calls == [False, False]


def test_a_call_that_needs_a_gradient_goes_through_the_formula():
    x = torch.randn(4, 8, requires_grad=True)
    y = scale(x, 3.0)
    assert calls == [True] and y.grad_fn is not None
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(grad, torch.full_like(x, 3.0))


def test_fake_tensors_take_the_fake_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        y = scale(mode.from_tensor(torch.randn(4, 8)), 2.0)
    assert tuple(y.shape) == (4, 8) and calls == []


def test_a_compiled_graph_runs_it_with_and_without_gradients():
    fn = torch.compile(lambda x: scale(x + 1, 2.0).relu(), fullgraph=True)
    x = torch.randn(4, 8)
    with torch.no_grad():
        fn(x)  # compiles: its first run goes through torch's wrapper
        calls.clear()
        assert torch.allclose(fn(x), ((x + 1) * 2).relu())
    assert calls == [False]  # the compiled graph's own call, on real tensors
    leaf = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(fn(leaf).sum(), leaf)
    assert torch.allclose(grad, ((x + 1) > 0).float() * 2)
