"""mage_tune.autotune on a GPU, on the RMSNorm example's Triton kernel (examples/rmsnorm/triton_rmsnorm.py): a key the
tuning database answers launches once and times nothing; a key it cannot answer is benchmarked once (through the
family's isolated harness with the family, in this process on clones of the caller's tensors without), its output is
right and the caller's tensors are written by the one real launch only, and a fresh process with the same database
answers it from the database, timing nothing. Skipped where no CUDA device is present.

Each decorated kernel's launches are counted by a proxy in front of the kernel (Counting): every launch the
decorator makes in this process goes through it, its benchmarks' included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mage_tune.kernels.registry import load_family
from mage_tune.records.objectives import MEASURED_OBJECTIVE
from mage_tune.tuning import autotune as at
from mage_tune.tuning.db import RunInfo, TuningDB, run_name
from mage_tune.user_files import import_file

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
FAMILY = str(ROOT / "examples" / "rmsnorm" / "triton_family.py")
EPS = 1e-6
BLOCKS = ((512, 4), (1024, 4), (2048, 4), (2048, 8), (4096, 8))


def configs():
    import triton

    return [triton.Config({"BLOCK": b}, num_warps=w, num_stages=1) for b, w in BLOCKS]


class Counting:
    """The kernel behind a proxy that counts its launches and notes the output pointer each wrote through."""

    def __init__(self, fn):
        self.fn, self.arg_names = fn, fn.arg_names
        self.outputs: list[int] = []

    @property
    def count(self) -> int:
        return len(self.outputs)

    def run(self, *args, **kwargs):
        self.outputs.append(args[2].data_ptr())  # y
        return self.fn.run(*args, **kwargs)


def decorated(db: str, family: str | None, listed=None) -> tuple[at.RememberingAutotuner, Counting]:
    """The example's kernel under mage_tune.autotune (over `listed` configs, default configs()): with its Triton
    family (which gives SINGLE at each config), or bare with a heuristic for SINGLE."""
    import triton

    kernel = import_file(ROOT / "examples" / "rmsnorm" / "triton_rmsnorm.py").rmsnorm_kernel
    fn = kernel if family else triton.heuristics({"SINGLE": lambda a: a["BLOCK"] >= a["N"]})(kernel)
    tuner = at.autotune(configs=listed or configs(), key=["N"], family=family, db=db)(fn)
    tuner.families()  # checked against the real kernel before the proxy goes in front of it
    tuner.fn = Counting(fn)
    return tuner, tuner.fn


def launched(tuner, m: int, d: int) -> dict:
    """One call at m × d on fresh tensors: whether y is right and x, w untouched, and the pointers involved."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(m + d)
    x = torch.randn(m, d, device="cuda", generator=g) * 1.5 + 0.5
    w = 1.0 + 0.25 * torch.randn(d, device="cuda", generator=g)
    x0, w0 = x.clone(), w.clone()
    y = torch.full_like(x, float("nan"))
    tuner[(m,)](x, w, y, d, d, EPS)
    torch.cuda.synchronize()
    ref = (x.double() * torch.rsqrt((x.double() ** 2).mean(dim=1, keepdim=True) + EPS) * w.double()).float()
    error = float((y.double() - ref.double()).norm() / ref.double().norm())
    return {"error": error, "inputs_kept": bool(torch.equal(x, x0) and torch.equal(w, w0)), "y": y.data_ptr()}


CHILD = """
import json, sys
sys.path.insert(0, {here!r})
import test_gpu_autotune as t
tuner, counting = t.decorated({db!r}, {family!r})
done = t.launched(tuner, {m}, {d})
print(json.dumps({{"answered_from": list(tuner.answered_from.values()), "timed": tuner.timed_launches,
                  "benchmarked": len(tuner.benchmarked_keys), "launches": counting.count, "error": done["error"]}}))
"""


def in_a_fresh_process(db: str, family: str | None, m: int, d: int) -> dict:
    code = CHILD.format(here=str(Path(__file__).parent), db=db, family=family, m=m, d=d)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def device() -> tuple[str, str]:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return torch.cuda.get_device_name(), f"sm_{major}{minor}"


def prefill(db: str, name: str, origin: str, shape: dict, timed: list[tuple[dict, float]]) -> None:
    """A measured run on this GPU, as a search of the family file records one."""
    gpu, arch = device()
    run = RunInfo(
        name=run_name(f"test {name}", f"{name}-{shape}"), family=name, origin=origin, shape=shape, arch=arch,
        objective=MEASURED_OBJECTIVE, gpu=gpu, run_id=f"{name}-{shape}",
    )  # fmt: skip
    rows = [
        {"number": i, "config": c, "outcome": "measured", "value": v, "census": {}, "source": "test"}
        for i, (c, v) in enumerate(timed)
    ]
    TuningDB(db).add_runs([(run, rows)])


@pytest.fixture
def db(tmp_path) -> str:
    return "sqlite:///" + str(tmp_path / "tuning.db")


def test_a_key_the_database_answers_launches_once_and_times_nothing(db):
    fam = load_family(FAMILY)
    shape = {"m": 4096, "d": 2048}
    slow, fast = {"BLOCK": 512, "num_warps": 4, "num_stages": 1}, {"BLOCK": 2048, "num_warps": 8, "num_stages": 1}
    prefill(db, fam.name, fam.origin, shape, [(slow, 30.0), (fast, 18.0)])
    tuner, counting = decorated(db, FAMILY)
    done = launched(tuner, 4096, 2048)
    key = next(iter(tuner.answered_from))
    picked = tuner.answers[key].config
    assert tuner.answered_from == {key: at.DATABASE} and (picked.kwargs, picked.num_warps) == ({"BLOCK": 2048}, 8)
    assert tuner.timed_launches == 0 and tuner.benchmarked_keys == [] and counting.count == 1
    assert done["error"] < 1e-5 and done["inputs_kept"]


@pytest.mark.parametrize("family", [FAMILY, None], ids=["family", "bare"])
def test_an_unknown_key_is_benchmarked_once_then_answered_from_the_database_in_the_next_process(db, family):
    tuner, counting = decorated(db, family)
    done = launched(tuner, 2048, 1024)
    key = next(iter(tuner.answered_from))
    assert tuner.answered_from == {key: at.BENCHMARK} and tuner.benchmarked_keys == [key]
    assert tuner.timed_launches > 0
    assert done["error"] < 1e-5 and done["inputs_kept"]
    assert counting.outputs[-1] == done["y"]  # the one real launch: the last
    assert done["y"] not in counting.outputs[:-1]  # the benchmark wrote clones only (none through the worker)
    if family is None:
        assert counting.count > 1
    again = launched(tuner, 2048, 1024)
    assert len(tuner.benchmarked_keys) == 1 and again["error"] < 1e-5  # known now: launched, not benchmarked

    rows = [e for e in TuningDB(db, create=False).entries(objective=MEASURED_OBJECTIVE) if e.measured]
    gpu, arch = device()
    assert rows and {(e.run.gpu, e.run.arch, e.source) for e in rows} == {(gpu, arch, "autotune")}
    assert {json.dumps(e.run.shape, sort_keys=True) for e in rows} == {
        json.dumps({"m": 2048, "d": 1024} if family else {"N": 1024}, sort_keys=True)
    }

    child = in_a_fresh_process(db, family, 2048, 1024)
    assert child["answered_from"] == [at.DATABASE] and child["timed"] == 0 and child["benchmarked"] == 0
    assert child["launches"] == 1 and child["error"] < 1e-5


def test_the_database_answers_a_shape_it_lacks_from_the_nearest_without_timing(db):
    tuner, _ = decorated(db, None)
    launched(tuner, 1024, 2048)
    child = in_a_fresh_process(db, None, 1024, 2304)  # N = 2304: nearest measured N is 2048
    assert child["answered_from"] == [at.NEAREST] and child["timed"] == 0 and child["launches"] == 1
    assert child["error"] < 1e-5


def test_a_search_of_the_family_fills_the_rows_the_decorator_answers_from(db, tmp_path):
    """`mage-tune search` of the family file ahead of time; the decorator over the configs the search wrote
    (best/triton_configs.json) answers the searched shape from the database, timing nothing."""
    import triton

    run_dir = tmp_path / "run"
    env = {**os.environ, "MAGE_TUNE_DB": db}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    args = ["search", FAMILY, "--m", "4096", "--d", "2048", "--trials", "4", "--run-dir", str(run_dir)]
    done = subprocess.run(
        [sys.executable, "-m", "mage_tune", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=os.getcwd(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads((run_dir / "best" / "triton_configs.json").read_text())
    searched = [
        triton.Config({"BLOCK": c["BLOCK"]}, num_warps=c["num_warps"], num_stages=c["num_stages"]) for c in listed
    ]
    tuner, counting = decorated(db, FAMILY, searched)
    result = launched(tuner, 4096, 2048)
    key = next(iter(tuner.answered_from))
    rows = [e for e in TuningDB(db, create=False).entries(objective=MEASURED_OBJECTIVE) if e.measured]
    assert tuner.answered_from == {key: at.DATABASE} and tuner.answers[key].time_us == min(e.value for e in rows)
    assert tuner.answers[key].index == 0  # the search's best, first in its list
    assert tuner.timed_launches == 0 and counting.count == 1 and result["error"] < 1e-5
