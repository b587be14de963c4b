"""Hardware counters from Nsight Compute for one launch of a job, to check the census's static numbers on the machine.

ncu runs `launch_once` (one warm-up launch, then one profiled launch, caches flushed before it) with
`--clock-control none`, so the SM clocks stay where the timed runs had them. The report is read back as ncu's raw
CSV page; the metrics people compare with the census are picked out by name, and every raw metric is kept.
"""

from __future__ import annotations

import csv
import io
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mage_tune.errors import MeasureError, ToolchainError
from mage_tune.measure.records import Job

SECTIONS = (
    "SpeedOfLight",
    "LaunchStats",
    "Occupancy",
    "WarpStateStats",
    "MemoryWorkloadAnalysis",
    "ComputeWorkloadAnalysis",
)
# Counted beside the sections: shared-memory bank conflicts and the FMA pipe (the matmul's roof).
EXTRA_METRICS = (
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
)
# Field -> ncu metric (base units: --print-units base gives nanoseconds and bytes).
PICKED = {
    "duration_ns": "gpu__time_duration.sum",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "registers": "launch__registers_per_thread",
    "dram_bytes_per_s": "dram__bytes.sum.per_second",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "issue_active_pct": "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
    "fma_pipe_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    # a tensor-core kernel's units (the compute and memory sections report them): mma.sync and wgmma both count in
    # the tensor pipe; wgmma reads its operands from shared memory, so the banks' reads can bound it before the pipe
    "tensor_pipe_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "shared_bank_reads_pct": "l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed",
    "shared_bank_writes_pct": "l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed",
    "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "shared_load_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "shared_store_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
}
STALL = re.compile(r"smsp__average_warps?_(?:latency_)?issue_stalled_(\w+?)(?:_per_issue_active)?\.ratio$")
NCU_TIMEOUT_S = 300


@dataclass(frozen=True)
class KernelCounters:
    """One kernel of the profiled launch (a Triton or torch launch may hold several)."""

    kernel: str
    grid: str
    block: str
    picked: dict[str, float | None]  # PICKED's fields
    stalls: dict[str, float]  # reason -> warps stalled per issued instruction, largest first
    raw: dict[str, str] = field(default_factory=dict)  # every metric ncu reported, as printed


def ncu_path() -> str:
    found = shutil.which("ncu") or next(
        (str(p) for p in sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"), reverse=True)), None
    )
    if not found:
        raise ToolchainError("ncu (Nsight Compute) not found on PATH or under /opt/nvidia/nsight-compute")
    return found


def profile(job: Job, family: str, shape: dict, seed: int = 0) -> list[KernelCounters]:
    """Profile one launch of `job`; a MeasureError quoting ncu when the counters cannot be read."""
    ncu = ncu_path()
    with tempfile.TemporaryDirectory(prefix="mage-tune-ncu-") as tmp:
        job_file, report = Path(tmp) / "job.pkl", Path(tmp) / "report"
        job_file.write_bytes(pickle.dumps((job, family, shape, seed)))
        sections = [arg for s in SECTIONS for arg in ("--section", s)]
        command = [
            ncu,
            "--clock-control",
            "none",
            "--profile-from-start",
            "off",
            *sections,
            "--metrics",
            ",".join(EXTRA_METRICS),
            "-f",
            "-o",
            str(report),
            sys.executable,
            "-m",
            "mage_tune.measure.launch_once",
            str(job_file),
        ]
        _run(command, f"ncu profiling {job.label}")
        text = _run(
            [ncu, "--import", f"{report}.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"],
            f"ncu reading the report of {job.label}",
        )
    kernels = parse_raw_csv(text)
    if not kernels:
        raise MeasureError(f"ncu profiled no kernel of {job.label} (is the launch empty?)")
    return kernels


def _run(command: list[str], what: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NCU_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as exc:
        raise MeasureError(f"{what}: timed out after {NCU_TIMEOUT_S} s") from exc
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("==ERROR==")]
    if done.returncode != 0 or errors:
        tail = "\n".join(errors or (done.stdout + done.stderr).strip().splitlines()[-8:])
        raise MeasureError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def parse_raw_csv(text: str) -> list[KernelCounters]:
    """ncu's `--csv --page raw`: a header of metric names, a row of units, then one row per kernel."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 2:
        return []
    header, body = rows[0], rows[2:] if _is_units_row(rows[1]) else rows[1:]
    out = []
    for row in body:
        raw = dict(zip(header, row, strict=False))
        picked, stalls = pick(raw)
        out.append(
            KernelCounters(
                kernel=raw.get("Kernel Name", "?"),
                grid=raw.get("Grid Size", ""),
                block=raw.get("Block Size", ""),
                picked=picked,
                stalls=stalls,
                raw=raw,
            )
        )
    return out


def pick(raw: dict[str, str]) -> tuple[dict[str, float | None], dict[str, float]]:
    """PICKED's fields, and the stall reasons largest first, from one kernel's raw metrics."""
    picked = {key: _number(raw.get(metric, "")) for key, metric in PICKED.items()}
    if picked["dram_bytes_per_s"] is not None and picked["duration_ns"] is not None:
        picked["dram_bytes"] = picked["dram_bytes_per_s"] * picked["duration_ns"] * 1e-9
    stalls = {m.group(1): v for name, text in raw.items() if (m := STALL.match(name)) and (v := _number(text))}
    return picked, dict(sorted(stalls.items(), key=lambda kv: -kv[1]))


def _is_units_row(row: list[str]) -> bool:
    return not any(re.fullmatch(r"-?[\d,.]+", cell) for cell in row)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None
