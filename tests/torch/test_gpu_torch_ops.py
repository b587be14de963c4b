"""Tuned kernels on PyTorch tensors, on a real GPU: mage_tune.load(...)(tensors) (mage_tune/runtime.py), the
operators torch.ops.mage_tune.layer_norm / matmul_fp32 and the drop-in modules (mage_tune/torch/), eager, under
torch.compile(fullgraph=True), under CUDA graph capture, with autograd, and falling back to PyTorch where they do
not apply. Each kernel is a real build of a built-in family; no tuning database (db="off"): the shipped data and the
family defaults choose. Skipped where no CUDA device is present."""

from __future__ import annotations

import warnings

import pytest
from torch_tensors import ln_inputs, rel

from mage_tune.runtime import DirectLaunch

pytestmark = pytest.mark.gpu


# --- the runtime ------------------------------------------------------------------------------------------------
def test_a_loaded_family_launches_its_choice_on_tensors_once_built(torch, monkeypatch):
    import mage_tune

    kernel = mage_tune.load("layernorm", db="off")
    builds = []
    build = kernel.family.build
    monkeypatch.setattr(kernel.family, "build", lambda *a: builds.append(a) or build(*a))
    x, w, b = ln_inputs(torch, 1000, 768)  # m not a multiple of any rows-per-block
    y = kernel(x, w, b)
    again = kernel(x=x, scale=w, bias=b)
    want = torch.nn.functional.layer_norm(x.double(), (768,), w.double(), b.double(), 1e-5)
    assert rel(y, want) < 1e-5
    assert torch.equal(y, again)
    assert len(builds) == 1  # built once at this shape
    prepared = kernel.prepare({"m": 1000, "d": 768})
    assert prepared.choice.config == kernel.choice({"m": 1000, "d": 768}).config
    out = torch.full_like(x, float("nan"))
    assert kernel(x, w, b, out=out) is out and torch.equal(out, y)


def test_the_fp32_matmul_runs_at_ragged_shapes_within_fp32_error(torch):
    import mage_tune

    kernel = mage_tune.load("matmul-3xtf32", db="off")
    g = torch.Generator(device="cuda").manual_seed(1)
    for m, n, k in ((333, 260, 129), (1024, 512, 768)):
        a = torch.rand(m, k, device="cuda", generator=g) * 2 - 1
        b = torch.rand(k, n, device="cuda", generator=g) * 2 - 1
        c = kernel(a, b)
        exact = a.double() @ b.double()
        cublas = a @ b  # FP32, TF32 off
        assert c.shape == (m, n)
        assert rel(c, exact) <= max(2 * rel(cublas, exact), 1e-6), (m, n, k)


def test_the_fp32_matmul_operator_runs_the_wgmma_family_on_hopper(torch, mt, monkeypatch):
    """On an sm_90 device torch.ops.mage_tune.matmul_fp32 runs matmul_3xtf32_sm90.py (built for sm_90a: the
    family's target_arch), at ragged shapes within FP32's error, its gradients through the same operator, and a
    CUDA graph replays it to the bit; elsewhere it runs matmul-3xtf32."""
    from mage_tune.torch import ops

    hopper = torch.cuda.get_device_capability() == (9, 0)
    sm90 = ops.kernel(ops.MATMUL_FP32_SM90)
    built = []
    build = sm90.family.build
    monkeypatch.setattr(
        sm90.family, "build", lambda config, shape, arch: built.append((shape, arch.name)) or build(config, shape, arch)
    )
    g = torch.Generator(device="cuda").manual_seed(2)
    for m, n, k in ((333, 260, 129), (1000, 520, 263), (2048, 1024, 1536)):
        a = torch.rand(m, k, device="cuda", generator=g) * 2 - 1
        b = torch.rand(k, n, device="cuda", generator=g) * 2 - 1
        c = torch.ops.mage_tune.matmul_fp32(a, b)
        exact = a.double() @ b.double()
        assert c.shape == (m, n) and rel(c, exact) <= max(2 * rel(a @ b, exact), 1e-6), (m, n, k)
    shapes = [{"m": 333, "n": 260, "k": 129}, {"m": 1000, "n": 520, "k": 263}, {"m": 2048, "n": 1024, "k": 1536}]
    assert built == ([(shape, "sm_90a") for shape in shapes] if hopper else [])
    a = (torch.rand(512, 384, device="cuda", generator=g) * 2 - 1).requires_grad_()
    b = (torch.rand(384, 256, device="cuda", generator=g) * 2 - 1).requires_grad_()
    grad = torch.randn(512, 256, device="cuda", generator=g)
    torch.ops.mage_tune.matmul_fp32(a, b).backward(grad)
    assert rel(a.grad, grad.double() @ b.double().t()) < 1e-6 and rel(b.grad, a.double().t() @ grad.double()) < 1e-6
    x, w = a.detach(), b.detach()
    eager = torch.ops.mage_tune.matmul_fp32(x, w)
    # at a shape met before the operator launches through its DirectLaunch (on Hopper: the family's own launcher
    # without the checks), to the same bits
    assert all(torch.equal(torch.ops.mage_tune.matmul_fp32(x, w), eager) for _ in range(3))
    family = ops.MATMUL_FP32_SM90 if hopper else ops.MATMUL_FP32
    assert any(key[0] == family and isinstance(launch, DirectLaunch) for key, launch in ops._direct.items())
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        captured = torch.ops.mage_tune.matmul_fp32(x, w)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)


def test_tensors_the_kernel_cannot_read_are_refused_by_name(torch):
    import mage_tune
    from mage_tune.errors import InputError

    kernel = mage_tune.load("layernorm", db="off")
    x, w, b = ln_inputs(torch, 64, 256)
    with pytest.raises(InputError, match=r"input x is torch\.float16"):
        kernel(x.half(), w, b)
    with pytest.raises(InputError, match="input scale is on cpu"):
        kernel(x, w.cpu(), b)
    with pytest.raises(InputError, match="input x is not contiguous"):
        kernel(x.t(), w, b)
    with pytest.raises(InputError, match="input bias has d = 255"):
        kernel(x, w, b[:255])


def test_graph_replays_equal_eager_launches_and_a_first_launch_in_capture_is_refused(torch):
    import mage_tune
    from mage_tune.errors import InputError

    kernel = mage_tune.load("layernorm", db="off")
    x, w, b = ln_inputs(torch, 4096, 1024)
    eager = kernel(x, w, b)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        captured = kernel(x, w, b)
    for _ in range(3):
        captured.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, eager)
    other = torch.cuda.CUDAGraph()
    x2, w2, b2 = ln_inputs(torch, 512, 2048)
    capture = torch.cuda.graph(other, stream=stream)
    with pytest.raises(InputError, match="launch it once before capturing"), torch.cuda.stream(stream), capture:
        kernel(x2, w2, b2)


# --- the operators and modules ------------------------------------------------------------------------------------
def test_the_layer_norm_operator_honours_eps_and_its_gradients_are_pytorchs(torch, mt):
    x, w, b = ln_inputs(torch, 300, 768, seed=2)
    for eps in (1e-5, 1e-2):
        y = torch.ops.mage_tune.layer_norm(x, w, b, eps)
        want = torch.nn.functional.layer_norm(x.double(), (768,), w.double(), b.double(), eps)
        assert rel(y, want) < 1e-5, eps
    xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    grad = torch.randn_like(x)
    torch.autograd.backward(mt.layer_norm(xs, ws, bs, 1e-5), grad)
    torch.autograd.backward(torch.nn.functional.layer_norm(xr, (768,), wr, br, 1e-5), grad)
    for ours, theirs in ((xs, xr), (ws, wr), (bs, br)):
        assert rel(ours.grad, theirs.grad) < 1e-5


def test_the_drop_ins_match_pytorchs_modules(torch, mt):
    torch.manual_seed(3)
    ln, ref = mt.LayerNorm(768, device="cuda"), torch.nn.LayerNorm(768, device="cuda")
    with torch.no_grad():
        ln.weight.normal_(1.0, 0.5)
        ln.bias.normal_()
    ref.load_state_dict(ln.state_dict())
    x = 2.0 + torch.randn(4, 333, 768, device="cuda")
    assert rel(ln(x), ref(x).double()) < 1e-5
    lin = mt.Linear(768, 512, device="cuda")
    x2 = torch.rand(4, 250, 768, device="cuda") * 2 - 1
    exact = x2.double() @ lin.weight.double().t() + lin.bias.double()
    y = lin(x2)
    assert y.shape == (4, 250, 512)
    assert rel(y, exact) <= max(2 * rel(torch.nn.functional.linear(x2, lin.weight, lin.bias), exact), 1e-6)


def test_what_the_kernels_do_not_cover_falls_back_to_pytorch_and_says_so_once(torch, mt):
    ln = mt.LayerNorm(256, device="cuda", dtype=torch.bfloat16)
    ref = torch.nn.LayerNorm(256, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        first, second = ln(x), ln(x)
    assert torch.equal(first, ref(x)) and torch.equal(second, first)
    assert [str(w.message) for w in said if "mage_tune.torch" in str(w.message)] == [
        "mage_tune.torch: LayerNorm of torch.bfloat16 on cuda is not covered; PyTorch computes it"
    ]
    cpu = mt.LayerNorm(64)
    assert torch.equal(cpu(torch.ones(2, 64)), torch.nn.LayerNorm(64)(torch.ones(2, 64)))


def _model(torch, layer_norm, vocab: int, d: int):
    return torch.nn.Sequential(torch.nn.Embedding(vocab, d), layer_norm(d), torch.nn.Linear(d, d), layer_norm(d)).cuda()


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_compiled_model_with_the_drop_in_traces_in_one_graph_and_matches_pytorch(torch, mt, mode):
    torch.manual_seed(4)
    ours, theirs = _model(torch, mt.LayerNorm, 1000, 768), _model(torch, torch.nn.LayerNorm, 1000, 768)
    theirs.load_state_dict(ours.state_dict())
    ids = torch.randint(0, 1000, (2048,), device="cuda")
    compiled = torch.compile(ours, fullgraph=True, mode=mode)
    with torch.no_grad():
        for _ in range(3):  # reduce-overhead records its graph on a later call
            y = compiled(ids)
        want = theirs(ids)
    assert rel(y, want) < 1e-5
