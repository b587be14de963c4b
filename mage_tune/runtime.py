"""Tuned kernels launched on PyTorch tensors: `kernel = mage_tune.load("layernorm"); y = kernel(x, scale, bias)`.

A `RunnableKernel` is a TunedKernel (tuning/choice.py: which config at which shape, and why) that also launches:
the shape follows from the tensors' dimensions (Family.shape_of), the config is the choice there, built once per
(config, shape, arch) — the compile cache on disk (compile.py) and the loaded kernel kept in the process — and
launched on torch's current stream with the family's own launcher (the harness's: what was measured is what runs).

Under CUDA graph capture a launch is one kernel node on the capturing stream, as any other; only the first launch
at a shape compiles and loads a module, which a capture cannot hold, so that one is refused there with a line that
says to launch once before capturing (torch.compile's "reduce-overhead" and torch.cuda.make_graphed_callables both
run their warm-up launches outside the capture).

Tensors are checked before a launch and never converted: each input on the current CUDA device, contiguous, in the
dtype the family's kernel reads (Family.device_dtype). What a caller cannot launch raises InputError naming the
input; mage_tune.torch's modules check the same conditions first and fall back to PyTorch instead.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from mage_tune import gpu
from mage_tune.arch import get_arch
from mage_tune.errors import InputError
from mage_tune.kernels.base import Family, Shape
from mage_tune.kernels.registry import load_family
from mage_tune.measure import variant_job
from mage_tune.measure.harness import VariantLauncher, make_launcher
from mage_tune.tuning.choice import Choice, TunedKernel, shape_key, shape_text
from mage_tune.tuning.db import TuningDB

__all__ = ["DirectLaunch", "Prepared", "RunnableKernel", "load"]

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Prepared:
    """A shape's launch: the choice, its loaded kernel's launcher and the outputs a launch allocates."""

    choice: Choice
    launcher: object  # callable(bufs[, scalars]) from measure.harness.make_launcher
    written: tuple[tuple[str, tuple[int, ...], object], ...]  # (name, dims, torch dtype) of each output allocated


class RunnableKernel(TunedKernel):
    """A family with its tuning data that launches on tensors: `kernel(x, scale, bias)` (inputs by position in the
    family's parameter order, or by name) returns the output (a dict by name where the family writes several; None
    where every output is in place). `out={"y": t}` (or a tensor) writes into given buffers instead; `shape=` for a
    family whose shape does not follow from its inputs; `scalars=` packed scalars in place of the shape's."""

    def __init__(self, family: Family, db: str | TuningDB | None = None, use_shipped: bool = True):
        super().__init__(family, db, use_shipped)
        self._prepared: dict[tuple[str, int], Prepared] = {}
        self._fast: dict[tuple, Prepared] = {}  # by the inputs' sizes, dtypes and device: a launch's quick way in
        self._lock = threading.Lock()

    @functools.cached_property
    def inputs(self) -> tuple[str, ...]:
        """The kernel parameters a caller gives, in order: the pointers that are no written output (in-place
        outputs included). A family launched through its own JIT (Triton) names none: it is not launched here."""
        family = self.family
        written = {o.name for o in family.output_list() if not o.inplace}
        names = getattr(family, "param_names", ())
        return tuple(n for n in names if n not in written and not _is_single_output(family, n))

    def __repr__(self) -> str:
        return "Runnable" + super().__repr__()

    def refresh(self) -> None:
        super().refresh()
        self._prepared.clear()
        self._fast.clear()

    # --- launching ------------------------------------------------------------------------------------------------
    def __call__(
        self, *tensors, out=None, shape: Mapping[str, int] | None = None, scalars: tuple | None = None, **named
    ):
        device = gpu.current_device()
        fast = None
        if not named and out is None and shape is None and len(tensors) == len(self.inputs):
            # tensors seen before (same sizes, dtypes, device): checked then, so only their layout is checked now
            try:
                fast = (device, *((t.shape, t.dtype, t.get_device()) for t in tensors))
            except AttributeError:  # not tensors: the checks below say so
                fast = None
        prepared = self._fast.get(fast) if fast is not None else None
        if prepared is not None and all(t.is_contiguous() for t in tensors):
            bufs = dict(zip(self.inputs, tensors, strict=True))
        else:
            bufs = self._bind(tensors, named)
            for name, t in bufs.items():
                self._check_tensor(name, t, device)
            dims = {name: tuple(t.shape) for name, t in bufs.items()}
            at = self.family.shape_from(dict(shape)) if shape is not None else self.family.shape_of(dims)
            prepared = self.prepare(at, device)
            if fast is not None:
                self._fast[fast] = prepared
        outputs = self._outputs(prepared, out, device)
        bufs.update(outputs)
        if scalars is None:
            prepared.launcher(bufs)
        else:
            prepared.launcher(bufs, scalars)
        if not outputs:
            return None
        return outputs if self.family.outputs else next(iter(outputs.values()))

    def direct(self, *tensors, scalars: tuple | None = None) -> DirectLaunch | None:
        """This kernel bound to these tensors' sizes, dtypes and device and to `scalars` (packed; None: the shape's),
        checked and built now, for a caller that launches at them again and again (a PyTorch operator): its call
        costs a few microseconds of host time. A cubin launched by the runtime is bound to its packed scalars (one
        driver call a launch); a family's own launcher (the Hopper families' tensor maps and scratch) is called
        without the checks. None where a scalar is not a numpy scalar (whose C type would be a guess)."""
        device = gpu.current_device()
        bufs = self._bind(tensors, {})
        for name, t in bufs.items():
            self._check_tensor(name, t, device)
        prepared = self.prepare(self.family.shape_of({name: tuple(t.shape) for name, t in bufs.items()}), device)
        launcher = prepared.launcher
        names = (*self.inputs, *(name for name, _, _ in prepared.written))
        if not isinstance(launcher, VariantLauncher):
            return DirectLaunch(self, prepared, None, (), device, scalars)
        bound = launcher.direct.bind(launcher.scalars if scalars is None else scalars)
        if bound is None:
            return None
        order = tuple(names.index(key) for key in launcher.param_keys(set(names)))
        return DirectLaunch(self, prepared, bound, order, device, scalars)

    def prepare(self, shape: Mapping[str, int], device: int | None = None) -> Prepared:
        """The launch at `shape` on `device` (the current one by default): chosen, built and loaded on first use."""
        torch = gpu.torch()
        device = gpu.current_device() if device is None else device
        key = (shape_key(shape), device)
        found = self._prepared.get(key)
        if found is not None:
            return found
        if torch.cuda.is_current_stream_capturing():
            raise InputError(
                f"{self.family.name} {shape_text(shape)}: first launch at this shape inside CUDA graph capture; "
                "launch it once before capturing (it compiles and loads the kernel then)"
            )
        with self._lock:
            if key not in self._prepared:
                self._prepared[key] = self._build(dict(shape))
        return self._prepared[key]

    def _build(self, shape: Shape) -> Prepared:
        choice = self.choice(shape)
        variant = self.family.build(choice.config, shape, get_arch(choice.arch))  # the choice keeps the name
        torch = gpu.torch()
        written = tuple(
            (name, tuple(dims), getattr(torch, self.family.device_dtype(name)))
            for name, dims in self.family.output_shapes(shape).items()
        )
        return Prepared(choice, make_launcher(variant_job(variant), self.family, shape), written)

    def _bind(self, tensors: tuple, named: dict) -> dict:
        if not self.inputs:
            raise InputError(f"{self.family.name} names no kernel parameters (param_names): it is not launched here")
        if len(tensors) > len(self.inputs):
            raise InputError(
                f"{self.family.name} takes {len(self.inputs)} inputs ({', '.join(self.inputs)}); given {len(tensors)}"
            )
        bufs = dict(zip(self.inputs, tensors, strict=False))
        for name, t in named.items():
            if name not in self.inputs:
                raise InputError(f"{self.family.name} has no input {name!r}; its inputs are {', '.join(self.inputs)}")
            if name in bufs:
                raise InputError(f"{self.family.name}: input {name} given twice")
            bufs[name] = t
        missing = [n for n in self.inputs if n not in bufs]
        if missing:
            raise InputError(f"{self.family.name}: input {', '.join(missing)} not given")
        return bufs

    def _check_tensor(self, name: str, t, device: int) -> None:
        torch = gpu.torch()
        if not isinstance(t, torch.Tensor):
            raise InputError(f"{self.family.name}: input {name} is a {type(t).__name__}, not a torch.Tensor")
        if t.device.type != "cuda" or t.device.index != device:
            raise InputError(f"{self.family.name}: input {name} is on {t.device}, not on cuda:{device}")
        want = self.family.device_dtype(name)
        if str(t.dtype) != f"torch.{want}":
            raise InputError(f"{self.family.name}: input {name} is {t.dtype}; the kernel reads {want}")
        if not t.is_contiguous():
            raise InputError(f"{self.family.name}: input {name} is not contiguous (the kernel reads it row-major)")

    def _outputs(self, prepared: Prepared, out, device: int) -> dict:
        torch = gpu.torch()
        if out is None:
            return {name: torch.empty(dims, dtype=dtype, device=device) for name, dims, dtype in prepared.written}
        names = [w[0] for w in prepared.written]
        given = out if isinstance(out, Mapping) else ({names[0]: out} if len(names) == 1 else None)
        if given is None or sorted(given) != sorted(names):
            raise InputError(f"{self.family.name}: out= must give the outputs {', '.join(names)}")
        for name, dims, dtype in prepared.written:
            t = given[name]
            if tuple(t.shape) != dims or t.dtype != dtype or not t.is_contiguous():
                raise InputError(
                    f"{self.family.name}: out {name} must be a contiguous {dtype} tensor of {dims}; "
                    f"given {t.dtype} {tuple(t.shape)}"
                )
            if t.device.type != "cuda" or t.device.index != device:
                raise InputError(f"{self.family.name}: out {name} is on {t.device}, not on cuda:{device}")
        return dict(given)


class DirectLaunch:
    """A tuned kernel's launch at one set of input sizes, dtypes, device and scalars, checked when it was made
    (RunnableKernel.direct): `launch(*tensors)` allocates the outputs, launches on the current stream (by the bound
    driver call, or where there is none, or this thread has no CUDA context yet, by the launcher) and returns what
    the kernel's own call would. It checks nothing: the caller keys it by the inputs' sizes, dtypes and
    device and gives contiguous tensors (mage_tune.torch's operators do)."""

    def __init__(self, kernel: RunnableKernel, prepared: Prepared, bound, order: tuple[int, ...], device: int, scalars):
        torch = gpu.torch()
        self._kernel = kernel
        self._prepared = prepared
        self._bound = bound
        self._order = order
        self._device = device
        self._scalars = scalars
        self._written = tuple((dims, dtype) for _, dims, dtype in prepared.written)
        self._names = tuple(name for name, _, _ in prepared.written)
        self._several = bool(kernel.family.outputs)
        self._empty = torch.empty
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton's launcher asks
        self._stream = raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)

    def __call__(self, *tensors):
        device = self._device
        empty = self._empty
        outputs = [empty(dims, dtype=dtype, device=device) for dims, dtype in self._written]
        every = (*tensors, *outputs)
        if self._bound is None or not self._bound([every[i].data_ptr() for i in self._order], self._stream(device)):
            # a family's own launcher, or no CUDA context on this thread yet (the launcher's path makes torch's current)
            bufs = dict(zip((*self._kernel.inputs, *self._names), every, strict=True))
            if self._scalars is None:
                self._prepared.launcher(bufs)
            else:
                self._prepared.launcher(bufs, self._scalars)
        if not outputs:
            return None
        return dict(zip(self._names, outputs, strict=True)) if self._several else outputs[0]


def _is_single_output(family: Family, name: str) -> bool:
    """A family without declared outputs writes its one parameter that is no input: make_inputs does not give it.
    The harness calls it "__out__"; here it is the parameter named neither an input by shape_of's input_dims nor
    in-place (layernorm's y, a matmul's C)."""
    if family.outputs:
        return False
    declared = family.input_dims
    if declared:
        return name not in declared
    return name == family.param_names[-1]


def load(family: str | Family, db: str | TuningDB | None = None, use_shipped: bool = True) -> RunnableKernel:
    """A family (a built-in name, a family file `path/family.py[:NAME]`, an entry point, or a Family) with its
    tuning data: `mage_tune.load("layernorm").choice({"m": 4096, "d": 768})` says which config runs at a shape (no
    GPU needed), and calling it launches that config on tensors."""
    found = load_family(family) if isinstance(family, str) else family
    return RunnableKernel(found, db, use_shipped)
