"""A small PyTorch model with mage-tune's layer norm, against the same model with PyTorch's, on a GPU.

The model (`--model embedding`, the default): embedding → LayerNorm → Linear → LayerNorm over `--rows` tokens, at
each `--d` (`--model block`: a pre-norm residual block, h = x + Linear(x), LN(h + Linear(LN(h)))); compiled with
torch.compile (default mode), its forward timed end to end (CUDA events around `--calls` forwards, `--rounds`
rounds, the models interleaved round by round; also the host's time queuing them), and again as one captured CUDA
graph of the compiled forward (replays timed). Variants: PyTorch's layer norm ("torch"), mage_tune.torch.LayerNorm
("mage LN": its compiler pass fuses the lookup or the residual adds into the norms, mage_tune/torch/fusion.py), the
same compiled without the pass ("mage LN unfused"), and for context mage_tune.torch.LayerNorm with
mage_tune.torch.Linear ("mage LN+Linear").
Outputs are checked against the torch model's (relative L2). Run at each float32 matmul precision given ("highest":
FP32; "high": TF32 allowed).

Also the operator's own time at each (rows, d): torch.ops.mage_tune.layer_norm timed by the harness's cold method
(measure/harness.py: a CUDA graph of launches rotating over ≥ 256 MB of input sets, median of 7 replays), beside
the same config timed as a variant job in the same process and the time the tuning database recorded for it.

    python benchmarks/torch_model.py --db sqlite:///t.db --out model.json [--d 768 --d 4096] [--rows 8192]
        [--model embedding --model block] [--precision highest]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from mage_tune.outputs import refuse_existing


def _rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def _model(torch, kind: str, ln, linear, vocab: int, d: int):
    """ "embedding": embedding → LN → Linear → LN; "block": a pre-norm residual block, h = x + Linear(x),
    out = h + Linear(LN(h)), then LN(out) (a sum used again, then one that is not)."""
    if kind == "embedding":
        return torch.nn.Sequential(torch.nn.Embedding(vocab, d), ln(d), linear(d, d), ln(d)).cuda()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.f, self.g, self.n1, self.n2 = linear(d, d), linear(d, d), ln(d), ln(d)

        def forward(self, x):
            h = x + self.f(x)
            return self.n2(h + self.g(self.n1(h)))

    return Block().cuda()


def _time_calls(torch, fn, ids, calls: int) -> tuple[float, float]:
    """(µs a forward end to end on the GPU, µs a forward of host time queuing them): where the second is the
    larger the forward is host-bound."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    began = time.perf_counter()
    for _ in range(calls):
        fn(ids)
    queued = time.perf_counter() - began
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / calls, queued * 1e6 / calls


def _graphed(torch, fn, ids, calls: int):
    """The compiled forward captured `calls` times in one CUDA graph (after warm-up launches outside it)."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(ids)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for _ in range(calls):
            out = fn(ids)
    torch.cuda.synchronize()
    return graph, out


def _time_graph(torch, graph, calls: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / calls


def model_rows(torch, mt, kind: str, rows: int, d: int, precision: str, calls: int, rounds: int) -> list[dict]:
    torch.set_float32_matmul_precision(precision)
    torch.manual_seed(0)
    vocab = 32000
    variants = {
        "torch": (torch.nn.LayerNorm, torch.nn.Linear),
        "mage LN": (mt.LayerNorm, torch.nn.Linear),
        "mage LN unfused": (mt.LayerNorm, torch.nn.Linear),
        "mage LN+Linear": (mt.LayerNorm, mt.Linear),
    }
    models = {name: _model(torch, kind, ln, lin, vocab, d) for name, (ln, lin) in variants.items()}
    state = models["torch"].state_dict()
    for m in models.values():
        m.load_state_dict(state)
        m.eval()
    if kind == "embedding":
        ids = torch.randint(0, vocab, (rows,), device="cuda")
    else:
        ids = torch.randn(rows, d, device="cuda")  # the block's input
    torch._dynamo.reset()
    compiled = {name: torch.compile(m, fullgraph=True) for name, m in models.items()}
    out = []
    fused: dict[str, int] = {}
    passes = {
        name: getattr(mt.fusion, name)
        for name in (
            "fuse_embedding_layer_norm",
            "fuse_linear_layer_norm",
            "fuse_add_row_layer_norm",
            "fuse_add_layer_norm",
        )
    }
    with torch.no_grad():
        outputs = {}
        for name, fn in compiled.items():  # the first call compiles: the fusion pass on, except for "unfused"
            counts: list[int] = []
            for attr, fuse in passes.items():  # counted: how many layer norms each pass fused
                setattr(mt.fusion, attr, lambda graph, fuse=fuse, seen=counts: seen.append(fuse(graph)) or seen[-1])
            mt.fusion.install(name != "mage LN unfused")
            try:
                with torch._inductor.config.patch(fx_graph_cache=False):  # compiled here, with the pass as set
                    outputs[name] = fn(ids)
            finally:
                for attr, fuse in passes.items():
                    setattr(mt.fusion, attr, fuse)
                mt.fusion.install()
            fused[name] = sum(counts)
        eager = {name: [] for name in compiled}
        host = {name: [] for name in compiled}
        for _ in range(rounds):
            for name, fn in compiled.items():
                wall, queued = _time_calls(torch, fn, ids, calls)
                eager[name].append(wall)
                host[name].append(queued)
        graphs = {name: _graphed(torch, fn, ids, calls) for name, fn in compiled.items()}
        replayed = {name: [] for name in compiled}
        for _ in range(rounds):
            for name, (graph, _) in graphs.items():
                replayed[name].append(_time_graph(torch, graph, calls))
        for name in compiled:
            graph_out = graphs[name][1]
            out.append(
                {
                    "rows": rows,
                    "d": d,
                    "precision": precision,
                    "kind": kind,
                    "model": name,
                    "norms_fused": fused[name],
                    "compiled_us": statistics.median(eager[name]),
                    "compiled_us_range": [min(eager[name]), max(eager[name])],
                    "compiled_host_us": statistics.median(host[name]),
                    "graph_us": statistics.median(replayed[name]),
                    "graph_us_range": [min(replayed[name]), max(replayed[name])],
                    "rel_err_vs_torch": _rel(outputs[name], outputs["torch"]),
                    "graph_rel_err_vs_torch": _rel(graph_out, outputs["torch"]),
                }
            )
    return out


def call_overhead_us(torch, fn, args, calls: int = 2000) -> float:
    """Wall time per eager call on a tiny input (the GPU idles: what is left is the host's cost of a launch)."""
    import time

    for _ in range(20):
        fn(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6 / calls


def op_row(torch, mt, rows: int, d: int) -> dict:
    from mage_tune.arch import get_arch
    from mage_tune.measure import variant_job
    from mage_tune.measure.harness import Runner, plan_launches, single_launch_us, time_graph
    from mage_tune.measure.records import Plan

    shape = {"m": rows, "d": d}
    kernel = mt.kernel("layernorm")
    choice = kernel.choice(shape)
    runner = Runner(Plan(family="layernorm", shape=shape, jobs=(), regimes=("cold",)), 0)
    sets = runner.bufs.sets

    def op(bufs):
        return torch.ops.mage_tune.layer_norm(bufs["x"], bufs["scale"], bufs["bias"], 1e-5)

    single = single_launch_us(op, sets[0])
    samples = time_graph(op, sets, plan_launches(single), 7)
    variant = kernel.family.build(choice.config, shape, get_arch(choice.arch))
    job = runner.run(variant_job(variant))
    tiny = (torch.randn(8, d, device="cuda"), torch.ones(d, device="cuda"), torch.zeros(d, device="cuda"))
    table, index = torch.randn(64, d, device="cuda"), torch.randint(0, 64, (8,), device="cuda")
    return {
        "rows": rows,
        "d": d,
        "op_call_us": call_overhead_us(torch, lambda *a: torch.ops.mage_tune.layer_norm(*a, 1e-5), tiny),
        "torch_call_us": call_overhead_us(
            torch, lambda x, w, b: torch.nn.functional.layer_norm(x, (d,), w, b, 1e-5), tiny
        ),
        "fused_op_call_us": call_overhead_us(
            torch,
            lambda t, i, w, b: torch.ops.mage_tune.embedding_layer_norm(t, i, w, b, 1e-5),
            (table, index, *tiny[1:]),
        ),
        "direct_call_us": call_overhead_us(torch, kernel, tiny),
        "choice": choice.to_json(),
        "op_us": statistics.median(samples),
        "op_us_range": [min(samples), max(samples)],
        "variant_job_us": job.timings[0].median_us if job.ok else None,
        "variant_job_error": job.error or "",
        "recorded_us": choice.time_us,
        "op_over_recorded": statistics.median(samples) / choice.time_us if choice.time_us else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=None, help="tuning database URL (default: the default database)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--d", type=int, action="append")
    ap.add_argument("--precision", action="append", choices=("highest", "high"))
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--model", action="append", choices=("embedding", "block"), help="default: embedding")
    ap.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = ap.parse_args()
    refuse_existing("torch_model.py", args.out, force=args.force)
    import torch

    import mage_tune.torch as mt
    from mage_tune.measure.device import environment

    mt.configure(db=args.db)
    record = {"environment": environment(), "ops": [], "models": []}
    for d in args.d or [768, 4096]:
        record["ops"].append(op_row(torch, mt, args.rows, d))
        for kind in args.model or ["embedding"]:
            for precision in args.precision or ["highest", "high"]:
                rows = model_rows(torch, mt, kind, args.rows, d, precision, args.calls, args.rounds)
                record["models"].extend(rows)
                args.out.write_text(json.dumps(record, indent=1))  # after each set: a cut run keeps what it measured
    for row in record["ops"]:
        print(
            f"op layernorm m={row['rows']} d={row['d']}: {row['op_us']:.2f} µs; same config as a job "
            f"{row['variant_job_us']}; recorded {row['recorded_us']} ({row['choice']['source']}); eager call "
            f"{row['op_call_us']:.1f} µs (torch's {row['torch_call_us']:.1f}, fused op's "
            f"{row['fused_op_call_us']:.1f}, direct kernel call {row['direct_call_us']:.1f})"
        )
    for row in record["models"]:
        print(
            f"{row['kind']:<9} d={row['d']} {row['precision']:<7} {row['model']:<15} compiled "
            f"{row['compiled_us']:9.1f} µs (host {row['compiled_host_us']:6.1f})  graph {row['graph_us']:9.1f} µs  "
            f"err {row['rel_err_vs_torch']:.1e}  "
            f"fused {row['norms_fused']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
