"""The process Nsight Compute profiles (`python -m mage_tune.measure.launch_once JOB_FILE`).

It builds one buffer set, launches the job once to warm up (module load, Triton's JIT, first touch), then launches
it once more between cudaProfilerStart and cudaProfilerStop, so `ncu --profile-from-start off` sees exactly the
kernels of one launch. ncu flushes the caches before that launch (its default cache control): the counters describe
a cold launch, like the harness's cold regime.
"""

from __future__ import annotations

import pickle
import sys

from mage_tune import gpu
from mage_tune.kernels import load_family
from mage_tune.measure.harness import Buffers, make_launcher


def main(job_file: str) -> None:
    torch = gpu.torch()
    with open(job_file, "rb") as f:
        job, family_name, shape, seed = pickle.load(f)
    family = load_family(family_name)
    bufs = Buffers(family, shape, seed, 1)
    launch = make_launcher(job, family, shape)
    launch(bufs.sets[0])
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    launch(bufs.sets[0])
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main(sys.argv[1])
