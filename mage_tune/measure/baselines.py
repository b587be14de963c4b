"""Launchers for the baselines timed beside the variants: Triton's reference kernels and torch (cuBLAS FP32).

Each launcher takes one buffer set (names as the family's inputs, output under "__out__") and launches on torch's
current stream, so graph capture sees it.
"""

from __future__ import annotations

from collections.abc import Callable

from mage_tune.measure.records import Job


def triton_jobs(family: str, shape: dict) -> list[Job]:
    """Triton's reference kernel at each of its configs."""
    if family == "layernorm":
        block = 1 << max(0, (shape["d"] - 1).bit_length())
        return [
            Job(f"triton[num_warps={w}]", "triton", {"num_warps": w, "BLOCK": block})
            for w in (1, 2, 4, 8, 16)
            if 32 * w <= max(32, block)
        ]
    from mage_tune.triton_ref import MATMUL_CONFIGS, MATMUL_KEYS

    configs = [dict(zip(MATMUL_KEYS, c, strict=True)) for c in MATMUL_CONFIGS]
    return [Job(f"triton[{_cfg_label(c)}]", "triton", c) for c in configs]


def _cfg_label(config: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


def torch_jobs(family: str) -> list[Job]:
    return [Job("torch.layer_norm" if family == "layernorm" else "torch.matmul (cuBLAS FP32)", "torch")]


def launcher(job: Job, family, shape: dict) -> Callable[[dict], None]:
    if job.kind == "torch":
        return _torch_launcher(family.name, shape)
    if job.kind == "triton":
        return _triton_launcher(family.name, shape, job.config)
    raise ValueError(f"no launcher for job kind {job.kind!r}")


def _torch_launcher(family: str, shape: dict):
    import torch
    import torch.nn.functional as F

    if family == "layernorm":
        d = shape["d"]

        def launch(bufs):
            # torch has no out= layer norm; return the fresh tensor instead of paying for a copy into __out__.
            return F.layer_norm(bufs["x"], (d,), bufs["scale"], bufs["bias"], 1e-5)

        return launch

    def launch_mm(bufs):
        torch.matmul(bufs["A"], bufs["B"], out=bufs["__out__"])

    return launch_mm


def _triton_launcher(family: str, shape: dict, config: dict):
    import triton

    from mage_tune import triton_kernels

    if family == "layernorm":
        m, d = shape["m"], shape["d"]

        def launch(bufs):
            triton_kernels.norm_kernel[(m,)](
                bufs["x"],
                bufs["__out__"],
                bufs["scale"],
                bufs["bias"],
                d,
                d,
                1e-5,
                BLOCK=config["BLOCK"],
                num_warps=config["num_warps"],
            )

        return launch
    m, n, k = shape["m"], shape["n"], shape["k"]
    consts = {key: config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
    grid = (triton.cdiv(m, consts["BLOCK_M"]) * triton.cdiv(n, consts["BLOCK_N"]),)

    def launch_mm(bufs):
        triton_kernels.matmul_kernel[grid](
            bufs["A"],
            bufs["B"],
            bufs["__out__"],
            m,
            n,
            k,
            k,
            1,
            n,
            1,
            n,
            1,
            **consts,
            num_warps=config["num_warps"],
            num_stages=config["num_stages"],
        )

    return launch_mm
