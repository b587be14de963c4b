"""The fusion pass (mage_tune/torch/fusion.py) without a GPU, where torch is installed: on hand-made post-grad
graphs (each form of a lookup, and a lookup whose rows are used elsewhere) and through a real torch.compile on the
CPU, with CPU kernels put under the operators for the test (the CUDA ones run in test_gpu_fusion.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch.fx")  # torch itself (tests/torch, on the path, would pass for a bare "torch")
import torch

mt = pytest.importorskip("mage_tune.torch")
fx = torch.fx
aten = torch.ops.aten


def _graph(lookup: str, extra_user: bool = False, index_dtype=torch.int64):
    g = fx.Graph()
    table, index, w, b = (g.placeholder(n) for n in ("table", "index", "w", "b"))
    index.meta["val"] = torch.empty(7, dtype=index_dtype, device="meta")
    if lookup == "embedding":
        rows = g.call_function(aten.embedding.default, (table, index))
    elif lookup == "index_select":
        rows = g.call_function(aten.index_select.default, (table, 0, index))
    else:
        rows = g.call_function(aten.index.Tensor, (table, [index]))
    norm = g.call_function(torch.ops.mage_tune.layer_norm.default, (rows, w, b, 1e-5))
    norm.meta["val"] = torch.empty(7, 16, device="meta")
    norm.meta["eager_input_vals"] = ((None,) * 4, {})  # the norm's own: not carried over
    g.output((norm, rows) if extra_user else norm)
    return g


@pytest.mark.parametrize("lookup", ["embedding", "index_select", "index"])
def test_each_form_of_a_lookup_feeding_the_norm_is_fused(lookup):
    g = _graph(lookup)
    assert mt.fusion.fuse_embedding_layer_norm(g) == 1
    calls = [n for n in g.nodes if n.op == "call_function"]
    assert [n.target for n in calls] == [torch.ops.mage_tune.embedding_layer_norm.default]
    fused = calls[0]
    assert [a.name if isinstance(a, fx.Node) else a for a in fused.args] == ["table", "index", "w", "b", 1e-5]
    assert fused.meta["val"].shape == (7, 16) and "eager_input_vals" not in fused.meta
    g.lint()


def test_a_lookup_used_elsewhere_or_by_int32_indices_is_left_alone():
    for g in (_graph("embedding", extra_user=True), _graph("embedding", index_dtype=torch.int32)):
        before = [n.target for n in g.nodes]
        assert mt.fusion.fuse_embedding_layer_norm(g) == 0
        assert [n.target for n in g.nodes] == before


@pytest.fixture
def cpu_kernels():
    """CPU kernels under the two operators, for this test only."""
    fn = torch.nn.functional
    lib = torch.library.Library("mage_tune", "IMPL")
    lib.impl("layer_norm", lambda x, w, b, eps: fn.layer_norm(x, (x.shape[-1],), w, b, eps), "CPU")
    lib.impl(
        "embedding_layer_norm",
        lambda t, i, w, b, eps: fn.layer_norm(fn.embedding(i, t), (t.shape[-1],), w, b, eps),
        "CPU",
    )
    yield
    lib._destroy()


def test_a_compiled_model_is_fused_and_compiles_runs_and_trains(cpu_kernels, monkeypatch):
    seen: list[int] = []
    fuse = mt.fusion.fuse_embedding_layer_norm
    monkeypatch.setattr(mt.fusion, "fuse_embedding_layer_norm", lambda g: seen.append(fuse(g)) or seen[-1])
    monkeypatch.setattr(torch._inductor.config, "fx_graph_cache", False)

    class Norm(torch.nn.LayerNorm):  # the drop-in's operator on any device, as the CPU kernels allow here
        def forward(self, x):
            return mt.layer_norm(x, self.weight, self.bias, self.eps)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(300, 64), Norm(64), torch.nn.Linear(64, 64), Norm(64))
    ids = torch.randint(0, 300, (2, 50))
    torch._dynamo.reset()
    with torch.no_grad():
        model.eval()
        y = torch.compile(model, fullgraph=True)(ids)
        assert seen == [1] and torch.allclose(y, model(ids), atol=1e-5)
    seen.clear()
    torch._dynamo.reset()
    model.train()
    torch.compile(model, fullgraph=True)(ids).square().sum().backward()
    assert seen and sum(seen) <= 1 and model[0].weight.grad is not None
