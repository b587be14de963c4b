"""PyTorch operators run by tuned kernels: `torch.ops.mage_tune.layer_norm`, `torch.ops.mage_tune.matmul_fp32`, and
the layer norm with what PyTorch's compiler would fuse into it — `embedding_layer_norm` (a lookup), `add_layer_norm`
and `add_layer_norm_sum` (a residual add), `add_row_layer_norm` and `add_row_layer_norm_sum` (a residual add with a
Linear's bias) — which mage_tune/torch/fusion.py puts into compiled graphs.

Each is a custom operator of the library `mage_tune` (a schema defined through `torch.library.Library`, its CUDA
kernel, a fake implementation so `torch.compile(fullgraph=True)` traces through it as one opaque call, and an
autograd formula so a model that trains can use it). `torch.library.custom_op` would do the same with more checks
per call, which cost an H200 host about 20 µs an operator call, more than the kernel at small shapes. The forward
runs the config the tuning data chooses at the call's shape (mage_tune.runtime: measured here, nearest measured
shape, model, default) on torch's current stream: the first call at a set of input sizes checks them and binds a
launch (RunnableKernel.direct), later ones only allocate the output and launch. A CUDA graph captures it as one
kernel once a launch at that shape has run.

What the kernels do not cover is computed by PyTorch inside the operator, and said once per reason: a tensor not
contiguous, a shape no config of the family takes. (Dtype and device are decided before the operator, by the
modules in mage_tune/torch/modules.py, so that torch.compile keeps its own kernels for what it alone covers.)

The kernels' tuning data: the default database and the shipped data, unless `configure(db=..., use_shipped=...)`.
"""

from __future__ import annotations

import sys
import threading
import warnings
from pathlib import Path

import numpy as np

from mage_tune import gpu
from mage_tune.errors import ConfigError, ToolchainError
from mage_tune.runtime import DirectLaunch, RunnableKernel, load
from mage_tune.tuning.db import TuningDB

torch = gpu.torch()
Tensor = torch.Tensor
_library_autograd = torch._library.autograd  # what torch.library.register_autograd builds its kernel from

LAYERNORM = "layernorm"
EMBEDDING_LAYERNORM = "embedding-layernorm"
ADD_LAYERNORM = "add-layernorm"
ADD_LAYERNORM_SUM = "add-layernorm-sum"
ADD_VECTOR_LAYERNORM = "add-vector-layernorm"
ADD_ROW_LAYERNORM = "add-row-layernorm"
ADD_ROW_LAYERNORM_SUM = "add-row-layernorm-sum"
MATMUL_FP32 = "matmul-3xtf32"
# On Hopper the same problem on wgmma and TMA (about twice cuBLAS FP32's speed on an H200)
MATMUL_FP32_SM90 = "matmul-3xtf32-sm90"

_kernels: dict[str, RunnableKernel] = {}
_direct: dict[tuple, DirectLaunch | None] = {}  # by family, eps, device and the inputs' sizes, dtypes, devices
_settings: dict[str, object] = {"db": None, "use_shipped": True}
_said: set[str] = set()
_lock = threading.Lock()


def configure(db: str | TuningDB | None = None, use_shipped: bool = True) -> None:
    """Where the operators' kernels take their tuning data from: a database (a URL or TuningDB; None: the default
    one, "off": none) and whether the shipped data counts. Kernels already built at a shape are built again."""
    with _lock:
        _settings.update(db=db, use_shipped=use_shipped)
        _kernels.clear()
        _direct.clear()


def kernel(family: str) -> RunnableKernel:
    """The process's tuned kernel of a built-in family, with the configured tuning data."""
    found = _kernels.get(family)
    if found is None:
        with _lock:
            found = _kernels.get(family)
            if found is None:
                found = _kernels[family] = load(family, _settings["db"], bool(_settings["use_shipped"]))
    return found


def say_once(what: str) -> None:
    """A fallback to PyTorch, said once per process and reason (a RuntimeWarning), at the caller's line: the first
    frame outside mage_tune and torch (a module's forward passes through torch.nn's call machinery)."""
    if what not in _said:
        _said.add(what)
        warnings.warn(f"mage_tune.torch: {what}; PyTorch computes it", RuntimeWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """warnings.warn's stacklevel, from say_once, of the first frame whose file is neither mage_tune's nor torch's."""
    skip = (str(Path(__file__).resolve().parents[1]), str(Path(gpu.torch().__file__).resolve().parent))
    level, frame = 1, sys._getframe(1)  # level 1: say_once's own frame
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


def _launched(family: str, *tensors, eps: float | None = None, scalars=None):
    """The family's kernel launched on `tensors` (contiguous: the operators check) with the scalars `scalars()`
    returns (packed; None: the shape's; `eps` the one value in them the tensors' sizes do not fix); None where it
    has no kernel at their shape (said once). A first launch inside a graph capture is not such a case: its
    InputError says to launch once before capturing.

    The first launch at a set of input sizes, dtypes and device goes through the kernel's checked call and binds a
    DirectLaunch for the next ones: their host cost is the lookup, the output's allocation and the driver's launch."""
    try:
        key = (family, eps, _device_index(), *[(t.shape, t.dtype, t.get_device()) for t in tensors])
    except (AssertionError, RuntimeError):  # torch without CUDA: the tensors are on the CPU
        key = None
    launch = _direct.get(key)
    if launch is not None:
        return launch(*tensors)
    if tensors[0].device.type != "cuda":  # the operators are registered for the CPU too, for this fallback
        say_once(f"{family} on {tensors[0].device.type} tensors")
        return None
    try:
        found = kernel(family)
        packed = scalars() if scalars is not None else None
        out = found(*tensors, scalars=packed)
        if key not in _direct:
            _direct[key] = found.direct(*tensors, scalars=packed)
        return out
    except (ConfigError, ToolchainError) as exc:
        say_once(f"{family} has no kernel for these inputs ({exc})")
        return None


_device_index = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_library = torch.library.Library("mage_tune", "DEF")


class Operator:
    """An operator of the `mage_tune` library, made by `@_operator(schema)` from its kernel for `backend` (CUDA);
    calling it calls `torch.ops.mage_tune.NAME.default`. `register_fake` and `register_autograd` as on a custom_op."""

    def __init__(self, schema: str, kernel, backend: str = "CUDA"):
        self.name = schema.split("(", 1)[0]
        self.qualname = f"mage_tune::{self.name}"
        _library.define(schema)
        _library.impl(self.name, kernel, backend)
        if backend != "CPU":  # CPU tensors: the kernel's own fallback to PyTorch, said once
            _library.impl(self.name, kernel, "CPU")
        self.op = getattr(torch.ops.mage_tune, self.name).default
        self.kernel = kernel
        self.backend = getattr(torch._C.DispatchKey, backend)
        self.__doc__ = kernel.__doc__

    def __call__(self, *args):
        return self.op(*args)

    def register_fake(self, fake):
        torch.library.register_fake(self.qualname, fake, lib=_library)
        return fake

    def register_autograd(self, backward, setup_context) -> None:
        """torch.library.register_autograd's formula, with a shortcut: a call on the backend's plain tensors that
        needs no gradient (inference, a compiled graph's forward) runs the kernel itself, where torch's autograd
        kernel would redispatch to it (about 4 µs of host time a call). Tracing (fake, functional tensors) and calls
        that need a gradient go through torch's. Whether a keyset's next key is the backend is worked out once per
        keyset (a process meets a few) and looked up by its bits: the keyset arithmetic cost ~2 µs a call."""
        general = _library_autograd.make_autograd_impl(self.op, _library_autograd.Info(backward, setup_context))
        kernel, backend = self.kernel, self.backend
        below_autograd = torch._C._after_autograd_keyset
        grad_enabled, any_requires_grad = torch._C.is_grad_enabled, torch._C._any_requires_grad
        backend_next: dict[int, bool] = {}

        def autograd(keyset, *args):
            bits = keyset.raw_repr()
            direct = backend_next.get(bits)
            if direct is None:
                direct = backend_next[bits] = (keyset & below_autograd).highestPriorityTypeId() == backend
            if direct and not (grad_enabled() and any_requires_grad(*args)):
                return kernel(*args)
            return general(keyset, *args)

        _library.impl(self.name, autograd, "Autograd", with_keyset=True)


def _operator(schema: str):
    return lambda kernel: Operator(schema, kernel)


def _rows(t: Tensor, d: int) -> Tensor:
    """t as rows of d (contiguous t): itself where it is 2-D already (a view costs a few µs of host time)."""
    return t if t.dim() == 2 else t.view(-1, d)


def _shaped(out: Tensor, like: Tensor) -> Tensor:
    """A kernel's rows given `like`'s shape (itself where `like` is 2-D)."""
    return out if like.dim() == 2 else out.view(like.shape)


# --- layer norm -----------------------------------------------------------------------------------------------------
@_operator("layer_norm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor")
def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """y = (x - mean) / sqrt(var + eps) * weight + bias over x's last dimension (FP32 CUDA tensors, weight and bias
    of that dimension)."""
    d = x.shape[-1]
    if x.numel() == 0:
        return torch.empty_like(x)
    if not (x.is_contiguous() and weight.is_contiguous() and bias.is_contiguous()):
        say_once("layer_norm on a tensor that is not contiguous")
        return torch.nn.functional.layer_norm(x, (d,), weight, bias, eps)
    rows = _rows(x, d)
    y = _launched(LAYERNORM, rows, weight, bias, eps=eps, scalars=lambda: (np.int32(rows.shape[0]), np.float32(eps)))
    if y is None:
        return torch.nn.functional.layer_norm(x, (d,), weight, bias, eps)
    return _shaped(y, x)


@layer_norm.register_fake
def _(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return torch.empty_like(x)


def _layer_norm_context(ctx, inputs, output) -> None:
    x, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.eps = eps


def _layer_norm_backward(ctx, grad: Tensor):
    # PyTorch's own backward, from the mean and rstd recomputed (the forward kernel keeps neither)
    x, weight, bias = ctx.saved_tensors
    d = x.shape[-1]
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [d], weight, bias, ctx.eps)
    mask = list(ctx.needs_input_grad[:3])
    gx, gw, gb = torch.ops.aten.native_layer_norm_backward(grad, x, [d], mean, rstd, weight, bias, mask)
    return gx, gw, gb, None


layer_norm.register_autograd(_layer_norm_backward, setup_context=_layer_norm_context)


# --- an embedding lookup and a layer norm, fused ----------------------------------------------------------------------
@_operator("embedding_layer_norm(Tensor table, Tensor index, Tensor weight, Tensor bias, float eps) -> Tensor")
def embedding_layer_norm(table: Tensor, index: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """layer_norm(table[index]) * weight + bias over the table's rows (FP32 CUDA table, int64 indices of any shape):
    the rows are read from the table and never written out. mage_tune/torch/fusion.py puts it where a compiled
    graph looks up an embedding only to normalize it with mage_tune's layer norm."""
    d = table.shape[-1]
    if index.numel() == 0:
        return table.new_empty((*index.shape, d))
    if not (table.is_contiguous() and weight.is_contiguous() and bias.is_contiguous()) or index.dtype != torch.int64:
        say_once("embedding_layer_norm on a table that is not contiguous or indices that are not int64")
        return _embedding_then_norm(table, index, weight, bias, eps)
    flat = index if index.dim() == 1 and index.is_contiguous() else index.reshape(-1).contiguous()
    scalars = lambda: (np.int32(flat.shape[0]), np.int64(table.shape[0]), np.float32(eps))  # noqa: E731
    y = _launched(EMBEDDING_LAYERNORM, table, flat, weight, bias, eps=eps, scalars=scalars)
    if y is None:
        return _embedding_then_norm(table, index, weight, bias, eps)
    return y if flat is index else y.view(*index.shape, d)


@embedding_layer_norm.register_fake
def _(table: Tensor, index: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return table.new_empty((*index.shape, table.shape[-1]))


def _embedding_then_norm(table: Tensor, index: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    fn = torch.nn.functional
    return fn.layer_norm(fn.embedding(index, table), (table.shape[-1],), weight, bias, eps)


def _embedding_layer_norm_context(ctx, inputs, output) -> None:
    table, index, weight, bias, eps = inputs
    ctx.save_for_backward(table, index, weight, bias)
    ctx.eps = eps


def _embedding_layer_norm_backward(ctx, grad: Tensor):
    # the rows looked up again, PyTorch's layer-norm backward on them, their gradients summed into the table's rows
    table, index, weight, bias = ctx.saved_tensors
    d = table.shape[-1]
    x = torch.nn.functional.embedding(index, table)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [d], weight, bias, ctx.eps)
    needs = ctx.needs_input_grad
    mask = [needs[0], needs[2], needs[3]]
    gx, gw, gb = torch.ops.aten.native_layer_norm_backward(grad, x, [d], mean, rstd, weight, bias, mask)
    gtable = None
    if needs[0]:
        gtable = torch.zeros_like(table).index_add_(0, index.reshape(-1), gx.reshape(-1, d))
    return gtable, None, gw, gb, None


embedding_layer_norm.register_autograd(_embedding_layer_norm_backward, setup_context=_embedding_layer_norm_context)


# --- a residual add and a layer norm, fused ---------------------------------------------------------------------------
@_operator("add_layer_norm(Tensor x, Tensor res, Tensor weight, Tensor bias, float eps) -> Tensor")
def add_layer_norm(x: Tensor, res: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """layer_norm(x + res) * weight + bias over the last dimension (FP32 CUDA tensors; res of x's shape, or one row
    of its last dimension added to every row): the sum is never written out. mage_tune/torch/fusion.py puts it where
    a compiled graph adds two tensors (or a Linear its bias) only to normalize the sum."""
    return _add_then_norm(ADD_LAYERNORM, x, res, weight, bias, eps)[0]


@add_layer_norm.register_fake
def _(x: Tensor, res: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return torch.empty_like(x)


@_operator("add_layer_norm_sum(Tensor x, Tensor res, Tensor weight, Tensor bias, float eps) -> (Tensor, Tensor)")
def add_layer_norm_sum(x: Tensor, res: Tensor, weight: Tensor, bias: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(layer_norm(x + res) * weight + bias, x + res): the norm and the sum, for a graph that uses the sum again (a
    pre-norm block's residual stream), in one pass over x and res."""
    y, h = _add_then_norm(ADD_LAYERNORM_SUM, x, res, weight, bias, eps)
    return y, h


@add_layer_norm_sum.register_fake
def _(x: Tensor, res: Tensor, weight: Tensor, bias: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(x)


def _add_then_norm(family: str, x: Tensor, res: Tensor, weight: Tensor, bias: Tensor, eps: float) -> tuple:
    """(y, h) by the family's kernel, or by PyTorch where it does not apply (said once)."""
    d = x.shape[-1]
    if x.numel() == 0:
        return torch.empty_like(x), x + res
    tensors = (x, res, weight, bias)
    vector = family == ADD_LAYERNORM and res.shape != x.shape and tuple(res.shape) == (d,)
    if (x.shape != res.shape and not vector) or not all(t.is_contiguous() for t in tensors):
        say_once(f"{family} on tensors of different shapes or not contiguous")
    else:
        rows = _rows(x, d)
        scalars = lambda: (np.int32(rows.shape[0]), np.float32(eps))  # noqa: E731
        added = res if vector else _rows(res, d)
        family = ADD_VECTOR_LAYERNORM if vector else family
        out = _launched(family, rows, added, weight, bias, eps=eps, scalars=scalars)
        if isinstance(out, dict):
            return _shaped(out["y"], x), _shaped(out["h"], x)
        if out is not None:
            return _shaped(out, x), None
    h = x + res
    return torch.nn.functional.layer_norm(h, (d,), weight, bias, eps), h


def _add_layer_norm_context(ctx, inputs, output) -> None:
    x, res, weight, bias, eps = inputs
    ctx.save_for_backward(x, res, weight, bias)
    ctx.eps = eps


def _add_norm_gradients(ctx, grad_y: Tensor, grad_h: Tensor | None):
    # x and res both get the sum's gradient
    x, res, weight, bias = ctx.saved_tensors
    needs = ctx.needs_input_grad
    gh, gw, gb = _sum_norm_gradients(x + res, weight, bias, ctx.eps, grad_y, grad_h, needs[:2], needs[2:4])
    return (gh if needs[0] else None), (_to_res(gh, res) if needs[1] else None), gw, gb, None


def _sum_norm_gradients(h, weight, bias, eps: float, grad_y, grad_h, needs_sum, needs_affine) -> tuple:
    """(the sum's, weight's, bias's gradients) of layer_norm(h) and h, for the sum formed again from its addends:
    PyTorch's layer-norm backward from the recomputed mean and rstd, plus the gradient of h where it was used on."""
    if grad_y is None:  # only the sum was used on
        return grad_h, None, None
    d = h.shape[-1]
    _, mean, rstd = torch.ops.aten.native_layer_norm(h, [d], weight, bias, eps)
    mask = [any(needs_sum), *needs_affine]
    gh, gw, gb = torch.ops.aten.native_layer_norm_backward(grad_y, h, [d], mean, rstd, weight, bias, mask)
    if gh is not None and grad_h is not None:
        gh = gh + grad_h
    return gh, gw, gb


def _to_res(grad: Tensor, res: Tensor) -> Tensor:
    """The sum's gradient as res's: summed over the rows where res was one row added to each."""
    return grad if grad.shape == res.shape else grad.reshape(-1, res.shape[-1]).sum(0)


def _add_layer_norm_backward(ctx, grad: Tensor):
    return _add_norm_gradients(ctx, grad, None)


def _add_layer_norm_sum_backward(ctx, grad_y: Tensor, grad_h: Tensor):
    return _add_norm_gradients(ctx, grad_y, grad_h)


add_layer_norm.register_autograd(_add_layer_norm_backward, setup_context=_add_layer_norm_context)
add_layer_norm_sum.register_autograd(_add_layer_norm_sum_backward, setup_context=_add_layer_norm_context)


# --- a residual add with a Linear's bias and a layer norm, fused ------------------------------------------------------
@_operator("add_row_layer_norm(Tensor x, Tensor res, Tensor row, Tensor weight, Tensor bias, float eps) -> Tensor")
def add_row_layer_norm(x: Tensor, res: Tensor, row: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """layer_norm(x + (res + row)) * weight + bias over the last dimension (FP32 CUDA tensors; res of x's shape, row
    one row of its last dimension added to every row of res): neither sum is written out. mage_tune/torch/fusion.py
    puts it where a compiled graph adds a Linear's output (its product plus its bias) to x only to normalize it."""
    return _add_row_then_norm(ADD_ROW_LAYERNORM, x, res, row, weight, bias, eps)[0]


@add_row_layer_norm.register_fake
def _(x: Tensor, res: Tensor, row: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return torch.empty_like(x)


@_operator(
    "add_row_layer_norm_sum(Tensor x, Tensor res, Tensor row, Tensor weight, Tensor bias, float eps)"
    " -> (Tensor, Tensor)"
)
def add_row_layer_norm_sum(
    x: Tensor, res: Tensor, row: Tensor, weight: Tensor, bias: Tensor, eps: float
) -> tuple[Tensor, Tensor]:
    """(layer_norm(x + (res + row)) * weight + bias, x + (res + row)): the norm and the sum, for a pre-norm block's
    h = x + Linear(x) (used again), in one pass over x and res."""
    y, h = _add_row_then_norm(ADD_ROW_LAYERNORM_SUM, x, res, row, weight, bias, eps)
    return y, h


@add_row_layer_norm_sum.register_fake
def _(x: Tensor, res: Tensor, row: Tensor, weight: Tensor, bias: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(x)


def _add_row_then_norm(family: str, x: Tensor, res: Tensor, row: Tensor, weight: Tensor, bias: Tensor, eps: float):
    """(y, h) by the family's kernel, or by PyTorch where it does not apply (said once)."""
    d = x.shape[-1]
    if x.numel() == 0:
        return torch.empty_like(x), x + (res + row)
    tensors = (x, res, row, weight, bias)
    if x.shape != res.shape or tuple(row.shape) != (d,) or not all(t.is_contiguous() for t in tensors):
        say_once(f"{family} on tensors of other shapes or not contiguous")
    else:
        rows = _rows(x, d)
        scalars = lambda: (np.int32(rows.shape[0]), np.float32(eps))  # noqa: E731
        out = _launched(family, rows, _rows(res, d), row, weight, bias, eps=eps, scalars=scalars)
        if isinstance(out, dict):
            return _shaped(out["y"], x), _shaped(out["h"], x)
        if out is not None:
            return _shaped(out, x), None
    h = x + (res + row)
    return torch.nn.functional.layer_norm(h, (d,), weight, bias, eps), h


def _add_row_layer_norm_context(ctx, inputs, output) -> None:
    x, res, row, weight, bias, eps = inputs
    ctx.save_for_backward(x, res, row, weight, bias)
    ctx.eps = eps


def _add_row_norm_gradients(ctx, grad_y: Tensor, grad_h: Tensor | None):
    # x and res get the sum's gradient, the row its sum over the rows
    x, res, row, weight, bias = ctx.saved_tensors
    needs = ctx.needs_input_grad
    h = x + (res + row)
    gh, gw, gb = _sum_norm_gradients(h, weight, bias, ctx.eps, grad_y, grad_h, needs[:3], needs[3:5])
    gx = gh if needs[0] else None
    gres = gh if needs[1] else None
    grow = _to_res(gh, row) if needs[2] else None
    return gx, gres, grow, gw, gb, None


def _add_row_layer_norm_backward(ctx, grad: Tensor):
    return _add_row_norm_gradients(ctx, grad, None)


def _add_row_layer_norm_sum_backward(ctx, grad_y: Tensor, grad_h: Tensor):
    return _add_row_norm_gradients(ctx, grad_y, grad_h)


add_row_layer_norm.register_autograd(_add_row_layer_norm_backward, setup_context=_add_row_layer_norm_context)
add_row_layer_norm_sum.register_autograd(_add_row_layer_norm_sum_backward, setup_context=_add_row_layer_norm_context)


# --- FP32 matmul ------------------------------------------------------------------------------------------------------
@_operator("matmul_fp32(Tensor a, Tensor b) -> Tensor")
def matmul_fp32(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for FP32 CUDA matrices, accurate to FP32 (three TF32 tensor-core products: on Hopper the wgmma family
    mage_tune/kernels/matmul_3xtf32_sm90.py, elsewhere or where it has no kernel matmul-3xtf32)."""
    m, n = a.shape[0], b.shape[1]
    if a.numel() == 0 or b.numel() == 0:
        return torch.zeros((m, n), dtype=a.dtype, device=a.device)
    if not (a.is_contiguous() and b.is_contiguous()):
        say_once("matmul_fp32 on a matrix that is not contiguous")
        return _fp32_matmul(a, b)
    c = _launched(MATMUL_FP32_SM90, a, b) if _is_hopper(a.device) else None
    if c is None:
        c = _launched(MATMUL_FP32, a, b)
    return _fp32_matmul(a, b) if c is None else c


_hopper: dict[int, bool] = {}


def _is_hopper(device) -> bool:
    """Whether the device runs sm_90a code (compute capability 9.0): the wgmma family's, else matmul-3xtf32's."""
    if device.type != "cuda":
        return False
    index = device.index if device.index is not None else _device_index()
    found = _hopper.get(index)
    if found is None:
        found = _hopper[index] = torch.cuda.get_device_capability(index) == (9, 0)
    return found


@matmul_fp32.register_fake
def _(a: Tensor, b: Tensor) -> Tensor:
    torch._check(a.shape[1] == b.shape[0], lambda: f"matmul_fp32: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    return a.new_empty((a.shape[0], b.shape[1]))


def _fp32_matmul(a: Tensor, b: Tensor) -> Tensor:
    """cuBLAS in FP32 whatever torch's TF32 setting: the operator promises FP32 accuracy."""
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed


def _matmul_context(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx, grad: Tensor):
    # the gradients through the same FP32-accurate operator
    a, b = ctx.saved_tensors
    ga = matmul_fp32(grad.contiguous(), b.t().contiguous()) if ctx.needs_input_grad[0] else None
    gb = matmul_fp32(a.t().contiguous(), grad.contiguous()) if ctx.needs_input_grad[1] else None
    return ga, gb


matmul_fp32.register_autograd(_matmul_backward, setup_context=_matmul_context)
