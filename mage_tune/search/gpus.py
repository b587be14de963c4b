"""One measuring worker per GPU on one study: `search --gpus all|0,1,…`.

Each worker is a spawned process pinned to one GPU (CUDA_VISIBLE_DEVICES), running the same study through the same
storage and run directory as the several-processes case: the study's counting (runner.py) keeps the trial count
exact, each worker measures the baselines in its own session on its own GPU, and the parent shows one progress bar.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing as mp
import os
import sys
import time

from mage_tune.errors import InputError, MageError, NoDeviceError
from mage_tune.kernels.registry import load_with_options
from mage_tune.measure.device import environment, gpu_count
from mage_tune.search import record
from mage_tune.search.runner import Search, _counted
from mage_tune.storage import storage_errors


def parse_gpus(text: str) -> list[str]:
    """`all` or a comma list of device indices -> the indices; a clear error where no GPU is present."""
    count = gpu_count()
    if count == 0:
        raise NoDeviceError(f"--gpus {text}: no CUDA device is present here (drop --gpus, or use --static)")
    if text.strip() == "all":
        return [str(i) for i in range(count)]
    indices = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= count:
            raise InputError(f"--gpus {text}: {part!r} is not a GPU index here (0..{count - 1}, or all)")
        if part not in indices:
            indices.append(part)
    return indices


def _worker(spec, gpu: str, polish_model) -> None:
    """One GPU's search process: the parent already made the study, enqueued the warm start and fitted the model
    the polish ranks by (search/polish.py)."""
    try:
        family = load_with_options(spec.origin or spec.family, spec.source_options)
        runner = Search(spec, family, lambda text: print(f"GPU {gpu}: {text}", file=sys.stderr))
        runner.polish_model = polish_model
        record.add_environment(spec.run_dir, environment())
        with storage_errors(spec):
            runner.run(lambda *_: None)
    except MageError as exc:
        print(f"mage-tune: GPU {gpu}: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


def run_on_gpus(spec, study, gpus: list[str], progress, polish_model=None) -> None:
    """Start one worker per GPU, show the study's count until all end; an error names the GPU whose worker failed."""
    ctx = mp.get_context("spawn")
    child_spec = dataclasses.replace(spec, warm_start="off")
    procs = []
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        for gpu in gpus:
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu  # a spawned process starts with the environment of this moment
            p = ctx.Process(target=_worker, args=(child_spec, gpu, polish_model), name=f"mage-tune-gpu{gpu}")
            p.start()
            procs.append((gpu, p))
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
    try:
        while any(p.is_alive() for _, p in procs):
            _show(study, progress)
            time.sleep(1.0)
    except KeyboardInterrupt:
        for _, p in procs:
            p.join(30)
        raise
    _show(study, progress)
    failed = [f"GPU {gpu} (exit {p.exitcode})" for gpu, p in procs if p.exitcode]
    if failed:
        raise MageError(f"the search worker of {', '.join(failed)} stopped; finished trials are kept: re-run to resume")


def _show(study, progress) -> None:
    with contextlib.suppress(Exception):  # a busy database delays the bar, never the search
        done, _ = _counted(study)
        values = [t.value for t in study.get_trials(deepcopy=False) if t.value is not None]
        progress(done, min(values, default=math.inf))
