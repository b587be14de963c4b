"""The Triton RMSNorm (triton_rmsnorm.py) as a mage-tune Triton kernel family: the variants are its configs, BLOCK
(the columns one step of a program covers; BLOCK ≥ d keeps the row in registers) with num_warps and num_stages.

    mage-tune space examples/rmsnorm/triton_family.py --shape m=4096,d=4096
    mage-tune search examples/rmsnorm/triton_family.py:BF16 --m 4096 --d 4096

The search ends with the winners as a triton.Config list, best first (best/triton_configs.py in the run directory).
The problem (inputs, reference, tolerance, bytes moved, baselines) is the CUDA RMSNorm family's, beside this file.
"""

from __future__ import annotations

from pathlib import Path

from mage_tune.families import Knob, TritonFamily, import_file

HERE = Path(__file__).resolve().parent
cuda = import_file(HERE / "family.py")
kernels = import_file(HERE / "triton_rmsnorm.py")


class TritonRMSNorm(TritonFamily):
    kernel = kernels.rmsnorm_kernel
    output = "y"
    dims = ("m", "d")
    default_dims = cuda.RMSNorm.default_dims
    dim_help = cuda.RMSNorm.dim_help
    knobs = (
        Knob("BLOCK", (4096, 512, 1024, 2048, 8192, 16384), "columns per step (≥ d: one step, the row in registers)"),
        Knob("num_warps", (8, 1, 2, 4, 16, 32), "warps per program"),
        Knob("num_stages", (1, 2, 3), "software pipelining of the column loop (BLOCK < d)"),
    )
    baselines = ("torch", "copy")
    copy_of = "x"

    def __init__(self, dtype: str = "fp32"):
        self.problem = cuda.RMSNorm(dtype)
        self.name = f"triton_{self.problem.name}"
        self.tolerance = self.problem.tolerance

    def violations(self, config, shape, arch) -> list[str]:
        problems = []
        if 32 * config["num_warps"] > config["BLOCK"]:
            problems.append(f"num_warps={config['num_warps']} is more threads than BLOCK={config['BLOCK']} columns")
        if config["BLOCK"] > 2 * kernels.next_power_of_2(shape["d"]):
            problems.append(f"BLOCK={config['BLOCK']} is over twice the row (d={shape['d']}): masked-off columns only")
        return problems

    def constraint_text(self) -> list[str]:
        return ["32·num_warps ≤ BLOCK.", "BLOCK ≤ 2 · next_power_of_2(d)."]

    def constexprs(self, config, shape) -> dict:
        return {"BLOCK": config["BLOCK"], "SINGLE": config["BLOCK"] >= shape["d"]}

    def scalars(self, shape) -> dict:
        return {"stride": shape["d"], "N": shape["d"], "eps": cuda.EPS}

    def grid(self, config, shape) -> tuple[int, ...]:
        return (shape["m"],)

    # The problem is the CUDA family's.
    def make_inputs(self, shape, rng):
        return self.problem.make_inputs(shape, rng)

    def reference(self, inputs, shape):
        return self.problem.reference(inputs, shape)

    def device_dtype(self, name: str) -> str:
        return self.problem.device_dtype(name)

    def output_shape(self, shape):
        return self.problem.output_shape(shape)

    def bytes_moved(self, shape) -> int:
        return self.problem.bytes_moved(shape)

    def baseline_kernels(self, shape):
        return [b for b in self.problem.baseline_kernels(shape) if b.kind == "torch"]

    def launcher(self, job, shape):
        return self.problem.launcher(job, shape) if job.kind == "torch" else super().launcher(job, shape)


FAMILY = TritonRMSNorm("fp32")
BF16 = TritonRMSNorm("bf16")
