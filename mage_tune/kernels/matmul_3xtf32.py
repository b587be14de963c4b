"""FP32 matmul C = A·B on tensor cores by 3xTF32: each float split into two TF32 parts, three mma.sync m16n8k8 per
product tile, summed in FP32 — FP32's accuracy at tensor-core speed. The check holds it to that: a relative error
within FP32's probabilistic bound for K-term sums, u·√K with u = 2⁻²⁴ (Higham and Mary), and never under 16 u (the
split inputs' own error) (tolerance_for); cuBLAS's FP32 SGEMM stays within a third of it on the H200. The tensor
cores' accumulation truncates, so one long mma chain drifts, by about K·2⁻²⁷, past that bound once K passes a few
hundred: with `chain=1` each k-tile's chain starts from zero and an ordinary, round-to-nearest FP32 add takes it into
the total (0: one chain over all of K, or over a split_k slice of it). The space admits chain=0 only where that
chain's predicted drift, its length × 2⁻²⁷, is within the bound (measured drifts were 0.94× that prediction), so a
search spends no trial, and a static search never picks, a config that cannot be accurate.

A different numeric recipe from the SIMT family `matmul` (whose products are IEEE FP32 FMAs), so a family of its
own, opted into by name; the problem, inputs, reference and baselines (cuBLAS FP32, Triton's IEEE matmul) are
`matmul`'s, so the two compare directly. cuBLAS with TF32 is timed beside them for context only (kind "context"):
about 1e-3 relative error, far over this family's tolerance, so it is never the baseline to beat. The space: block
tile (bm, bn, bk), warp tile (wm, wn; the thread count is derived), pipeline depth (stages), copy widths (a_vec,
b_vec), the accumulation chain (chain), block order (raster) and serial split-K (split_k). mma.sync with TF32
operands needs sm_80, the oldest arch mage-tune targets.
"""

from __future__ import annotations

import dataclasses
import math

from mage_tune import gpu
from mage_tune.arch import Arch
from mage_tune.kernels.base import CONTEXT, Baseline, Config, Knob, Shape
from mage_tune.kernels.matmul import FLOAT, RASTER, SPLIT_K, Matmul, split_tiles

MAX_ACCUMULATORS = 128  # floats per thread: a 64×64 warp tile
REGISTER_FILE = 65536  # 32-bit registers per SM
FP32_UNIT = 2.0**-24  # unit roundoff of FP32
OPERAND_REGISTERS = 96  # at least what the split fragments (two k steps of them), addresses and indices add
BAR_FROM = 2048  # dims from which a variant may be no worse than cuBLAS FP32 (accuracy_bar)
CHAIN_DRIFT = 2.0**-27  # relative error per product of one truncating mma chain (H200: 7.2e-6 at 1024, 4.3e-5 at 6144)


class Matmul3xTF32(Matmul):
    name = "matmul-3xtf32"
    template = "matmul_3xtf32.cu.j2"
    knobs = (
        Knob("bm", (128, 64, 256), "block tile rows (of C and A)"),
        Knob("bn", (128, 64, 256), "block tile columns (of C and B)"),
        Knob("bk", (32, 16), "k-tile depth: the K extent of one shared-memory tile"),
        Knob("wm", (64, 32), "warp tile rows: wm/16 mma tiles"),
        Knob("wn", (32, 64), "warp tile columns: wn/8 mma tiles (threads = 32·(bm/wm)·(bn/wn))"),
        Knob("stages", (3, 2, 4), "shared-memory buffers; stages-1 tile copies stay in flight while one computes"),
        Knob("a_vec", (16, 4), "bytes per cp.async of A"),
        Knob("b_vec", (16, 4), "bytes per cp.async of B"),
        Knob(
            "chain",
            (1, 0),
            "1: each k-tile's products summed by an mma chain from zero, then added to the FP32 total rounded to "
            "nearest; 0: one chain over all of K (half the accumulator registers, an error growing with K)",
        ),
        RASTER,
        dataclasses.replace(SPLIT_K, free=False),  # the chain=0 rule reads it: a slice is one chain's length
    )
    mma_passes = 3  # big·big, big·small, small·big: three TF32 products for each FP32 one
    baselines = (*Matmul.baselines, CONTEXT)

    def tolerance_for(self, shape: Shape) -> float:
        """FP32's bound for a K-term sum, u·√K, at least 16 u; never looser than the SIMT family's tolerance."""
        return min(self.tolerance, FP32_UNIT * max(math.sqrt(shape["k"]), 16))

    def accuracy_bar(self, shape: Shape) -> str | None:
        """Never worse than cuBLAS FP32 on the same inputs where M, N and K all reach BAR_FROM: there cuBLAS sums
        K-long FP32 chains (4.5e-7 to 9.9e-7 measured) above the split's own error (the dropped small·small
        products; 2.5e-7 to 3.1e-7 with short chains). At smaller shapes cuBLAS's short sums (or its split of K)
        fall under that floor (5.5e-8 to 4.1e-7 measured), so the tolerance alone holds there."""
        return "torch" if min(shape["m"], shape["n"], shape["k"]) >= BAR_FROM else None

    # --- baselines: matmul's, and cuBLAS TF32 for context ----------------------------------------------------------
    def baseline_kernels(self, shape: Shape) -> list[Baseline]:
        """matmul's (Triton's IEEE matmul, cuBLAS FP32), then cuBLAS with TF32: timed for context only, its error
        (about 1e-3) far over this family's tolerance."""
        return [*super().baseline_kernels(shape), Baseline("torch.matmul (cuBLAS TF32, context only)", CONTEXT)]

    def launcher(self, job, shape: Shape):
        if job.kind == CONTEXT:
            return tf32_matmul
        return super().launcher(job, shape)

    # --- the space ---------------------------------------------------------------------------------------------
    @staticmethod
    def threads(config: Config) -> int:
        return 32 * (config["bm"] // config["wm"]) * (config["bn"] // config["wn"])

    @staticmethod
    def accumulators(config: Config) -> int:
        """Accumulator registers per thread: the warp tile's share, twice over with chain=1 (k-tile sums and total)."""
        return config["wm"] * config["wn"] // 32 * (2 if config["chain"] else 1)

    @staticmethod
    def shared_floats(config: Config) -> tuple[int, int]:
        """Floats in one stage's A buffer and B buffer, padding included (rows of bk+4 and bn+8)."""
        bm, bn, bk = config["bm"], config["bn"], config["bk"]
        return bm * (bk + 4), bk * (bn + 8)

    def violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        c = config
        out = []
        if c["bm"] % c["wm"] or c["bn"] % c["wn"]:
            out.append(f"warp tile {c['wm']}×{c['wn']} must divide the block tile {c['bm']}×{c['bn']}")
        elif self.threads(c) * (self.accumulators(c) + OPERAND_REGISTERS) > REGISTER_FILE:
            out.append(
                f"{self.threads(c)} threads × about {self.accumulators(c) + OPERAND_REGISTERS} registers exceed the "
                f"{REGISTER_FILE} of an SM"
            )
        chain_length = -(-shape["k"] // c["split_k"])  # products one chain sums with chain=0: K, or a split_k slice
        drift, bound = chain_length * CHAIN_DRIFT, self.tolerance_for(shape)
        if not c["chain"] and drift > bound:
            out.append(
                f"chain=0 sums {chain_length} products in one truncating mma chain (K={shape['k']}, "
                f"split_k={c['split_k']}): its drift, about {drift:.1e}, is over FP32's bound {bound:.1e} for K "
                "terms, so it cannot pass the check; use chain=1 or a larger split_k"
            )
        if self.accumulators(c) > MAX_ACCUMULATORS:
            out.append(
                f"wm*wn/32 (twice with chain=1) = {self.accumulators(c)} accumulators exceed {MAX_ACCUMULATORS} per "
                "thread"
            )
        return out + self.copy_violations(c, shape, arch)

    def constraint_text(self) -> list[str]:
        return [
            "the warp tile wm×wn divides the block tile bm×bn; threads = 32·(bm/wm)·(bn/wn)",
            f"accumulators wm*wn/32, twice that with chain=1, <= {MAX_ACCUMULATORS} per thread, and threads × "
            f"(accumulators + {OPERAND_REGISTERS}) <= {REGISTER_FILE} registers of an SM (so threads <= 512)",
            "chain=0 only where one chain's drift, ceil(K/split_k)·2^-27, is within the check's bound u·max(√K, 16): "
            "a longer truncating chain cannot pass it",
            "K*4 % a_vec == 0 and N*4 % b_vec == 0, so every row of A and B starts aligned to its copy width",
            "shared memory stages * (bm·(bk+4) + bk·(bn+8)) * 4 bytes <= the arch's opt-in limit (227 KB on sm_90)",
        ]

    def template_vars(self, config: Config, shape: Shape) -> dict:
        c = config
        return {
            **c,
            "label": ",".join(f"{k}={v}" for k, v in c.items()),
            "threads": self.threads(c),
            "a_vec_floats": c["a_vec"] // FLOAT,
            "b_vec_floats": c["b_vec"] // FLOAT,
            "c_pair": shape["n"] % 2 == 0,  # float2 stores of C: each pair 8-byte aligned
            "max_split_tiles": split_tiles(c, shape),
        }


FAMILY = Matmul3xTF32()


def tf32_matmul(bufs: dict) -> None:
    """torch.matmul with cuBLAS allowed TF32, the setting restored after the call (the harness runs FP32 with TF32
    off), even when the call fails. A CUDA graph captured around it replays the kernel cuBLAS picked at capture."""
    torch = gpu.torch()
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    matmul.allow_tf32 = True
    try:
        torch.matmul(bufs["A"], bufs["B"], out=bufs["__out__"])
    finally:
        matmul.allow_tf32 = before
