"""A measuring worker that met a sticky CUDA error ends without the interpreter's shutdown (the CUDA libraries'
finalizers would print tracebacks on the search's terminal), once its result is delivered. The worker runs as the
search runs it, in a spawned process; the harness is replaced by one whose every launch fails as an illegal address
does."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from types import SimpleNamespace

ILLEGAL = "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"


class _Poisoned:
    def __init__(self, plan, index):
        pass

    def run(self, job):
        raise RuntimeError(ILLEGAL)


def _worker_with_a_poisoned_context(marker: str, jobs, out) -> None:
    import atexit

    from mage_tune.measure import harness, worker

    atexit.register(lambda: Path(marker).write_text("the interpreter shut down"))
    harness.measure_session = lambda index, environment: "session"
    harness.Runner = _Poisoned
    worker.device.environment = lambda: None
    worker._worker_main(None, 0, jobs, out)


def test_a_sticky_error_ends_the_worker_after_its_result_without_a_shutdown(tmp_path):
    ctx = mp.get_context("spawn")
    jobs, out = ctx.Queue(), ctx.Queue()
    marker = tmp_path / "shutdown"
    proc = ctx.Process(target=_worker_with_a_poisoned_context, args=(str(marker), jobs, out))
    proc.start()
    jobs.put(SimpleNamespace(label="v", kind="variant", config={"crash": 1}, cubin_sha256="0" * 64))
    assert out.get(timeout=60) == ("session", "session")
    kind, result = out.get(timeout=60)
    proc.join(timeout=60)
    assert kind == "result" and not result.ok and ILLEGAL in result.error
    assert proc.exitcode == 0 and not marker.exists()
