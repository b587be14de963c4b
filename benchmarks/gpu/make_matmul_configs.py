"""Write the matmul config lists the shape sweeps measure (benchmarks/gpu/configs/*.json).

large tiles: 64–256 square-ish block tiles with 8×8 to 16×16 micro-tiles (64–256 threads), bk 8/16, 2–3 stages, A
as is (16-byte copies) or transposed (4-byte copies), pipe 0/1; small tiles: 32–128 tiles with 4×4 to 8×8
micro-tiles for 1024³, where 132 SMs want more, smaller blocks. Fixed: b_vec=16, pad=4, smem_vec=1 (every
winner of session 1 had them). Left out: 128 accumulators with A as is and pipe=1, which double-buffers four k
steps of fragments and spills (census: 255 registers, 892 bytes spilled).

    python benchmarks/gpu/make_matmul_configs.py
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from mage_tune.kernels.matmul import FAMILY

HERE = Path(__file__).parent / "configs"


def configs(shape: dict, bms, bns, bks, tms, tns) -> list[dict]:
    out = []
    for bm, bn, bk, tm, tn, stages, a_trans, pipe in itertools.product(bms, bns, bks, tms, tns, (2, 3), (0, 1), (0, 1)):
        c = {"bm": bm, "bn": bn, "bk": bk, "tm": tm, "tn": tn, "stages": stages, "a_vec": 4 if a_trans else 16}
        c |= {"b_vec": 16, "a_trans": a_trans, "pad": 4, "smem_vec": 1, "pipe": pipe}
        if FAMILY.violations(c, shape, "sm_90") or not 64 <= FAMILY.threads(c) <= 256:
            continue
        if tm * tn == 128 and pipe and not a_trans:
            continue
        out.append(c)
    return out


def main() -> None:
    HERE.mkdir(exist_ok=True)
    large = configs({"m": 2048, "n": 2048, "k": 2048}, (64, 128, 256), (64, 128, 256), (8, 16), (8, 16), (8, 16))
    small = configs({"m": 1024, "n": 1024, "k": 1024}, (32, 64, 128), (32, 64, 128), (16, 32), (4, 8), (4, 8))
    for name, listed in (("mm_large_tiles", large), ("mm_small_tiles", small)):
        (HERE / f"{name}.json").write_text(json.dumps(listed, indent=0) + "\n")
        print(f"{name}: {len(listed)} configs")


if __name__ == "__main__":
    main()
