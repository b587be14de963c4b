"""Where the host's time goes when PyTorch calls a tuned kernel, on a GPU.

1. Host time per eager call (tiny inputs, so the GPU idles and what is timed is the host's work), of each layer a
   call of torch.ops.mage_tune.layer_norm passes through: a Python function allocating the output, the same as an
   operator of `torch.library.custom_op` and of a plain `torch.library.Library` definition (with and without an
   autograd kernel), mage_tune's Operator (whose autograd kernel runs a call needing no gradient itself),
   torch.empty, the current stream's handle, the tuned kernel called directly, the operator, and PyTorch's own layer
   norm for scale; the FP32 matmul operator beside torch.mm.
2. A compiled model (embedding → LayerNorm → Linear → LayerNorm, `--rows` tokens, `--d`) with PyTorch's layer norm,
   with mage_tune.torch.LayerNorm, and with it and mage_tune.torch.Linear: host time per forward (the wall time of
   `--calls` forwards queued without a sync, the GPU's queue deep enough not to throttle them is not guaranteed: the
   profile says more), the profiler's table of host time by operator and cProfile's by Python function for each,
   written to `--out` with the call costs as JSON.

    python benchmarks/host_cost.py --out host.json [--rows 8192] [--d 768]
"""

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

from torch_model import call_overhead_us  # this folder is the script's: sys.path[0]

from mage_tune.outputs import refuse_existing


def dispatch_layers(torch) -> dict[str, object]:
    """Operators that only allocate their output, one per way of defining one: the dispatcher's own cost."""
    tensor = torch.Tensor

    def alloc(x, w, b, eps):
        return torch.empty_like(x)

    @torch.library.custom_op("mage_host::custom_op", mutates_args=(), device_types="cuda")
    def custom(x: tensor, w: tensor, b: tensor, eps: float) -> tensor:
        return torch.empty_like(x)

    @torch.library.custom_op("mage_host::custom_op_autograd", mutates_args=(), device_types="cuda")
    def custom_autograd(x: tensor, w: tensor, b: tensor, eps: float) -> tensor:
        return torch.empty_like(x)

    custom_autograd.register_autograd(lambda ctx, g: (g, None, None, None), setup_context=lambda ctx, i, o: None)
    lib = torch.library.Library("mage_host", "FRAGMENT")
    for name in ("plain", "plain_autograd"):
        lib.define(f"{name}(Tensor x, Tensor w, Tensor b, float eps) -> Tensor")
        lib.impl(name, alloc, "CUDA")
    torch.library.register_autograd(
        "mage_host::plain_autograd", lambda ctx, g: (g, None, None, None), setup_context=lambda ctx, i, o: None
    )
    from mage_tune.torch.ops import Operator

    shortcut = Operator("host_probe_autograd(Tensor x, Tensor w, Tensor b, float eps) -> Tensor", alloc)
    shortcut.register_autograd(lambda ctx, g: (g, None, None, None), setup_context=lambda ctx, i, o: None)
    return {
        "python function": alloc,
        "custom_op": torch.ops.mage_host.custom_op.default,
        "custom_op with autograd": torch.ops.mage_host.custom_op_autograd.default,
        "Library op": torch.ops.mage_host.plain.default,
        "Library op with autograd": torch.ops.mage_host.plain_autograd.default,
        "mage_tune Operator with autograd": shortcut.op,
    }, lib


def call_costs(torch, mt, d: int) -> dict[str, float]:
    from mage_tune.measure.streams import raw_stream

    x, w, b = torch.randn(8, d, device="cuda"), torch.ones(d, device="cuda"), torch.zeros(d, device="cuda")
    layers, _lib = dispatch_layers(torch)
    costs = {name: call_overhead_us(torch, fn, (x, w, b, 1e-5)) for name, fn in layers.items()}
    costs["torch.empty"] = call_overhead_us(torch, lambda: torch.empty((8, d), dtype=torch.float32, device=0), ())
    costs["torch.cuda.current_device"] = call_overhead_us(torch, torch.cuda.current_device, ())
    costs["raw_stream"] = call_overhead_us(torch, raw_stream, ())
    kernel = mt.kernel("layernorm")
    costs["tuned kernel called directly"] = call_overhead_us(torch, kernel, (x, w, b))
    op = torch.ops.mage_tune.layer_norm.default
    costs["torch.ops.mage_tune.layer_norm"] = call_overhead_us(torch, op, (x, w, b, 1e-5))
    costs["torch layer_norm"] = call_overhead_us(
        torch, lambda x, w, b: torch.nn.functional.layer_norm(x, (d,), w, b, 1e-5), (x, w, b)
    )
    costs["op_profile"] = profiled(torch, op, (x, w, b, 1e-5))
    # The FP32 matmul operator (on Hopper the wgmma family: a pre-pass, a scratch, tensor maps, two launches)
    a, bt = torch.randn(64, d, device="cuda"), torch.randn(d, d, device="cuda")
    matmul = torch.ops.mage_tune.matmul_fp32.default
    costs["torch.ops.mage_tune.matmul_fp32"] = call_overhead_us(torch, matmul, (a, bt))
    costs["torch.mm"] = call_overhead_us(torch, torch.mm, (a, bt))
    costs["matmul_profile"] = profiled(torch, matmul, (a, bt))
    return costs


def profiled(torch, fn, args, calls: int = 2000) -> str:
    """cProfile's table (by own time) of `calls` calls of fn(*args): Python functions' host time, which torch's
    profiler counts only inside its operators."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        fn(*args)
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
    return text.getvalue()


def model_costs(torch, mt, rows: int, d: int, calls: int) -> dict[str, object]:
    torch.manual_seed(0)
    vocab = 32000
    found: dict[str, object] = {}
    variants = (
        ("torch", torch.nn.LayerNorm, torch.nn.Linear),
        ("mage LN", mt.LayerNorm, torch.nn.Linear),
        ("mage LN+Linear", mt.LayerNorm, mt.Linear),
    )
    for name, norm, linear in variants:
        model = torch.nn.Sequential(torch.nn.Embedding(vocab, d), norm(d), linear(d, d), norm(d)).cuda()
        ids = torch.randint(0, vocab, (rows,), device="cuda")
        fn = torch.compile(model, fullgraph=True)
        with torch.no_grad():
            for _ in range(5):
                fn(ids)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                fn(ids)
            queued = time.perf_counter() - start
            torch.cuda.synchronize()
            total = time.perf_counter() - start
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                for _ in range(20):
                    fn(ids)
                torch.cuda.synchronize()
            python = profiled(torch, fn, (ids,), calls=50)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60)
        found[name] = {"host_us_per_forward": queued * 1e6 / calls, "wall_us_per_forward": total * 1e6 / calls}
        found[name + " profile"] = table
        found[name + " Python profile"] = python  # cProfile: the compiled wrapper's and the operators' own code
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--db", default=None, help="tuning database URL (default: the default database)")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = ap.parse_args()
    refuse_existing("host_cost.py", args.out, force=args.force)
    import torch

    import mage_tune.torch as mt
    from mage_tune.measure.device import environment

    mt.configure(db=args.db)
    record: dict[str, object] = {"environment": environment(), "rows": args.rows, "d": args.d}
    record["calls_us"] = call_costs(torch, mt, args.d)
    record["model"] = model_costs(torch, mt, args.rows, args.d, args.calls)
    args.out.write_text(json.dumps(record, indent=1))
    for name, value in record["calls_us"].items():
        if isinstance(value, float):
            print(f"{name:<34} {value:8.2f} µs a call")
    for name, value in record["model"].items():
        print(f"--- {name}\n{value}" if isinstance(value, str) else f"{name}: {value}")
    print(record["calls_us"]["op_profile"])
    print(record["calls_us"]["matmul_profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
