"""The FP32-accurate wgmma family's pre-pass (the TF32 split of A and B into scratch) against its whole launch.

For each shape, one config of matmul-3xtf32-sm90 (`--set knob=value`, the rest completed as `mage-tune bench` does) is
built and launched through the family's own launcher, checked against the float64 reference (a result over the
tolerance stops the script before any timing), then timed in turns with cuBLAS FP32 (TF32 off), as
retime_independent.py times: single launches between CUDA events, each after a read that evicts the L2. Three
timings a round: the whole call (pre-pass and main kernel), the pre-pass alone, cuBLAS. The pre-pass moves
(M + N)·K floats in and twice (M + N)·KP out; its achieved bandwidth says how near it is to the DRAM's, and its share
of the call about how much a split fused into the main kernel could win.

usage: python benchmarks/gpu/split_share.py MxNxK... [--set bm=128 --set chain=1 ...] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the retimer beside this file: one timing path

from profile_configs import inputs
from retime_independent import REPS, _time_cold, _torch_baseline, l2_evictor

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.kernels.matmul_3xtf32_sm90 import FLOAT, padded_k
from mage_tune.measure import variant_job

FAMILY = "matmul-3xtf32-sm90"


def shape_of(text: str) -> dict[str, int]:
    m, n, k = (int(v) for v in text.lower().split("x"))
    return {"m": m, "n": n, "k": k}


def shape_of_text(shape: dict) -> str:
    return f"{shape['m']}x{shape['n']}x{shape['k']}"


def prepass_bytes(shape: dict) -> int:
    """What the pre-pass reads (A and B) and writes (both splits of each, rows padded to KP)."""
    m, n, k = shape["m"], shape["n"], shape["k"]
    return (m + n) * k * FLOAT + 2 * (m + n) * padded_k(k) * FLOAT


def share(shape: dict, settings: list[str], rounds: int) -> dict:
    import torch

    family, arch = get_family(FAMILY), get_arch("sm_90a")
    config = family.parse_settings(settings, shape, arch)
    launcher = family.launcher(variant_job(family.build(config, shape, arch)), shape)
    bufs, expected = inputs(family, shape)
    bufs["__out__"].fill_(float("nan"))  # a value the launch does not write stays NaN
    launcher(bufs)
    torch.cuda.synchronize()
    got = bufs["__out__"].double().cpu().numpy()
    rel_err = float(np.linalg.norm(got - expected) / np.linalg.norm(expected))
    if not rel_err <= family.tolerance_for(shape):  # a wrong (or NaN) result is not timed
        raise SystemExit(
            f"{shape_of_text(shape)}: {config} errs {rel_err:.3g}, over the tolerance {family.tolerance_for(shape):.3g}"
        )

    evict = l2_evictor()
    cublas = _torch_baseline(family, bufs, shape)
    whole, alone, theirs = [], [], []
    for _ in range(rounds):
        whole.append(_time_cold(lambda: launcher(bufs), evict, REPS))
        alone.append(_time_cold(lambda: launcher(bufs, main=False), evict, REPS))
        theirs.append(_time_cold(cublas, evict, REPS))
    whole_us, prepass_us, cublas_us = (statistics.median(v) for v in (whole, alone, theirs))
    return {
        "shape": shape,
        "config": config,
        "rel_err": rel_err,
        "tolerance": family.tolerance_for(shape),
        "whole_us": whole_us,
        "prepass_us": prepass_us,
        "cublas_fp32_us": cublas_us,
        "prepass_share": prepass_us / whole_us,
        "prepass_gb_s": prepass_bytes(shape) / prepass_us / 1e3,
        "whole_over_cublas": whole_us / cublas_us,
        "without_prepass_over_cublas": (whole_us - prepass_us) / cublas_us,
        "rounds_us": {"whole": whole, "prepass": alone, "cublas_fp32": theirs},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapes", nargs="+", type=shape_of, help="MxNxK")
    parser.add_argument("--set", dest="settings", action="append", default=[], help="knob=value (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    rows = [share(shape, args.settings, args.rounds) for shape in args.shapes]
    for r in rows:
        print(
            f"{shape_of_text(r['shape'])}: whole {r['whole_us']:.1f} µs, pre-pass {r['prepass_us']:.1f} "
            f"({r['prepass_share']:.1%}, {r['prepass_gb_s']:.0f} GB/s), cuBLAS FP32 {r['cublas_fp32_us']:.1f}: "
            f"{r['whole_over_cublas']:.3f} ×, {r['without_prepass_over_cublas']:.3f} × without the pre-pass; "
            f"error {r['rel_err']:.2g}"
        )
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
