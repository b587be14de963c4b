"""The fusion pass (mage_tune/torch/fusion.py) without a GPU, where torch is installed: on hand-made post-grad
graphs (each form of a lookup, a lookup whose rows are used elsewhere; a sum used by the norm alone or again, a
broadcast add; a sum with a Linear's bias added apart, as Inductor leaves it on a GPU) and through a real
torch.compile on the CPU, with CPU kernels put under the operators for the test (the CUDA ones run in
test_gpu_fusion.py)."""

from __future__ import annotations

import importlib.util
import operator

import pytest
from torch_tensors import residual_block

# torch itself, looked for without importing: tests/torch is on the path too, and importing it as "torch" where
# torch is not installed would leave a bare namespace in sys.modules that other libraries (scipy) then take for torch
_spec = importlib.util.find_spec("torch")
if _spec is None or _spec.origin in (None, "namespace"):
    pytest.skip("torch is not installed (the gpu extra)", allow_module_level=True)

import torch  # noqa: E402  (only once torch is known to be installed)

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


def _sum_graph(used_again: bool, bias_shape: tuple | None = None, alpha: bool = False):
    g = fx.Graph()
    x, res, w, b = (g.placeholder(n) for n in ("x", "res", "w", "b"))
    x.meta["val"] = torch.empty(7, 16, device="meta")
    res.meta["val"] = torch.empty(bias_shape or (7, 16), device="meta")
    total = g.call_function(aten.add.Tensor, (x, res), {"alpha": 2} if alpha else {})
    total.meta["val"] = torch.empty(7, 16, device="meta")
    norm = g.call_function(torch.ops.mage_tune.layer_norm.default, (total, w, b, 1e-5))
    norm.meta["val"] = torch.empty(7, 16, device="meta")
    if used_again:
        after = g.call_function(aten.add.Tensor, (total, norm))
        after.meta["val"] = torch.empty(7, 16, device="meta")
        g.output(after)
    else:
        g.output(norm)
    return g


def test_a_sum_feeding_the_norm_alone_is_fused_without_writing_it():
    g = _sum_graph(used_again=False)
    assert mt.fusion.fuse_add_layer_norm(g) == 1
    calls = [n for n in g.nodes if n.op == "call_function"]
    assert [n.target for n in calls] == [torch.ops.mage_tune.add_layer_norm.default]
    assert [a.name if isinstance(a, fx.Node) else a for a in calls[0].args] == ["x", "res", "w", "b", 1e-5]
    g.lint()


def test_a_sum_used_again_comes_from_the_fused_operator():
    g = _sum_graph(used_again=True)
    assert mt.fusion.fuse_add_layer_norm(g) == 1
    calls = [n for n in g.nodes if n.op == "call_function"]
    fused, after = calls[0], calls[-1]
    assert fused.target is torch.ops.mage_tune.add_layer_norm_sum.default
    parts = {n.args[1]: n for n in calls[1:-1]}  # the two getitems, by index
    y, h = parts[0], parts[1]
    assert y.args[0] is fused and h.args[0] is fused
    assert after.target is aten.add.Tensor and after.args == (h, y)  # the sum's other user reads the written sum
    assert [v.shape for v in fused.meta["val"]] == [(7, 16), (7, 16)] and h.meta["val"].shape == (7, 16)
    g.lint()


def test_one_row_added_to_every_row_is_fused_where_the_sum_feeds_the_norm_alone():
    g = _sum_graph(False, bias_shape=(16,))
    assert mt.fusion.fuse_add_layer_norm(g) == 1
    calls = [n for n in g.nodes if n.op == "call_function"]
    assert [n.target for n in calls] == [torch.ops.mage_tune.add_layer_norm.default]
    assert [a.name if isinstance(a, fx.Node) else a for a in calls[0].args] == ["x", "res", "w", "b", 1e-5]
    g.lint()


def test_a_scaled_add_or_a_broadcast_sum_used_again_is_left_alone():
    for g in (_sum_graph(True, bias_shape=(16,)), _sum_graph(False, alpha=True), _sum_graph(False, (7, 1))):
        before = [n.target for n in g.nodes]
        assert mt.fusion.fuse_add_layer_norm(g) == 0
        assert [n.target for n in g.nodes] == before


def _linear_graph(
    view: bool = False, used_again: bool = False, beta: bool = False, bias_size: int = 16, padded: bool = False
):
    """A Linear's output feeding the norm; through a view of its rows where `view`; its rows padded to 13 and the
    pad sliced off after the bias (Inductor's shape padding) where `padded`."""
    g = fx.Graph()
    x, weight, bias, w, b = (g.placeholder(n) for n in ("x", "weight", "bias", "w", "b"))
    bias.meta["val"] = torch.empty(bias_size, device="meta")
    product = g.call_function(aten.addmm.default, (bias, x, weight), {"beta": 2} if beta else {})
    product.meta["val"] = torch.empty(13 if padded else 12, 16, device="meta")
    rows = product
    if padded:
        rows = g.call_function(aten.slice.Tensor, (product, 0, 0, -1))
        rows.meta["val"] = torch.empty(12, 16, device="meta")
    if view:
        rows = g.call_function(aten.view.default, (rows, [3, 4, 16]))
        rows.meta["val"] = torch.empty(3, 4, 16, device="meta")
    norm = g.call_function(torch.ops.mage_tune.layer_norm.default, (rows, w, b, 1e-5))
    norm.meta["val"] = torch.empty(rows.meta["val"].shape, device="meta")
    g.output((norm, product) if used_again else norm)
    return g


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("view", [False, True], ids=["rows", "view"])
def test_a_linears_bias_moves_into_the_norm_and_its_product_is_a_plain_mm(view, padded):
    g = _linear_graph(view, padded=padded)
    assert mt.fusion.fuse_linear_layer_norm(g) == 1
    calls = [n for n in g.nodes if n.op == "call_function"]
    between = [*([aten.slice.Tensor] if padded else []), *([aten.view.default] if view else [])]
    assert [n.target for n in calls] == [aten.mm.default, *between, torch.ops.mage_tune.add_layer_norm.default]
    product, fused = calls[0], calls[-1]
    assert [a.name for a in product.args] == ["x", "weight"]
    assert product.meta["val"].shape == ((13 if padded else 12), 16)
    if between:  # the rows the norm reads are the product's, through what took them from the addmm
        assert calls[1].args[0] is product
    assert fused.args[0] is calls[-2] and [a.name if isinstance(a, fx.Node) else a for a in fused.args[1:]] == [
        "bias",
        "w",
        "b",
        1e-5,
    ]
    g.lint()


def test_a_linear_used_elsewhere_scaled_or_biased_by_a_matrix_is_left_alone():
    for g in (_linear_graph(used_again=True), _linear_graph(beta=True), _linear_graph(bias_size=1)):
        before = [n.target for n in g.nodes]
        assert mt.fusion.fuse_linear_layer_norm(g) == 0
        assert [n.target for n in g.nodes] == before


def _row_graph(
    row_first: bool = True,
    residual_first: bool = True,
    view: bool = False,
    used_again: bool = False,
    inner_used_again: bool = False,
    row_shape: tuple = (16,),
    sliced: int | None = None,
):
    """x + (row + product): a Linear's output whose bias Inductor moved into a pointwise add (bias first), or the
    other orders; through a view of the rows (a Linear on a 3-D input) where `view`; the product one longer along
    dimension `sliced` and that cut off after the bias add (Inductor's shape padding, on the rows: dimension 0)."""
    g = fx.Graph()
    x, product, row, w, b = (g.placeholder(n) for n in ("x", "product", "row", "w", "b"))
    full = (3, 4, 16) if view else (12, 16)
    padded = [12, 16]
    if sliced is not None:
        padded[sliced] += 1
    x.meta["val"] = torch.empty(full, device="meta")
    product.meta["val"] = torch.empty(padded, device="meta")
    row.meta["val"] = torch.empty(row_shape, device="meta")
    inner = g.call_function(aten.add.Tensor, (row, product) if row_first else (product, row))
    inner.meta["val"] = torch.empty(padded, device="meta")
    addend = inner
    if sliced is not None:
        addend = g.call_function(aten.slice.Tensor, (inner, sliced, 0, -1))
        addend.meta["val"] = torch.empty(12, 16, device="meta")
    if view:
        addend = g.call_function(aten.reshape.default, (addend, [3, 4, 16]))
        addend.meta["val"] = torch.empty(full, device="meta")
    total = g.call_function(aten.add.Tensor, (x, addend) if residual_first else (addend, x))
    total.meta["val"] = torch.empty(full, device="meta")
    norm = g.call_function(torch.ops.mage_tune.layer_norm.default, (total, w, b, 1e-5))
    norm.meta["val"] = torch.empty(full, device="meta")
    outputs = [norm]
    if used_again:
        after = g.call_function(aten.add.Tensor, (total, norm))
        after.meta["val"] = torch.empty(full, device="meta")
        outputs = [after]
    g.output((*outputs, inner) if inner_used_again else outputs[0])
    return g


def _names(args) -> list:
    return [a.name if isinstance(a, fx.Node) else a for a in args]


@pytest.mark.parametrize("row_first", [True, False], ids=["row+product", "product+row"])
@pytest.mark.parametrize("residual_first", [True, False], ids=["x+linear", "linear+x"])
@pytest.mark.parametrize("view", [False, True], ids=["rows", "view"])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
def test_a_residual_plus_a_linears_unfused_bias_is_one_operator(row_first, residual_first, view, padded):
    g = _row_graph(row_first, residual_first, view, sliced=0 if padded else None)
    assert mt.fusion.fuse_add_row_layer_norm(g) == 1
    calls = [n for n in g.nodes if n.op == "call_function"]
    between = [*([aten.slice.Tensor] if padded else []), *([aten.reshape.default] if view else [])]
    assert [n.target for n in calls] == [*between, torch.ops.mage_tune.add_row_layer_norm.default]
    fused = calls[-1]
    res = calls[-2].name if between else "product"
    assert _names(fused.args) == ["x", res, "row", "w", "b", 1e-5]
    if between:  # the slice or view now takes the product's rows, at the sum's shape
        assert calls[0].args[0].name == "product" and calls[-2].meta["val"].shape == ((3, 4, 16) if view else (12, 16))
    assert fused.meta["val"].shape == ((3, 4, 16) if view else (12, 16))
    assert mt.fusion.fuse_add_layer_norm(g) == 0  # nothing left for the plain residual pass
    g.lint()


@pytest.mark.parametrize("view", [False, True], ids=["rows", "view"])
def test_a_residual_plus_a_linear_used_again_comes_from_the_sum_form(view):
    g = _row_graph(view=view, used_again=True)
    assert mt.fusion.fuse_add_row_layer_norm(g) == 1
    calls = [n for n in g.nodes if n.op == "call_function"]
    fused = next(n for n in calls if n.target is torch.ops.mage_tune.add_row_layer_norm_sum.default)
    assert _names(fused.args)[2:] == ["row", "w", "b", 1e-5] and fused.args[0].name == "x"
    parts = {n.args[1]: n for n in calls if n.target is operator.getitem}
    after = calls[-1]
    assert after.target is aten.add.Tensor and after.args == (parts[1], parts[0])
    assert [v.shape for v in fused.meta["val"]] == [fused.args[0].meta["val"].shape] * 2
    assert sum(n.target is aten.add.Tensor for n in calls) == 1  # only the sum's other user: both adds are fused
    g.lint()


def test_a_bias_add_used_elsewhere_scaled_or_of_no_row_is_left_to_the_plain_residual_pass():
    cases = [
        _row_graph(inner_used_again=True),
        _row_graph(row_shape=(12, 16)),
        _row_graph(row_shape=(1, 16)),
        _row_graph(sliced=1, row_shape=(17,)),  # the columns cut: each row no longer one row of the product
    ]
    scaled = _row_graph()
    next(n for n in scaled.nodes if n.target is aten.add.Tensor).kwargs = {"alpha": 2}
    for g in (*cases, scaled):
        before = [n.target for n in g.nodes]
        assert mt.fusion.fuse_add_row_layer_norm(g) == 0
        assert [n.target for n in g.nodes] == before
    assert mt.fusion.fuse_add_layer_norm(_row_graph(inner_used_again=True)) == 1  # the outer add alone


@pytest.fixture
def no_graph_cache():
    """Each compile runs the pass (Inductor's graph cache off, through its own patch, undone after the test)."""
    with torch._inductor.config.patch(fx_graph_cache=False):
        yield


@pytest.fixture
def cpu_kernels(no_graph_cache):
    """CPU kernels under the operators, for this test only."""
    fn = torch.nn.functional
    lib = torch.library.Library("mage_tune", "IMPL")
    lib.impl("layer_norm", lambda x, w, b, eps: fn.layer_norm(x, (x.shape[-1],), w, b, eps), "CPU")
    lib.impl(
        "embedding_layer_norm",
        lambda t, i, w, b, eps: fn.layer_norm(fn.embedding(i, t), (t.shape[-1],), w, b, eps),
        "CPU",
    )
    lib.impl("add_layer_norm", lambda x, r, w, b, eps: fn.layer_norm(x + r, (x.shape[-1],), w, b, eps), "CPU")
    lib.impl(
        "add_layer_norm_sum",
        lambda x, r, w, b, eps: (fn.layer_norm(x + r, (x.shape[-1],), w, b, eps), x + r),
        "CPU",
    )
    lib.impl(
        "add_row_layer_norm",
        lambda x, r, row, w, b, eps: fn.layer_norm(x + (r + row), (x.shape[-1],), w, b, eps),
        "CPU",
    )
    lib.impl(
        "add_row_layer_norm_sum",
        lambda x, r, row, w, b, eps: (fn.layer_norm(x + (r + row), (x.shape[-1],), w, b, eps), x + (r + row)),
        "CPU",
    )
    yield
    lib._destroy()


def test_a_compiled_model_is_fused_and_compiles_runs_and_trains(cpu_kernels, monkeypatch):
    seen: list[int] = []
    fuse = mt.fusion.fuse_embedding_layer_norm
    monkeypatch.setattr(mt.fusion, "fuse_embedding_layer_norm", lambda g: seen.append(fuse(g)) or seen[-1])
    linear: list[int] = []
    fuse_linear = mt.fusion.fuse_linear_layer_norm
    monkeypatch.setattr(mt.fusion, "fuse_linear_layer_norm", lambda g: linear.append(fuse_linear(g)) or linear[-1])

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
        assert seen == [1] and linear == [1] and torch.allclose(y, model(ids), atol=1e-5)
    seen.clear()
    torch._dynamo.reset()
    model.train()
    torch.compile(model, fullgraph=True)(ids).square().sum().backward()
    assert seen and sum(seen) <= 1 and model[0].weight.grad is not None


@pytest.mark.parametrize("unfused_bias", [False, True], ids=["addmm", "bias-add"])
def test_a_compiled_pre_norm_block_fuses_both_adds_and_trains_like_pytorch(cpu_kernels, monkeypatch, unfused_bias):
    seen: list[int] = []
    fuse = mt.fusion.fuse_add_layer_norm
    monkeypatch.setattr(mt.fusion, "fuse_add_layer_norm", lambda g: seen.append(fuse(g)) or seen[-1])
    rows: list[int] = []
    fuse_row = mt.fusion.fuse_add_row_layer_norm
    monkeypatch.setattr(mt.fusion, "fuse_add_row_layer_norm", lambda g: rows.append(fuse_row(g)) or rows[-1])
    if unfused_bias:  # Inductor moves a Linear's bias out of addmm into the add after it on a GPU alone: here too
        monkeypatch.setattr(torch._inductor.fx_passes.post_grad, "is_gpu", lambda device: True)

    class Norm(torch.nn.LayerNorm):
        def forward(self, x):
            return mt.layer_norm(x, self.weight, self.bias, self.eps)

    torch.manual_seed(1)
    ours, theirs = residual_block(torch, 64, Norm), residual_block(torch, 64, torch.nn.LayerNorm)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(4, 33, 64)
    torch._dynamo.reset()
    with torch.no_grad():
        y = torch.compile(ours.eval(), fullgraph=True)(x)
        # both norms' sums fused: with the Linears' biases in them where Inductor added them apart
        assert (rows, seen) == (([2], [0]) if unfused_bias else ([0], [2])) and torch.allclose(y, theirs(x), atol=1e-5)
    torch._dynamo.reset()
    weights = torch.linspace(-1, 1, 64)  # a loss whose gradients do not cancel (a norm's squares sum to about d)
    torch.compile(ours.train(), fullgraph=True)(x).mul(weights).sum().backward()
    theirs(x).mul(weights).sum().backward()
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        assert float((a.grad - b.grad).norm() / b.grad.norm()) < 1e-5, name  # FP32 sums in other orders


def test_every_operator_is_a_name_of_the_package():
    """What `torch.ops.mage_tune` defines, `mage_tune.torch` exports under the same name (a model calls them)."""
    from mage_tune.torch import ops

    defined = {name for name, value in vars(ops).items() if isinstance(value, ops.Operator)}
    assert {"layer_norm", "add_row_layer_norm", "add_row_layer_norm_sum"} <= defined
    assert all(getattr(mt, name, None) is getattr(ops, name) for name in defined)
    assert defined <= set(mt.__all__)
