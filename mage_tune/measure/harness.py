"""GPU side of a measurement batch; runs inside a worker process (see worker.py), never in the CLI process.

Order per job: correctness first (fresh random inputs, outputs poisoned with NaN, float64 reference), and only a
job that passes is timed: a CUDA graph of many launches replayed several rounds, per regime, cold (rotating over
enough buffer sets to defeat the L2) and/or hot (one buffer set). Every graph is checked to really contain the
kernels: its output is poisoned before a replay and must be written by it.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Callable

import numpy as np

from mage_tune import gpu
from mage_tune.kernels import load_family
from mage_tune.measure import baselines, ceilings
from mage_tune.measure.records import Job, Plan, Result, Session, Timing
from mage_tune.measure.streams import torch_stream

GRAPH_TARGET_US = 3000.0  # work per graph replay: long enough that event resolution and replay overhead vanish
MAX_LAUNCHES = 200
MAX_SET_BYTES_TOTAL = 8 * 2**30


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
    (rounded to that dtype, as float32), so the float64 reference is computed from exactly what the kernel reads."""

    def __init__(self, family, shape: dict, seed: int, sets: int):
        torch = _torch()
        rng = np.random.default_rng(seed)
        made = family.make_inputs(shape, rng)
        first = {k: torch.from_numpy(v).cuda().to(_dtype(family.device_dtype(k))) for k, v in made.items()}
        self.host = {k: v.float().cpu().numpy() for k, v in first.items()}
        out_shape = family.output_shape(shape)
        out_dtype = _dtype(family.device_dtype("__out__"))
        self.sets = [first] + [{k: v.clone() for k, v in first.items()} for _ in range(sets - 1)]
        for s in self.sets:
            s["__out__"] = torch.empty(out_shape, dtype=out_dtype, device="cuda")
        self.bytes_per_set = sum(v.numel() * v.element_size() for v in self.sets[0].values())


def _dtype(name: str):
    torch = _torch()
    known = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in known:
        raise ValueError(f"device dtype {name!r} is not one of {', '.join(known)}")
    return known[name]


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
    def __init__(self, job: Job, family, shape: dict):
        self.module, self.fn = load_kernel(job.cubin, job.kernel_name, job.dynamic_shared)
        self.job = job
        self.family = family
        self.scalars = family.scalar_args(shape)

    def __call__(self, bufs: dict) -> None:
        args = [
            np.uint64(bufs[name].data_ptr()) if name in bufs else np.uint64(bufs["__out__"].data_ptr())
            for name in self.family.param_names
        ]
        with torch_stream():
            self.fn(self.job.grid, self.job.block, (*args, *self.scalars), shared_mem=self.job.dynamic_shared)


def make_launcher(job: Job, family, shape: dict) -> Callable[[dict], None]:
    """A variant launches as its cubin, unless its family launches its own (a Triton family: through its JIT)."""
    if job.kind == "variant":
        return family.launcher(job, shape) or VariantLauncher(job, family, shape)
    return baselines.launcher(job, family, shape)


def check(launch: Callable[[dict], object], family, shape: dict, bufs: Buffers, reference: np.ndarray) -> tuple:
    torch = _torch()
    out = bufs.sets[0]["__out__"]
    out.fill_(float("nan"))
    returned = launch(bufs.sets[0])
    out = returned if returned is not None else out
    torch.cuda.synchronize()
    got = out.double().cpu().numpy()
    diff = got - reference
    if not np.all(np.isfinite(got)):
        bad = int(np.count_nonzero(~np.isfinite(got)))
        return False, math.nan, math.nan, f"{bad} of {got.size} outputs not written or not finite"
    rel = float(np.linalg.norm(diff) / max(np.linalg.norm(reference), 1e-300))
    max_abs = float(np.max(np.abs(diff)))
    tolerance = family.tolerance_for(shape)
    ok = rel <= tolerance
    return ok, rel, max_abs, "" if ok else f"relative error {rel:.3g} over tolerance {tolerance:.3g}"


def time_graph(launch: Callable[[dict], None], sets: list[dict], launches: int, rounds: int) -> list[float]:
    """Per-launch µs of `rounds` replays of one graph holding `launches` launches that rotate over `sets`."""
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
    probe = returned if returned is not None else sets[(launches - 1) % len(sets)]["__out__"]
    probe.fill_(float("nan"))
    torch.cuda.synchronize()
    graph.replay()
    torch.cuda.synchronize()
    if torch.isnan(probe).all():
        raise GraphEmpty("the captured graph did not write its output (kernels launched off the capture stream?)")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(rounds):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1000.0 / launches)
    return out


def single_launch_us(launch: Callable[[dict], None], bufs: dict, repeats: int = 20) -> float:
    """One launch timed by events around it, as a naive benchmark would: launch latency included."""
    torch = _torch()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start.record()
        launch(bufs)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(samples)


def plan_launches(single_us: float) -> int:
    return int(max(10, min(MAX_LAUNCHES, GRAPH_TARGET_US / max(single_us, 1.0))))


class Runner:
    """Holds one session's buffers and reference; measures jobs one by one."""

    def __init__(self, plan: Plan, session_index: int):
        self.plan = plan
        self.family = load_family(plan.family)
        self.session_index = session_index
        probe = Buffers(self.family, plan.shape, plan.seed, 1)
        sets_for_cold = max(2, math.ceil(plan.cold_bytes / probe.bytes_per_set))
        sets_for_cold = min(sets_for_cold, MAX_LAUNCHES, max(2, MAX_SET_BYTES_TOTAL // probe.bytes_per_set))
        want = sets_for_cold if "cold" in plan.regimes else 1
        self.bufs = Buffers(self.family, plan.shape, plan.seed, want)
        self.reference = self.family.reference(self.bufs.host, plan.shape)

    def run(self, job: Job) -> Result:
        base = {
            "label": job.label,
            "kind": job.kind,
            "session": self.session_index,
            "config": job.config,
            "cubin_sha256": job.cubin_sha256,
        }
        launch = make_launcher(job, self.family, self.plan.shape)
        # A copy is checked as a copy: the output must equal the input it copies.
        reference = self.bufs.host[job.expect].astype(np.float64) if job.expect else self.reference
        ok, rel, max_abs, why = check(launch, self.family, self.plan.shape, self.bufs, reference)
        if not ok:
            return Result(ok=False, error=why, rel_err=rel, max_abs_err=max_abs, **base)
        if not self.plan.timed:
            return Result(ok=True, rel_err=rel, max_abs_err=max_abs, **base)
        single = single_launch_us(launch, self.bufs.sets[0])
        launches = plan_launches(single)
        timings = []
        for regime in self.plan.regimes:
            sets = self.bufs.sets if regime == "cold" else self.bufs.sets[:1]
            samples = time_graph(launch, sets, launches, self.plan.rounds)
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
        return Result(
            ok=True, rel_err=rel, max_abs_err=max_abs, timings=tuple(timings), single_launch_us=single, **base
        )


def measure_session(index: int, environment: dict) -> Session:
    """Copy bandwidth (best of several kernels, and torch's copy_ as an ordinary launch), FP32 rate, control."""
    torch = _torch()
    module = gpu.cupy().RawModule(code=ceilings.COPY_SOURCE, options=("-std=c++17",))
    n4 = ceilings.COPY_BYTES // 16
    src = torch.empty(ceilings.COPY_BYTES // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    sms = environment.get("sm_count", 132)
    kernels = {
        "copy_grid_stride": (module.get_function("copy_grid_stride"), (sms * 8, 1, 1), 512),
        "copy_one_per_thread": (module.get_function("copy_one_per_thread"), ((n4 + 255) // 256, 1, 1), 256),
        "copy_two_per_thread": (module.get_function("copy_two_per_thread"), ((n4 + 511) // 512, 1, 1), 256),
    }
    sets = [{"__out__": dst}]
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
