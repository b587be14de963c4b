"""Configs of a family and its torch baseline under sustained load, with the SM clock and the board's power read by
NVML while each runs: whether a kernel is slower per cycle, or as fast per cycle at a lower clock (a GPU at its power
cap lowers the clock under the kernels that draw the most).

Each launch path is checked against the family's float64 reference, then captured COPIES times in one CUDA graph
(about 20 ms of work) and replayed back to back for --seconds, at most three replays in flight; its µs per launch come
from CUDA events around the replays. A thread reads NVML every 10 ms meanwhile: the SM clock (MHz), the board's power
(W), the temperature and the reasons the clock is held down. A row's clock and power are the medians of the samples in
the second half of its window (the clock settles within a few hundred ms), and its cycles per launch µs × MHz. The
launch paths take turns, round after round, so drift is shared.

    python benchmarks/gpu/clocks_under_load.py matmul-bf16 --dims m=4500,n=3000,k=8800 \\
        --configs benchmarks/gpu/configs/mm_bf16_quad_stream_k.json --json OUT.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # profile_configs beside this file: one launch path

from profile_configs import config_arguments, dims, inputs, launch_paths

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.measure.device import environment
from mage_tune.outputs import refuse_existing

GRAPH_US = 20_000  # the work one replay holds
SAMPLE_S = 0.01
IN_FLIGHT = 3
NVML_CLOCK_SM = 1
# nvml.h's clock-event reasons (nvmlClocksEventReason*), by bit
REASONS = {
    0x1: "idle",
    0x2: "application clocks",
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal",
    0x40: "hardware thermal",
    0x80: "power brake",
    0x100: "display clocks",
}


class Nvml:
    """The few NVML queries this needs, through ctypes on the driver's libnvidia-ml (no Python binding required)."""

    def __init__(self, pci_bus_id: str):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        found = self.lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(self.handle))
        self._check(found, f"nvmlDeviceGetHandleByPciBusId_v2({pci_bus_id})")
        newer = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None)  # before r535: "Throttle"
        self._reasons = newer or self.lib.nvmlDeviceGetCurrentClocksThrottleReasons

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} returned NVML status {status}")

    def _uint(self, fn, *args) -> int:
        value = ctypes.c_uint()
        self._check(fn(self.handle, *args, ctypes.byref(value)), fn.__name__)
        return value.value

    def sample(self) -> tuple[float, int, float, int, int]:
        """(host time, SM MHz, board W, °C, reasons bit mask)."""
        reasons = ctypes.c_ulonglong()
        self._check(self._reasons(self.handle, ctypes.byref(reasons)), "clock-event reasons")
        return (
            time.perf_counter(),
            self._uint(self.lib.nvmlDeviceGetClockInfo, NVML_CLOCK_SM),
            self._uint(self.lib.nvmlDeviceGetPowerUsage) / 1000,
            self._uint(self.lib.nvmlDeviceGetTemperature, 0),
            reasons.value,
        )

    def limits(self) -> dict:
        return {
            "max_sm_mhz": self._uint(self.lib.nvmlDeviceGetMaxClockInfo, NVML_CLOCK_SM),
            "power_limit_w": self._uint(self.lib.nvmlDeviceGetEnforcedPowerLimit) / 1000,
        }


class Sampler:
    """NVML samples every SAMPLE_S seconds on a thread of its own, for as long as it is entered."""

    def __init__(self, nvml: Nvml):
        self.nvml, self.samples, self._stop = nvml, [], threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.nvml.sample())
            time.sleep(SAMPLE_S)

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _wait(event) -> None:
    """Until the event is done, sleeping between queries (so the sampler keeps the interpreter)."""
    while not event.query():
        time.sleep(0.001)


def _one_launch_us(run) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        run()
    end.record()
    _wait(end)
    return start.elapsed_time(end) * 1e3 / 5


def under_load(run, seconds: float, nvml: Nvml) -> dict:
    """µs per launch of `run` replayed back to back for about `seconds`, with the clock, power and temperature."""
    import torch

    copies = max(1, round(GRAPH_US / _one_launch_us(run)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(copies):
            run()
    graph.replay()
    torch.cuda.synchronize()
    replays = max(IN_FLIGHT + 1, round(seconds * 1e6 / GRAPH_US))
    done = [torch.cuda.Event() for _ in range(replays)]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with Sampler(nvml) as sampler:
        began = time.perf_counter()
        start.record()
        for i in range(replays):
            if i >= IN_FLIGHT:
                _wait(done[i - IN_FLIGHT])
            graph.replay()
            done[i].record()
        end.record()
        _wait(end)
        ended = time.perf_counter()
    middle = (began + ended) / 2
    settled = [s for s in sampler.samples if middle <= s[0] <= ended]
    if not settled:
        raise RuntimeError("no NVML sample in the window's second half")
    mhz = statistics.median(s[1] for s in settled)
    us = start.elapsed_time(end) * 1e3 / (replays * copies)
    mask = 0
    for s in settled:
        mask |= s[4]
    return {
        "us": us,
        "sm_mhz": mhz,
        "sm_mhz_min_max": [min(s[1] for s in settled), max(s[1] for s in settled)],
        "power_w": statistics.median(s[2] for s in settled),
        "temperature_c": max(s[3] for s in settled),
        "reasons": [name for bit, name in REASONS.items() if mask & bit],
        "cycles": us * mhz,  # µs × MHz: SM cycles per launch at the settled clock
        "samples": len(settled),
        "copies": copies,
        "replays": replays,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    config_arguments(parser, "m=4500,n=3000,k=8800")
    parser.add_argument("--seconds", type=float, default=2.0, help="load per launch path and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--force", action="store_true", help="replace an output file that exists")
    args = parser.parse_args(argv)
    refuse_existing("clocks_under_load.py", args.json, force=args.force)

    import cupy
    import torch

    family, shape, arch = get_family(args.family), dims(args.dims), get_arch(args.arch)
    bufs, expected = inputs(family, shape)
    nvml = Nvml(cupy.cuda.runtime.deviceGetPCIBusId(torch.cuda.current_device()))
    paths = launch_paths(family, json.loads(args.configs.read_text()), shape, arch, bufs)
    for path in paths:
        bufs["__out__"].fill_(float("nan"))
        path["run"]()
        torch.cuda.synchronize()
        got = bufs["__out__"].double().cpu().numpy()
        path["rel_err"] = float(np.linalg.norm(got - expected) / np.linalg.norm(expected))
        path["rounds"] = []
    for _ in range(args.rounds):
        for path in paths:
            path["rounds"].append(under_load(path["run"], args.seconds, nvml))

    torch_row = next((p for p in paths if p["label"] == "torch"), None)
    rows = []
    for path in paths:
        best = min(path["rounds"], key=lambda r: r["us"])
        rows.append({k: v for k, v in path.items() if k != "run"} | {"best": best})
    base = min(torch_row["rounds"], key=lambda r: r["us"]) if torch_row else None
    print(f"{args.family} {shape}: µs per launch under load, settled SM clock and board power (best round)")
    print(f"{'#':>2} {'µs':>8} {'MHz':>5} {'W':>5} {'Mcycles':>8} {'µs/torch':>8} {'cyc/torch':>9}  reasons, error")
    for i, row in enumerate(rows):
        b = row["best"]
        ratios = f"{b['us'] / base['us']:8.3f} {b['cycles'] / base['cycles']:9.3f}" if base else f"{'-':>8} {'-':>9}"
        why = ", ".join(b["reasons"]) or "-"
        print(
            f"{i:>2} {b['us']:8.2f} {b['sm_mhz']:5.0f} {b['power_w']:5.0f} {b['cycles'] / 1e6:8.3f} {ratios}  "
            f"{why}; {row['rel_err']:.1e}"
        )
    for i, row in enumerate(rows):
        print(f"{i:>2} {row['label']}" + (f" (grid {row['grid'][0]})" if row.get("grid") else ""))
    if args.json:
        record = {
            "environment": environment(),
            "nvml": nvml.limits(),
            "shape": shape,
            "family": args.family,
            "seconds": args.seconds,
            "rows": rows,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
