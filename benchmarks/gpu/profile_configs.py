"""Configs of a family launched once each inside an NVTX range, for Nsight Compute to read their counters.

Each config (and the family's torch baseline, cuBLAS for a matmul) is built, launched WARMUP times, checked against
the family's float64 reference, then launched once between `nvtx.range_push(RANGE)` and its pop. Run it under ncu
with `--nvtx --nvtx-include RANGE/` and only those launches are profiled, in the order of `--out`'s list:

    ncu --nvtx --nvtx-include mage-profile/ --clock-control none --csv --page raw ... \\
        python benchmarks/gpu/profile_configs.py matmul-bf16 --dims m=3072,n=5000,k=3072 \\
        --configs CONFIGS.json --out ORDER.json

CONFIGS.json: a JSON list of configs (knobs left out take the family's defaults). ORDER.json: one entry per
profiled launch (label, config, relative error against the reference), so ncu's rows can be matched to configs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the retimer beside this file: one cupy launch path

from retime_independent import _cupy_launch, _device_dtype, _torch_baseline

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.measure import variant_job

RANGE = "mage-profile"
WARMUP = 3


def dims(text: str) -> dict[str, int]:
    """A shape from `m=3072,n=5000,k=3072`."""
    return {k: int(v) for k, v in (part.split("=", 1) for part in text.split(","))}


def inputs(family, shape: dict) -> tuple[dict, object]:
    """The family's inputs on the GPU in its device dtypes, an output buffer (`__out__`), and the float64 reference
    of the inputs as the device holds them."""
    import torch

    made = family.make_inputs(shape, np.random.default_rng(1))
    bufs = {k: torch.from_numpy(v).cuda().to(_device_dtype(family, k)) for k, v in made.items()}
    bufs["__out__"] = torch.empty(family.output_shape(shape), device="cuda", dtype=_device_dtype(family, "__out__"))
    held = {k: v.double().cpu().numpy() for k, v in bufs.items() if k != "__out__"}
    return bufs, family.reference(held, shape)


def launch_paths(family, configs: list[dict], shape: dict, arch, bufs: dict) -> list[dict]:
    """Each config built and its launch on `bufs` (the family's own launcher, else a cupy launch), then the torch
    baseline where the family has one: dicts of label, config, grid (the launched one: a persistent grid of clusters
    is cut to those the device holds) and run."""
    paths = []
    for config in configs:
        variant = family.build(family.with_defaults(config), shape, arch)
        own = family.launcher(variant_job(variant), shape)
        run = (lambda own=own: own(bufs)) if own is not None else _cupy_launch(variant, bufs, family, shape)
        grid = list(getattr(own, "grid", None) or variant.launch.grid)
        paths.append({"label": variant.label, "config": dict(variant.config), "grid": grid, "run": run})
    baseline = _torch_baseline(family, bufs, shape)
    if baseline is not None:
        paths.append({"label": "torch", "config": {}, "grid": None, "run": baseline})
    return paths


def config_arguments(parser: argparse.ArgumentParser, example: str) -> None:
    """The arguments of a script that launches a family's configs at one shape (this one, clocks_under_load.py)."""
    parser.add_argument("family")
    parser.add_argument("--dims", required=True, help=f"the shape, e.g. {example}")
    parser.add_argument("--configs", required=True, type=Path, help="a JSON list of configs")
    parser.add_argument("--arch", default="sm_90a")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    config_arguments(parser, "m=3072,n=5000,k=3072")
    parser.add_argument("--out", required=True, type=Path, help="the profiled launches, in order (JSON)")
    args = parser.parse_args(argv)

    import torch

    family, shape, arch = get_family(args.family), dims(args.dims), get_arch(args.arch)
    bufs, expected = inputs(family, shape)
    launches = [
        (p["label"], p["config"], p["run"])
        for p in launch_paths(family, json.loads(args.configs.read_text()), shape, arch, bufs)
    ]

    order = []
    for label, config, run in launches:
        bufs["__out__"].fill_(float("nan"))
        for _ in range(WARMUP):
            run()
        torch.cuda.synchronize()
        got = bufs["__out__"].double().cpu().numpy()
        rel_err = float(np.linalg.norm(got - expected) / np.linalg.norm(expected))
        torch.cuda.nvtx.range_push(RANGE)
        run()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        order.append({"label": label, "config": config, "shape": shape, "rel_err": rel_err})
        print(f"{label}: rel_err {rel_err:.3g}", flush=True)
    args.out.write_text(json.dumps(order, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
