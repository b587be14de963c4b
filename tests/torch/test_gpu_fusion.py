"""The embedding lookup fused into mage-tune's layer norm, on a real GPU: the operator
torch.ops.mage_tune.embedding_layer_norm against PyTorch's lookup then norm (values and gradients), and the compiler
pass (mage_tune/torch/fusion.py) putting it into a compiled model's graph — counted, so a pass that silently stops
matching fails here — under torch.compile and CUDA graph capture; a compiled model that trains gets PyTorch's
gradients; a Linear's bias moved into the norm after it, also beside a residual add. Also: the tuned kernels'
launches go through the driver (mage_tune/cuda_driver.py), bound once per set of input sizes. Skipped where no CUDA
device is present."""

from __future__ import annotations

import pytest
from torch_tensors import ln_inputs, rel, residual_block

pytestmark = pytest.mark.gpu


@pytest.fixture
def fusions(mt, torch, monkeypatch):
    """How many lookups the pass fused, per graph it saw (a fresh compile: no graph cache)."""
    seen: list[int] = []
    fuse = mt.fusion.fuse_embedding_layer_norm
    monkeypatch.setattr(mt.fusion, "fuse_embedding_layer_norm", lambda graph: seen.append(fuse(graph)) or seen[-1])
    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False):
        yield seen


@pytest.fixture(params=["unpadded", "padded"])
def shape_padding(request, torch):
    """Inductor's shape padding off, or on for every matmul: by default it pads a matmul's rows where timing both says
    so, which differs from run to run (a busy GPU), so each test takes both forms of the graph by name."""
    settings = {"shape_padding": False} if request.param == "unpadded" else {"force_shape_pad": True}
    with torch._inductor.config.patch(**settings):
        yield request.param


def test_the_fused_operator_is_the_lookup_then_the_norm_with_pytorchs_gradients(torch, mt):
    table, w, b = ln_inputs(torch, 5000, 768)
    index = torch.randint(0, 5000, (4, 250), device="cuda")
    index[-1, -1] = 4999
    y = torch.ops.mage_tune.embedding_layer_norm(table, index, w, b, 1e-5)
    fn = torch.nn.functional
    want = fn.layer_norm(fn.embedding(index, table).double(), (768,), w.double(), b.double(), 1e-5)
    assert y.shape == (4, 250, 768) and rel(y, want) < 1e-5
    ours = [t.clone().requires_grad_() for t in (table, w, b)]
    theirs = [t.clone().requires_grad_() for t in (table, w, b)]
    grad = torch.randn(4, 250, 768, device="cuda")
    torch.autograd.backward(mt.embedding_layer_norm(ours[0], index, ours[1], ours[2], 1e-5), grad)
    torch.autograd.backward(fn.layer_norm(fn.embedding(index, theirs[0]), (768,), theirs[1], theirs[2], 1e-5), grad)
    for a, t in zip(ours, theirs, strict=True):
        assert rel(a.grad, t.grad) < 1e-5


def _model(torch, layer_norm, vocab: int, d: int):
    return torch.nn.Sequential(torch.nn.Embedding(vocab, d), layer_norm(d), torch.nn.Linear(d, d), layer_norm(d)).cuda()


def test_a_compiled_model_runs_the_lookup_fused_into_the_norm_also_as_a_cuda_graph(
    torch, mt, fusions, monkeypatch, shape_padding
):
    linear: list[int] = []
    fuse = mt.fusion.fuse_linear_layer_norm
    monkeypatch.setattr(mt.fusion, "fuse_linear_layer_norm", lambda graph: linear.append(fuse(graph)) or linear[-1])
    torch.manual_seed(5)
    ours, theirs = _model(torch, mt.LayerNorm, 3000, 1024), _model(torch, torch.nn.LayerNorm, 3000, 1024)
    theirs.load_state_dict(ours.state_dict())
    ours.eval()
    ids = torch.randint(0, 3000, (2, 777), device="cuda")  # tokens not a multiple of any rows per block
    compiled = torch.compile(ours, fullgraph=True)
    with torch.no_grad():
        y = compiled(ids)
        want = theirs(ids)
        assert sum(fusions) == 1  # the first norm's input is the lookup; the second's is the Linear's output,
        assert sum(linear) == 1  # whose bias the second norm's kernel adds (the product a plain mm)
        assert y.shape == (2, 777, 1024) and rel(y, want) < 1e-5
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        torch.cuda.synchronize()
        with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
            captured = compiled(ids)
        for _ in range(2):
            captured.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(captured, y)


def test_a_compiled_model_trains_like_pytorchs_whether_or_not_its_lookup_is_fused(torch, mt, fusions):
    # The forward keeps the looked-up rows for the backward (no fusion) unless the partitioner chooses to look them
    # up again in the backward (then the forward's lookup feeds the norm alone, and is fused): either way the
    # gradients are PyTorch's, the table's included.
    torch.manual_seed(6)
    ours, theirs = _model(torch, mt.LayerNorm, 500, 256), _model(torch, torch.nn.LayerNorm, 500, 256)
    theirs.load_state_dict(ours.state_dict())
    ids = torch.randint(0, 500, (300,), device="cuda")
    compiled = torch.compile(ours, fullgraph=True)
    weights = torch.linspace(-1, 1, 256, device="cuda")  # a loss whose gradients do not cancel
    compiled(ids).mul(weights).sum().backward()
    theirs(ids).mul(weights).sum().backward()
    assert sum(fusions) <= 1 and fusions  # the pass ran on the compiled graphs
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        assert rel(a.grad, b.grad) < 1e-4, name


def test_tuned_kernels_launch_through_the_driver(torch):
    import mage_tune

    kernel = mage_tune.load("layernorm", db="off")
    table, w, b = ln_inputs(torch, 64, 512)
    kernel(table, w, b)
    launcher = kernel.prepare({"m": 64, "d": 512}).launcher
    assert launcher.direct._params is not None  # the driver's parameter list was made: the driver launched it
    # a bound launch (an operator's later calls at these sizes) gives the checked call's result, on new outputs
    bound = kernel.direct(table, w, b)
    first, again = kernel(table, w, b), bound(table, w, b)
    torch.cuda.synchronize()
    assert torch.equal(first, again) and first.data_ptr() != again.data_ptr()
    assert bound._bound._params is not None


def test_the_fused_residual_operators_are_the_add_then_the_norm_with_pytorchs_gradients(torch, mt):
    x, w, b = ln_inputs(torch, 999, 1024, seed=7)
    res = torch.randn_like(x)
    fn = torch.nn.functional
    want = fn.layer_norm((x.double() + res.double()), (1024,), w.double(), b.double(), 1e-5)
    y = torch.ops.mage_tune.add_layer_norm(x, res, w, b, 1e-5)
    y2, h = torch.ops.mage_tune.add_layer_norm_sum(x, res, w, b, 1e-5)
    assert rel(y, want) < 1e-5 and torch.equal(y, y2) and torch.equal(h, x + res)
    ours = [t.clone().requires_grad_() for t in (x, res, w, b)]
    theirs = [t.clone().requires_grad_() for t in (x, res, w, b)]
    gy, gh = torch.randn_like(x), torch.randn_like(x)
    out_y, out_h = mt.add_layer_norm_sum(*ours, 1e-5)
    torch.autograd.backward((out_y, out_h), (gy, gh))
    total = theirs[0] + theirs[1]
    torch.autograd.backward((fn.layer_norm(total, (1024,), theirs[2], theirs[3], 1e-5), total), (gy, gh))
    for a, t in zip(ours, theirs, strict=True):
        assert rel(a.grad, t.grad) < 1e-5


def test_one_row_added_to_every_row_before_the_norm_with_pytorchs_gradients(torch, mt):
    x, w, b = ln_inputs(torch, 999, 1024, seed=8)
    row = torch.randn(1024, device="cuda")
    fn = torch.nn.functional
    want = fn.layer_norm(x.double() + row.double(), (1024,), w.double(), b.double(), 1e-5)
    for _ in range(2):  # the first call checks and binds the launch, the second takes the bound one
        assert (
            rel(torch.ops.mage_tune.add_layer_norm(x.view(9, 111, 1024), row, w, b, 1e-5).view(999, 1024), want) < 1e-5
        )
    ours = [t.clone().requires_grad_() for t in (x, row, w, b)]
    theirs = [t.clone().requires_grad_() for t in (x, row, w, b)]
    grad = torch.randn_like(x)
    torch.autograd.backward(mt.add_layer_norm(*ours, 1e-5), grad)
    torch.autograd.backward(fn.layer_norm(theirs[0] + theirs[1], (1024,), theirs[2], theirs[3], 1e-5), grad)
    for a, t in zip(ours, theirs, strict=True):
        assert a.grad.shape == t.grad.shape and rel(a.grad, t.grad) < 1e-5


def test_the_residual_with_a_linears_bias_is_the_adds_then_the_norm_with_pytorchs_gradients(torch, mt):
    x, w, b = ln_inputs(torch, 999, 1024, seed=9)
    res, row = torch.randn_like(x), torch.randn(1024, device="cuda")
    fn = torch.nn.functional
    want = fn.layer_norm(x.double() + (res.double() + row.double()), (1024,), w.double(), b.double(), 1e-5)
    for _ in range(2):  # the first call checks and binds the launch, the second takes the bound one
        y = torch.ops.mage_tune.add_row_layer_norm(x.view(9, 111, 1024), res.view(9, 111, 1024), row, w, b, 1e-5)
        y2, h = torch.ops.mage_tune.add_row_layer_norm_sum(x, res, row, w, b, 1e-5)
        assert rel(y.view(999, 1024), want) < 1e-5 and torch.equal(y.view(999, 1024), y2)
        assert torch.equal(h, x + (res + row))  # the graph's order of the adds, so the sum is the graph's to the bit
    ours = [t.clone().requires_grad_() for t in (x, res, row, w, b)]
    theirs = [t.clone().requires_grad_() for t in (x, res, row, w, b)]
    gy, gh = torch.randn_like(x), torch.randn_like(x)
    torch.autograd.backward(mt.add_row_layer_norm_sum(*ours, 1e-5), (gy, gh))
    total = theirs[0] + (theirs[1] + theirs[2])
    torch.autograd.backward((fn.layer_norm(total, (1024,), theirs[3], theirs[4], 1e-5), total), (gy, gh))
    for a, t in zip(ours, theirs, strict=True):
        assert a.grad.shape == t.grad.shape and rel(a.grad, t.grad) < 1e-5
    ours = [t.clone().requires_grad_() for t in (x, res, row, w, b)]
    theirs = [t.clone().requires_grad_() for t in (x, res, row, w, b)]
    torch.autograd.backward(mt.add_row_layer_norm(*ours, 1e-5), gy)
    total = theirs[0] + (theirs[1] + theirs[2])
    torch.autograd.backward(fn.layer_norm(total, (1024,), theirs[3], theirs[4], 1e-5), gy)
    for a, t in zip(ours, theirs, strict=True):
        assert a.grad.shape == t.grad.shape and rel(a.grad, t.grad) < 1e-5


@pytest.mark.parametrize("tokens", [(3, 333), (999,)], ids=["3-d", "2-d"])
def test_a_compiled_pre_norm_block_runs_both_residual_fusions_also_as_a_cuda_graph(
    torch, mt, monkeypatch, tokens, shape_padding
):
    # On a GPU Inductor moves each Linear's bias out of addmm into the add after it: both norms' sums take it in
    seen: list[int] = []
    graphs: list[list[str]] = []  # what the pass saw, for the failure's message
    fuse = mt.fusion.fuse_add_row_layer_norm

    def counted(graph):
        graphs.append([str(n.target) for n in graph.nodes if n.op == "call_function"])
        seen.append(fuse(graph))
        return seen[-1]

    monkeypatch.setattr(mt.fusion, "fuse_add_row_layer_norm", counted)
    torch.manual_seed(8)
    ours = residual_block(torch, 768, mt.LayerNorm).cuda().eval()
    theirs = residual_block(torch, 768, torch.nn.LayerNorm).cuda().eval()
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(*tokens, 768, device="cuda")
    torch._dynamo.reset()
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False):
        compiled = torch.compile(ours, fullgraph=True)
        y = compiled(x)
        assert seen == [2], " | ".join(", ".join(g) for g in graphs)  # the calls of each graph, in full
        assert any(t == "aten.slice.Tensor" for t in graphs[0]) == (shape_padding == "padded")  # both forms seen
        assert rel(y, theirs(x)) < 1e-5
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        torch.cuda.synchronize()
        with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
            captured = compiled(x)
        captured.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, y)
