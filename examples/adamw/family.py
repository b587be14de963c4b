"""One AdamW optimizer step over n fp32 parameters, in place: `params`, `m` (exp_avg) and `v` (exp_avg_sq) are read
and written back, `grads` is read. The kernel (adamw.cu.j2, beside this file) takes its hyper-parameters as an
optimizer's kernel does: lr, beta1, beta2, beta1_correction, beta2_correction (1 - beta^step, from the host), eps,
weight_decay as floats, an int mode (1: AdamW's decoupled weight decay; 0: Adam with an L2 penalty) and the count
as a size_t.

    mage-tune space  examples/adamw/family.py --n 16777216
    mage-tune search examples/adamw/family.py --n 16777216

Each element is independent and moves 28 bytes (four reads, three writes) for a few dozen instructions: a memory-bound
stream, whose knobs are how the stream is cut.

Knobs (defaults first):
  threads     threads per block: 256, 128, 512, 1024, 64
  vec         floats per access: 4 (float4; the last n % 4 elements by the last block, one a thread) or 1
  per_thread  accesses of each buffer a thread issues before its math: 1, 2, 4, 8 (bytes in flight per thread)
  loop        chunk: one step per thread, a grid that covers n; stride: a grid that fills the GPU once (as many
              blocks as its SMs hold), each thread walking n in grid-sized strides
  hint        none, or cs: every load and store streaming (__ldcs/__stcs, evict-first lines: nothing is reused)

`as_shipped` is what an optimizer library typically ships: 512 threads, scalar loads, one element per thread. The
harness restores the three in-place buffers from pristine copies before the check and before every timed launch,
so every launch, baselines included, is one step from the same state. Baselines: torch's fused AdamW kernel
(`torch._fused_adamw_`, where this torch has it) and the same step in plain torch ops.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from mage_tune import gpu
from mage_tune.arch import get_arch
from mage_tune.errors import ConfigError
from mage_tune.families import Baseline, CudaFamily, Knob, Launch, Output, Scalar

LR = 1e-3
BETA1 = 0.9
BETA2 = 0.999
EPS = 1e-8
WEIGHT_DECAY = 1e-2
STEP = 10  # the step the state is at: the bias corrections' power
MODE = 1  # decoupled weight decay (AdamW)
FLOAT = 4  # bytes
BUFFERS = 4  # params, grads, m, v: the floats a thread holds per element in flight
REG_FILE = 65536  # 32-bit registers per SM, all of which one block may take
REG_OVERHEAD = 40  # registers a thread needs beside the held floats: pointers, indices, constants (ptxas: 30-40)
MAX_HELD = 128  # held floats, leaving the rest of 255 registers to the math


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class AdamW(CudaFamily):
    name = "adamw"
    template = "adamw.cu.j2"
    dims = ("n",)
    default_dims: ClassVar[dict[str, int]] = {"n": 4096 * 4096}  # one 4096 × 4096 weight
    dim_help: ClassVar[dict[str, str]] = {"n": "parameters"}
    knobs = (
        Knob("threads", (256, 128, 512, 1024, 64), "threads per block"),
        Knob("vec", (4, 1), "floats per access: 4 (float4) or 1"),
        Knob("per_thread", (1, 2, 4, 8), "accesses of each buffer per thread before its math"),
        Knob("loop", ("chunk", "stride"), "one step per thread, or grid-stride over a GPU-filling grid", free=True),
        Knob("hint", ("none", "cs"), "cs: streaming loads and stores (__ldcs/__stcs)", free=True),
    )
    kernel_name = "adamw_step"
    param_names = ("params", "grads", "m", "v")
    scalar_params = (
        Scalar("lr", "float"),
        Scalar("beta1", "float"),
        Scalar("beta2", "float"),
        Scalar("beta1_correction", "float"),
        Scalar("beta2_correction", "float"),
        Scalar("eps", "float"),
        Scalar("weight_decay", "float"),
        Scalar("mode", "int"),
        Scalar("n", "size_t"),
    )
    # fp32 arithmetic against a float64 step from the same fp32 state. params: its own rounding and the update's (a
    # few ulp of an update about 0.75 % of |p| in norm) give ~4e-8 (the host emulation's); 3e-7 still sees the
    # update 4e-5 off, and a wrong constant or a dropped bias correction lands far above. m can cancel
    # (beta1·m against (1 - beta1)·g), so rel_l2 too (~3e-8). v is a sum of positive terms, each element within a
    # few roundings: max_rel, 1e-6 over the worst of millions (~6e-8 typical).
    outputs = (
        Output("params", "rel_l2", 3e-7, inplace=True),
        Output("m", "rel_l2", 3e-7, inplace=True),
        Output("v", "max_rel", 1e-6, inplace=True),
    )
    baselines = ("torch",)
    copy_of = None  # no output has the bytes of one input
    as_shipped: ClassVar[dict] = {"threads": 512, "vec": 1, "per_thread": 1, "loop": "chunk", "hint": "none"}

    # --- the space ---------------------------------------------------------------------------------------------
    @staticmethod
    def held_floats(config) -> int:
        return BUFFERS * config["vec"] * config["per_thread"]

    @staticmethod
    def held_limit(config) -> int:
        return min(MAX_HELD, REG_FILE // config["threads"] - REG_OVERHEAD)

    def violations(self, config, shape, arch) -> list[str]:
        problems = []
        if self.held_floats(config) > self.held_limit(config):
            problems.append(
                f"vec={config['vec']} × per_thread={config['per_thread']} holds {self.held_floats(config)} floats "
                f"per thread (4 buffers), over the {self.held_limit(config)} that {config['threads']}-thread blocks "
                "leave room for; use a smaller per_thread or fewer threads"
            )
        return problems

    def constraint_text(self) -> list[str]:
        return [
            f"4 · vec · per_thread floats held per thread ≤ min({MAX_HELD}, {REG_FILE} / threads − {REG_OVERHEAD}) "
            "(the block's share of the registers)."
        ]

    def blocks(self, config, shape, arch) -> int:
        per_block = config["threads"] * config["per_thread"]
        needed = max(1, _cdiv(shape["n"] // config["vec"], per_block))
        if config["loop"] == "chunk":
            return needed
        target = get_arch(arch)
        resident = min(target.max_threads_per_sm // config["threads"], target.max_blocks_per_sm)
        return min(needed, resident * target.sms)

    def launch(self, config, shape, arch) -> Launch:
        blocks = self.blocks(config, shape, arch)
        if blocks > 2**31 - 1:
            raise ConfigError(f"{self.name}: {blocks} blocks is over the grid's limit")
        return Launch(blocks, config["threads"])

    def template_vars(self, config, shape) -> dict:
        return {**config, "label": f"{self.name} " + ",".join(f"{k}={v}" for k, v in config.items())}

    def hyper(self) -> dict[str, float | int]:
        """The step's scalars by name, as the host computes them (the corrections in float64, like torch)."""
        return {
            "lr": LR,
            "beta1": BETA1,
            "beta2": BETA2,
            "beta1_correction": 1.0 - BETA1**STEP,
            "beta2_correction": 1.0 - BETA2**STEP,
            "eps": EPS,
            "weight_decay": WEIGHT_DECAY,
            "mode": MODE,
        }

    def scalar_args(self, shape) -> tuple:
        return (*self.hyper().values(), shape["n"])

    # --- correctness and cost -----------------------------------------------------------------------------------
    def make_inputs(self, shape, rng) -> dict[str, np.ndarray]:
        """A state some steps in: GPT-style weights (std 0.02), gradients of 1e-2, their running moments."""
        n = shape["n"]
        grads = 1e-2 * rng.standard_normal(n)
        return {
            "params": (0.02 * rng.standard_normal(n)).astype(np.float32),
            "grads": grads.astype(np.float32),
            "m": (0.5 * grads + 5e-3 * rng.standard_normal(n)).astype(np.float32),
            "v": (1e-4 * (0.05 + rng.chisquare(3, n) / 3)).astype(np.float32),
        }

    def reference(self, inputs, shape) -> dict[str, np.ndarray]:
        """One step in float64 from the pristine state, with the scalars as the kernel receives them (float32)."""
        h = {k: float(np.float32(v)) if isinstance(v, float) else v for k, v in self.hyper().items()}
        p, g, m, v = (inputs[k].astype(np.float64) for k in ("params", "grads", "m", "v"))
        if h["mode"] == 0:
            g = g + h["weight_decay"] * p
        m = h["beta1"] * m + (1.0 - h["beta1"]) * g
        v = h["beta2"] * v + (1.0 - h["beta2"]) * g * g
        if h["mode"] != 0:
            p = p * (1.0 - h["lr"] * h["weight_decay"])
        p = p - h["lr"] * (m / h["beta1_correction"]) / (np.sqrt(v / h["beta2_correction"]) + h["eps"])
        return {"params": p, "m": m, "v": v}

    def output_shapes(self, shape) -> dict[str, tuple[int, ...]]:
        return {}  # every output is in place: the inputs are the buffers

    def bytes_moved(self, shape) -> int:
        return 7 * FLOAT * shape["n"]  # params, m, v read and written; grads read

    def flops(self, shape) -> int:
        return 16 * shape["n"]  # about: the moments, the decay, the corrected update

    # --- baselines ---------------------------------------------------------------------------------------------
    def baseline_kernels(self, shape) -> list[Baseline]:
        return [
            Baseline("torch._fused_adamw_", "torch", {"impl": "fused"}),
            Baseline("torch AdamW (plain ops)", "torch", {"impl": "plain"}),
        ]

    def launcher(self, job, shape):
        if job.kind != "torch":
            return None
        torch = gpu.torch()
        # the scalars as the kernel receives them (float32), as the reference takes them: 1 - beta2 from a float32
        # beta2 is 1.3e-5 away from 1 - 0.999, which shows in v
        h = {k: float(np.float32(v)) if isinstance(v, float) else v for k, v in self.hyper().items()}
        lr, b1, b2, eps, wd = h["lr"], h["beta1"], h["beta2"], h["eps"], h["weight_decay"]
        if job.config["impl"] == "fused":
            if not hasattr(torch, "_fused_adamw_"):
                raise ConfigError(f"torch {torch.__version__} has no torch._fused_adamw_; bench the plain baseline")
            # the fused kernel reads the step from a device tensor (and leaves it alone): the corrections match ours
            steps = [torch.full((), float(STEP), dtype=torch.float32, device="cuda")]

            def fused(bufs):
                torch._fused_adamw_(
                    [bufs["params"]], [bufs["grads"]], [bufs["m"]], [bufs["v"]], [], steps,
                    lr=lr, beta1=b1, beta2=b2, weight_decay=wd, eps=eps, amsgrad=False, maximize=False,
                )  # fmt: skip

            return fused
        bc1, bc2 = h["beta1_correction"], h["beta2_correction"]

        def plain(bufs):
            p, g, m, v = bufs["params"], bufs["grads"], bufs["m"], bufs["v"]
            p.mul_(1.0 - lr * wd)
            m.lerp_(g, 1.0 - b1)
            v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
            p.addcdiv_(m / bc1, (v / bc2).sqrt_().add_(eps), value=-lr)

        return plain


FAMILY = AdamW()
