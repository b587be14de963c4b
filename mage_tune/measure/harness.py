"""GPU side of a measurement batch; runs inside a worker process (see worker.py), never in the CLI process.

Order per job: correctness first (fresh random inputs, written outputs poisoned with NaN, in-place buffers restored
from a pristine copy, each output compared with its float64 reference in its own metric), and only a job that
passes is timed (a context-only baseline also when over its tolerance, its outputs written and finite): a CUDA
graph of many launches replayed several rounds, per regime, cold (rotating over enough buffer sets to defeat the
L2) and/or hot (one buffer set). Every graph is checked to really contain the kernels: a written output is poisoned
before a replay and must be written by it (a family whose outputs are all in-place: the replay must change an
in-place buffer).

A family with in-place outputs is timed a buffer set per launch: every set is restored from the pristine copy before
each replay, outside the timed events, so every launch takes one step from the same state; after timing, each set
used must hold exactly that one step.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mage_tune import gpu
from mage_tune.arch import SM_COUNT_UNKNOWN_PART
from mage_tune.cuda_driver import KernelLaunch
from mage_tune.errors import ConfigError
from mage_tune.kernels import load_family
from mage_tune.kernels.base import OUT, accuracy_baseline
from mage_tune.measure import baselines, ceilings, checks, shipped
from mage_tune.measure.records import Job, OutputCheck, Plan, Result, Session, Timing
from mage_tune.measure.streams import raw_stream, torch_stream

GRAPH_TARGET_US = 3000.0  # work per graph replay: long enough that event resolution and replay overhead vanish
MAX_LAUNCHES = 200
MAX_SET_BYTES_TOTAL = 8 * 2**30
MIN_INPLACE_SETS = 10  # launches per cold graph of an in-place family (a set each), where memory allows


# A CUDA error that leaves the context unusable: every later call in the process fails, so its worker is replaced
STICKY_ERRORS = (
    "illegal",
    "Illegal",
    "ILLEGAL",
    "LaunchFailure",
    "LAUNCH_FAILED",
    "unspecified launch",
    "misaligned",
    "Misaligned",
    "LaunchTimeout",
    "hardware stack error",
    "HardwareStackError",
)


def is_sticky(error: str) -> bool:
    """Whether an error's text is a sticky CUDA error's (STICKY_ERRORS)."""
    return any(s in error for s in STICKY_ERRORS)


class GraphEmpty(RuntimeError):
    """A captured graph that did not write its output: timing it would measure nothing."""


def _torch():
    torch = gpu.torch()
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32: cuBLAS without TF32
    torch.backends.cudnn.allow_tf32 = False
    return torch


class Buffers:
    """Input/output buffer sets on the GPU: set 0 holds the checked inputs; the others are copies for rotation.

    Inputs go to the device in the family's dtype for each (`device_dtype`); `host` holds them as the device does
    (rounded to that dtype, as float32; integer inputs as they are), so the float64 reference is computed from
    exactly what the kernel reads.
    Each written output has a buffer per set under its name ("__out__" for a family that declares no outputs). An
    in-place output is an input (make_inputs gives it): `pristine` keeps its first value on the device, and
    `restore` puts it back into sets before a launch."""

    def __init__(self, family, shape: dict, seed: int, sets: int):
        torch = _torch()
        rng = np.random.default_rng(seed)
        made = family.make_inputs(shape, rng)
        first = {k: torch.from_numpy(v).cuda().to(_dtype(family.device_dtype(k))) for k, v in made.items()}
        integer = {k for k in first if family.device_dtype(k).startswith("int")}
        self.host = {k: (v if k in integer else v.float()).cpu().numpy() for k, v in first.items()}
        self.outputs = tuple(o.name for o in family.output_list())
        self.inplace = tuple(family.inplace_names())
        missing = [n for n in self.inplace if n not in first]
        if missing:
            raise ConfigError(
                f"{family.name}: in-place output {', '.join(missing)} is not among make_inputs' buffers "
                f"({', '.join(first)}): an in-place output's value before the step is an input"
            )
        written = family.output_shapes(shape)
        self.written = tuple(written)
        self.sets = [first] + [{k: v.clone() for k, v in first.items()} for _ in range(sets - 1)]
        for s in self.sets:
            for name, dims in written.items():
                s[name] = torch.empty(tuple(dims), dtype=_dtype(family.device_dtype(name)), device="cuda")
        self.pristine = {n: first[n].clone() for n in self.inplace}
        self.bytes_per_set = sum(v.numel() * v.element_size() for v in self.sets[0].values())

    def restore(self, sets: list[dict]) -> None:
        """The in-place buffers of `sets` back to their pristine values, on torch's current stream (ordered before
        whatever is launched or recorded next on it)."""
        for s in sets:
            for name in self.inplace:
                s[name].copy_(self.pristine[name])


DEVICE_DTYPES = ("float32", "bfloat16", "float16", "int32", "int64")  # what Family.device_dtype may answer


def _dtype(name: str):
    torch = _torch()
    if name not in DEVICE_DTYPES:
        raise ValueError(f"device dtype {name!r} is not one of {', '.join(DEVICE_DTYPES)}")
    return getattr(torch, name)


def load_kernel(cubin: bytes, kernel_name: str, dynamic_shared: int = 0):
    """The cupy function of `kernel_name` in `cubin`, allowed the dynamic shared memory its launches ask for."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        module = gpu.cupy().RawModule(path=f.name)
        fn = module.get_function(kernel_name)  # loads the file now, while it exists
    if dynamic_shared:
        # Past 48 KB of static + dynamic shared memory a block needs the opt-in, so 48 KB of dynamic with any
        # static needs it too; asking for exactly the launch's dynamic size is always allowed.
        fn.max_dynamic_shared_size_bytes = dynamic_shared
    return module, fn


class VariantLauncher:
    """A variant's cubin launched with a pointer per `param_names` (inputs and outputs by name; a family without
    `outputs`: its one other name is the output, "__out__"), then its scalars packed as their declared C types."""

    def __init__(self, job: Job, family, shape: dict):
        self.module, self.fn = load_kernel(job.cubin, job.kernel_name, job.dynamic_shared)
        self.job = job
        self.family = family
        packed = getattr(family, "packed_scalars", None)
        self.scalars = tuple(packed(shape)) if packed is not None else tuple(family.scalar_args(shape))
        self.keys: tuple[str, ...] | None = None
        # through the driver: a few µs of host time a launch, where cupy's path costs about 20 (a PyTorch operator
        # launches once per call); cupy's where this thread has no CUDA context yet. RawKernel.kernel: its Function
        self.direct = KernelLaunch(self.fn.kernel.ptr, job.grid, job.block, job.dynamic_shared)  # its CUfunction

    def param_keys(self, names) -> tuple[str, ...]:
        """The buffer name each kernel parameter takes, in parameter order, given the names of the buffers at hand."""
        bufs = names
        keys = []
        for name in self.family.param_names:
            if name in bufs:
                keys.append(name)
            elif not self.family.outputs and OUT in bufs:
                keys.append(OUT)
            else:
                raise ConfigError(
                    f"{self.family.name}: kernel parameter {name!r} is neither an input nor an output "
                    f"(buffers: {', '.join(bufs)})"
                )
        return tuple(keys)

    def __call__(self, bufs: dict, scalars: tuple | None = None) -> None:
        """Launch on `bufs` (tensors by name) on torch's current stream; `scalars` (packed) in place of the shape's."""
        if self.keys is None:
            self.keys = self.param_keys(bufs)
        pointers = [bufs[key].data_ptr() for key in self.keys]
        packed = self.scalars if scalars is None else scalars
        if self.direct.launch(pointers, packed, raw_stream()):
            return
        args = [np.uint64(p) for p in pointers]
        with torch_stream():
            self.fn(self.job.grid, self.job.block, (*args, *packed), shared_mem=self.job.dynamic_shared)


def make_launcher(job: Job, family, shape: dict) -> Callable[[dict], None]:
    """A variant launches as its cubin, unless its family launches its own (a Triton family: through its JIT)."""
    if job.kind == "variant":
        return family.launcher(job, shape) or VariantLauncher(job, family, shape)
    return baselines.launcher(job, family, shape)


def launch_geometry(launch, job: Job) -> dict:
    """What a launcher knows of its launches beyond the job: the grid it launches where that is not the job's, and
    the blocks of its clusters resident at once (matmul-bf16's TensorMapLauncher); nothing for any other."""
    found: dict = {}
    grid = getattr(launch, "grid", None)
    if isinstance(grid, tuple) and len(grid) == 3 and grid != tuple(job.grid):  # a record's grids have three dims
        found["launched_grid"] = tuple(int(g) for g in grid)
    resident = getattr(launch, "resident_blocks", None)
    if isinstance(resident, int) and not isinstance(resident, bool):
        found["resident_blocks"] = resident
    return found


def returned_outputs(returned, names: tuple[str, ...]) -> dict:
    """What a launch returned, by output name: a tensor is the (first) output, a dict names its outputs."""
    if returned is None:
        return {}
    if isinstance(returned, dict):
        unknown = sorted(set(returned) - set(names))
        if unknown:
            raise ConfigError(f"a launcher returned {', '.join(unknown)}; the outputs are {', '.join(names)}")
        return dict(returned)
    return {names[0]: returned}


@dataclass(frozen=True)
class Checked:
    """A job's check: every output's, the largest relative L2 and absolute errors over them (NaN where one is not
    finite), and the failing outputs' reasons ("" when all pass)."""

    ok: bool
    rel_err: float
    max_abs_err: float
    why: str
    outputs: tuple[OutputCheck, ...]


def check_outputs(launch: Callable[[dict], object], family, shape: dict, bufs: Buffers, references: dict) -> Checked:
    """Launch once on set 0 (written outputs poisoned with NaN, in-place buffers restored) and compare each output
    named in `references` with it, in the output's metric at its tolerance."""
    torch = _torch()
    first = bufs.sets[0]
    for name in bufs.written:
        first[name].fill_(float("nan"))
    bufs.restore([first])
    returned = returned_outputs(launch(first), bufs.outputs)
    torch.cuda.synchronize()
    compared = []
    for output in family.output_list():
        if output.name not in references:
            continue
        got = returned.get(output.name, first.get(output.name))
        if got is None:
            raise ConfigError(f"{family.name}: no buffer holds output {output.name!r}")
        compared.append(
            checks.compare(
                output.name,
                output.metric,
                got.double().cpu().numpy(),
                references[output.name],
                family.tolerance_of(output, shape),
                family.device_dtype(output.name),
            )
        )
    rel = max((c.rel_l2 for c in compared), default=0.0)
    max_abs = max((c.max_abs for c in compared), default=0.0)
    if any(math.isnan(c.rel_l2) for c in compared):
        rel = max_abs = math.nan
    whys = [c.why for c in compared if c.why]
    return Checked(not whys, rel, max_abs, "; ".join(whys), tuple(c.check for c in compared))


def accuracy_bar(family, shape: dict, bufs: Buffers, references: dict) -> tuple[str, float] | None:
    """(label, error) of the baseline whose error on these inputs no variant may exceed (the first of the kind the
    family's `accuracy_bar` names at this shape), checked like any job; None where it names none, or that baseline
    is not there, fails its own check or cannot run (nothing to hold the variants to). The family's own hooks'
    errors reach the caller."""
    found = accuracy_baseline(family, shape)
    if found is None:
        return None
    job = Job(label=found.label, kind=found.kind, config=dict(found.config))
    try:
        checked = check_outputs(baselines.launcher(job, family, shape), family, shape, bufs, references)
    except Exception as error:  # one that cannot run holds the variants to the tolerance alone; its own job says why
        said = f"{type(error).__name__}: {error}"
        if is_sticky(said):  # the context is gone: the worker is replaced, as for any job; whose error it was, said
            raise RuntimeError(f"{found.label}, the accuracy bar's baseline: {said}") from error
        return None
    return (found.label, checked.rel_err) if checked.ok else None


def over_bar(checked: Checked, bar: tuple[str, float] | None) -> str:
    """Why a variant that passed its tolerance fails the family's accuracy bar ("" where it does not)."""
    if bar is None or not checked.rel_err > bar[1]:
        return ""
    label, error = bar
    return f"relative error {checked.rel_err:.2e} is over {label}'s {error:.2e} on the same inputs (the accuracy bar)"


def check(launch: Callable[[dict], object], family, shape: dict, bufs: Buffers, reference) -> tuple:
    """(ok, rel_err, max_abs_err, why) of check_outputs; `reference` is the family's reference() (an array for one
    output) or a dict by output name."""
    references = reference if isinstance(reference, dict) else {bufs.outputs[0]: reference}
    checked = check_outputs(launch, family, shape, bufs, references)
    return checked.ok, checked.rel_err, checked.max_abs_err, checked.why


def context_only(job: Job, checked: Checked) -> bool:
    """Whether a failed check leaves the job timed: a context-only baseline whose outputs were all written and finite
    (its error may be over the tolerance; that is what it is timed beside the others to show)."""
    return baselines.is_context(job) and not math.isnan(checked.rel_err)


def time_graph(
    launch: Callable[[dict], object],
    sets: list[dict],
    launches: int,
    rounds: int,
    restore: Callable[[], None] | None = None,
    outputs: tuple[str, ...] = (OUT,),
    inplace: tuple[str, ...] = (),
) -> list[float]:
    """Per-launch µs of `rounds` replays of one graph holding `launches` launches that rotate over `sets`.
    `restore` (in-place buffers) runs before every replay, outside the timed events."""
    torch = _torch()
    graph = torch.cuda.CUDAGraph()
    capture_stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(capture_stream):
        launch(sets[0])  # warm-up outside the graph (Triton compiles here, cuBLAS picks its kernel)
        capture_stream.synchronize()
        with torch.cuda.graph(graph, stream=capture_stream):
            for i in range(launches):
                returned = launch(sets[i % len(sets)])
    torch.cuda.synchronize()
    _probe(graph, returned_outputs(returned, outputs), sets[(launches - 1) % len(sets)], outputs, inplace, restore)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(rounds):
        if restore is not None:
            restore()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1000.0 / launches)
    return out


def _probe(graph, returned: dict, last: dict, outputs: tuple, inplace: tuple, restore) -> None:
    """GraphEmpty unless a replay writes the last launch's outputs: written ones are poisoned with NaN first and one
    at least must be written; where every output is in-place, a replay from the restored state must change one."""
    torch = _torch()
    written = [returned.get(n, last.get(n)) for n in outputs if n not in inplace]
    written = [t for t in written if t is not None]
    if restore is not None:
        restore()
    if written:
        for t in written:
            t.fill_(float("nan"))
        torch.cuda.synchronize()
        graph.replay()
        torch.cuda.synchronize()
        # any output written will do: a copy baseline writes one output of several
        if all(bool(torch.isnan(t).all()) for t in written):
            raise GraphEmpty("the captured graph did not write its output (kernels launched off the capture stream?)")
        return
    stepped = [returned.get(n, last[n]) for n in inplace]
    torch.cuda.synchronize()
    before = [t.clone() for t in stepped]
    graph.replay()
    torch.cuda.synchronize()
    if all(torch.equal(a, b) for a, b in zip(before, stepped, strict=True)):
        raise GraphEmpty(
            "the captured graph did not change its in-place buffers (kernels launched off the capture stream?)"
        )


def single_launch_us(
    launch: Callable[[dict], None], bufs: dict, repeats: int = 20, restore: Callable[[], None] | None = None
) -> float:
    """One launch timed by events around it, as a naive benchmark would: launch latency included. `restore`
    (in-place buffers) runs before each launch, outside the events."""
    torch = _torch()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        if restore is not None:
            restore()
        torch.cuda.synchronize()
        start.record()
        launch(bufs)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(samples)


def one_step_after_timing(family, shape: dict, bufs: Buffers, sets: list[dict], checked: dict, references: dict) -> str:
    """Why the sets a timed graph used do not each hold exactly one step from the pristine inputs ("" when they
    do): each in-place buffer must equal set 0's after the check, or, for a kernel that is not bitwise
    deterministic, be within its output's tolerance of the reference."""
    torch = _torch()
    torch.cuda.synchronize()
    by_name = {o.name: o for o in family.output_list()}
    for index, s in enumerate(sets):
        for name in bufs.inplace:
            if torch.equal(s[name], checked[name]):
                continue
            output = by_name[name]
            near = checks.compare(
                name,
                output.metric,
                s[name].double().cpu().numpy(),
                references[name],
                family.tolerance_of(output, shape),
                family.device_dtype(name),
            )
            if not near.check.ok:
                return (
                    f"in-place buffer {name} of set {index} is not one step from the pristine inputs after timing "
                    "(not restored before a launch?)"
                )
    return ""


def plan_launches(single_us: float) -> int:
    return int(max(10, min(MAX_LAUNCHES, GRAPH_TARGET_US / max(single_us, 1.0))))


class Runner:
    """Holds one session's buffers and references; measures jobs one by one."""

    def __init__(self, plan: Plan, session_index: int):
        self.plan = plan
        self.family = load_family(plan.family)
        self.session_index = session_index
        inplace = bool(self.family.inplace_names())
        probe = Buffers(self.family, plan.shape, plan.seed, 1)
        per_set = probe.bytes_per_set
        del probe
        sets_for_cold = max(2, math.ceil(plan.cold_bytes / per_set))
        if inplace:  # a set per launch: enough launches per graph that a replay's overhead is spread thin
            sets_for_cold = max(sets_for_cold, MIN_INPLACE_SETS)
        sets_for_cold = min(sets_for_cold, MAX_LAUNCHES, max(2, MAX_SET_BYTES_TOTAL // per_set))
        want = sets_for_cold if "cold" in plan.regimes else 1
        self.bufs = Buffers(self.family, plan.shape, plan.seed, want)
        # from the pristine inputs: an in-place output's reference is one step from them
        self.references = self.family.references(self.bufs.host, plan.shape)
        self._bar: tuple[str, float] | None = None
        self._bar_checked = False

    def bar(self) -> tuple[str, float] | None:
        """The family's accuracy bar on this session's inputs, checked once, when the first variant needs it."""
        if not self._bar_checked:  # a family hook that raises fails each variant alike, saying so, until mended
            self._bar = accuracy_bar(self.family, self.plan.shape, self.bufs, self.references)
            self._bar_checked = True
        return self._bar

    def run(self, job: Job) -> Result:
        base = {
            "label": job.label,
            "kind": job.kind,
            "session": self.session_index,
            "config": job.config,
            "cubin_sha256": job.cubin_sha256,
        }
        family, shape, bufs = self.family, self.plan.shape, self.bufs
        launch = make_launcher(job, family, shape)
        base |= launch_geometry(launch, job)
        if job.expect:  # a copy is checked as a copy: its output must equal the input it copies
            references = {baselines.copy_target(family, shape): bufs.host[job.expect].astype(np.float64)}
        else:
            references = self.references
        # the bar's baseline runs first: what the variant's check leaves in set 0 (an in-place step) is then its own
        bar = self.bar() if job.kind == "variant" and not job.expect and not shipped.is_shipped(job) else None
        checked = check_outputs(launch, family, shape, bufs, references)
        found = {"rel_err": checked.rel_err, "max_abs_err": checked.max_abs_err, "outputs": checked.outputs}
        if not checked.ok and not context_only(job, checked):
            return Result(ok=False, error=checked.why, **found, **base)
        over = over_bar(checked, bar)
        if over:
            return Result(ok=False, error=over, **found, **base)
        # a context-only baseline over the tolerance is timed all the same; why its check failed stays in `error`
        found["error"] = checked.why
        if not self.plan.timed:
            return Result(ok=True, **found, **base)
        inplace = bufs.inplace
        after_check = {n: bufs.sets[0][n].clone() for n in inplace}
        restore_first = (lambda: bufs.restore(bufs.sets[:1])) if inplace else None
        single = single_launch_us(launch, bufs.sets[0], restore=restore_first)
        timings = []
        for regime in self.plan.regimes:
            sets = bufs.sets if regime == "cold" else bufs.sets[:1]
            # in-place: a set per launch, every set restored before each replay
            launches = len(sets) if inplace else plan_launches(single)
            restore = (lambda sets=sets: bufs.restore(sets)) if inplace else None
            samples = time_graph(launch, sets, launches, self.plan.rounds, restore, bufs.outputs, inplace)
            if inplace:
                why = one_step_after_timing(family, shape, bufs, sets, after_check, self.references)
                if why:
                    return Result(ok=False, **{**found, "error": why}, **base)
            timings.append(
                Timing(
                    regime,
                    statistics.median(samples),
                    min(samples),
                    max(samples),
                    launches,
                    len(sets),
                    self.plan.rounds,
                )
            )
        return Result(ok=True, timings=tuple(timings), single_launch_us=single, **found, **base)


def measure_session(index: int, environment: dict) -> Session:
    """Copy bandwidth (best of several kernels, and torch's copy_ as an ordinary launch), FP32 rate, control."""
    torch = _torch()
    module = gpu.cupy().RawModule(code=ceilings.COPY_SOURCE, options=("-std=c++17",))
    n4 = ceilings.COPY_BYTES // 16
    src = torch.empty(ceilings.COPY_BYTES // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    sms = environment.get("sm_count", SM_COUNT_UNKNOWN_PART)
    kernels = {
        "copy_grid_stride": (module.get_function("copy_grid_stride"), (sms * 8, 1, 1), 512),
        "copy_one_per_thread": (module.get_function("copy_one_per_thread"), ((n4 + 255) // 256, 1, 1), 256),
        "copy_two_per_thread": (module.get_function("copy_two_per_thread"), ((n4 + 511) // 512, 1, 1), 256),
    }
    sets = [{OUT: dst}]
    results = {}
    control_us = 0.0
    for name, (fn, grid, block) in kernels.items():

        def launch(_bufs, fn=fn, grid=grid, block=block):
            with torch_stream():
                fn(grid, (block, 1, 1), (np.uint64(src.data_ptr()), np.uint64(dst.data_ptr()), np.int64(n4)))

        us = statistics.median(time_graph(launch, sets, 20, 5))
        results[name] = 2 * ceilings.COPY_BYTES / us / 1e3
        if name == "copy_grid_stride":
            control_us = us
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dst.copy_(src)
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        start.record()
        for _ in range(10):
            dst.copy_(src)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 100.0)  # µs per copy
    results["torch_copy_"] = 2 * ceilings.COPY_BYTES / statistics.median(samples) / 1e3
    fma = module.get_function("fma_rate")
    out = torch.empty(sms * 8 * 256, dtype=torch.float32, device="cuda")
    fma((sms * 8, 1, 1), (256, 1, 1), (np.uint64(out.data_ptr()), np.int32(ceilings.FMA_ITERS)))
    torch.cuda.synchronize()
    start.record()
    fma((sms * 8, 1, 1), (256, 1, 1), (np.uint64(out.data_ptr()), np.int32(ceilings.FMA_ITERS)))
    end.record()
    end.synchronize()
    flops = 2.0 * ceilings.FMA_PER_THREAD * sms * 8 * 256
    tflops = flops / (start.elapsed_time(end) * 1e-3) / 1e12
    return Session(index, control_us, max(results.values()), results, tflops, environment)
