"""mage_tune.autotune without a GPU: which config a key runs and why (the database's at exactly this shape, else at
the nearest shape, else a benchmark, recorded so that the next process answers from the database), the key and the
rows' identity (a bare kernel's own; a Triton family's, the rows `mage-tune search` writes). The kernel is a
stand-in that records its launches, the GPU a made-up one, and the benchmark a stand-in timer at the seam the
decorator measures through (RememberingAutotuner.measure); tests/tuning/test_gpu_autotune.py runs the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from tuning_data import ARCH, GPU

from mage_tune.errors import ConfigError, InputError, MeasureError
from mage_tune.kernels.registry import load_family
from mage_tune.records.objectives import MEASURED_OBJECTIVE, STATIC_OBJECTIVE
from mage_tune.tuning import autotune as at
from mage_tune.tuning.db import RunInfo, TuningDB, run_name

triton = pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
RMSNORM = ROOT / "examples" / "rmsnorm" / "triton_family.py"
BLOCKS = ((256, 2), (512, 4), (1024, 4), (2048, 8))
CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=1) for b, w in BLOCKS]


class T:
    """A stand-in tensor: what the decorator reads of one (shape and dtype)."""

    def __init__(self, *shape: int, dtype: str = "float32"):
        self.shape, self.dtype = tuple(shape), dtype


class Kernel:
    """A stand-in for a @triton.jit function: its argument names, and every launch it was asked for."""

    __name__ = "scale_rows"
    src = "def scale_rows(x, y, N, BLOCK): ..."

    def __init__(self, arg_names=("x", "y", "N", "BLOCK")):
        self.arg_names = list(arg_names)
        self.launches: list[dict] = []

    def run(self, *args, grid, warmup, **kwargs):
        self.launches.append({"grid": grid, **dict(zip(self.arg_names, args, strict=False)), **kwargs})


class Timer:
    """The benchmark's stand-in: a made-up time per config (by BLOCK), failing the configs in `fails`."""

    def __init__(self, tuner, fails=()):
        self.tuner, self.fails, self.calls = tuner, set(fails), []

    def __call__(self, ident, call, arch):
        self.calls.append(ident.shape)
        out = []
        for i, c in enumerate(self.tuner.configs):
            config = at.normalized(at.flat_config(c))
            if c.kwargs["BLOCK"] in self.fails:
                out.append(at.Trial(i, config, None, "wrong result"))
            else:
                out.append(at.Trial(i, config, 10.0 + abs(c.kwargs["BLOCK"] - 1024) / 100, "", 100))
        return out


def make(db, fails=(), **more) -> tuple[at.RememberingAutotuner, Kernel, Timer]:
    """A decorated stand-in kernel on the made-up GPU, benchmarked by a Timer: one process's view."""
    kernel = Kernel()
    tuner = at.autotune(configs=CONFIGS, key=["N"], db=db, **more)(kernel)
    tuner.device_of = lambda bound: (GPU, ARCH.name)
    timer = Timer(tuner, fails)
    tuner.measure = timer
    return tuner, kernel, timer


def call(tuner, n: int, m: int = 8, dtype: str = "float32"):
    return tuner[(m,)](T(m, n, dtype=dtype), T(m, n, dtype=dtype), n)


def put(url: str, family: str, shape: dict, timed: dict, *, origin: str = "", gpu: str = GPU, objective=None) -> None:
    """A measured run of `family` at `shape`: config (flat dict) -> µs."""
    key = f"{family}-{shape}-{gpu}-{len(timed)}-{objective}"
    run = RunInfo(
        name=run_name(f"test {key}", key), family=family, origin=origin or family, shape=dict(shape), arch=ARCH.name,
        objective=objective or MEASURED_OBJECTIVE, gpu=gpu, run_id=key,
    )  # fmt: skip
    rows = [
        {"number": i, "config": dict(c), "outcome": "measured", "value": v, "census": {}, "source": "test"}
        for i, (c, v) in enumerate(timed)
    ]
    TuningDB(url).add_runs([(run, rows)])


def flat(block: int, warps: int, stages: int = 1) -> dict:
    return {"BLOCK": block, "num_warps": warps, "num_stages": stages}


BARE = "scale_rows[x:float32,y:float32]"  # the stand-in's rows: its name and its tensors' dtypes


@pytest.fixture
def url(tmp_path) -> str:
    return "sqlite:///" + str(tmp_path / "tuning.db")


# --- the key and whose rows answer it --------------------------------------------------------------------------


def test_the_key_is_the_named_arguments_then_every_dtype(url):
    tuner, _, _ = make(url)
    bound = {"x": T(8, 1024), "y": T(8, 1024, dtype="bfloat16"), "N": 1024}
    assert tuner.key_of(bound) == (1024, "float32", "bfloat16")
    ident = tuner.identity(bound)
    assert ident.name == ident.origin == "scale_rows[x:float32,y:bfloat16]"
    assert ident.shape == {"N": 1024} and ident.family is None


def test_key_values_that_are_not_sizes_name_the_rows_instead():
    kernel = Kernel(("x", "y", "N", "flag", "BLOCK"))
    tuner = at.autotune(configs=CONFIGS, key=["N", "flag"], db="off", name="mine")(kernel)
    ident = tuner.identity({"x": T(4, 64), "y": T(4, 64), "N": 64, "flag": True})
    assert ident.name == "mine[x:float32,y:float32,flag=True]" and ident.shape == {"N": 64}


def test_names_that_are_not_arguments_are_refused():
    with pytest.raises(InputError, match="key names n_cols"):
        at.autotune(configs=CONFIGS, key=["n_cols"])(Kernel())
    with pytest.raises(InputError, match="restore_value names z"):
        at.autotune(configs=CONFIGS, key=["N"], restore_value=["z"])(Kernel())
    with pytest.raises(InputError, match="configs is empty"):
        at.autotune(configs=[], key=["N"])(Kernel())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"configs": [*CONFIGS, {"BLOCK": 64}]}, r"configs\[4\] is \{'BLOCK': 64\}, not a triton.Config"),
        ({"rounds": 0}, "rounds must be a whole number of replays, at least 1; got 0"),
        ({"rounds": 2.5}, "rounds must be a whole number"),
        ({"db": "mysql+nodriver://x/y"}, "not a database URL"),
        ({"db": "mysql://x/y"}, "no Python driver for mysql is installed"),  # the dialect is there, its driver not
        ({"family": "no/such/family.py"}, "no such family file"),
        ({"family": "layernorm"}, "is a CUDA template family; autotune remembers Triton kernels"),
        ({"db": 7}, 'db is 7: a URL, a SQLite file, a TuningDB, None or "off"'),
    ],
)
def test_what_can_be_told_without_a_gpu_is_refused_at_decoration(options, message):
    with pytest.raises(InputError, match=message):
        at.autotune(**{"configs": CONFIGS, "key": ["N"], **options})(Kernel())
    if "family" in options:  # a name nothing knows: the known ones
        with pytest.raises(ConfigError, match=r"autotune of .*: unknown kernel family 'layernrom'; did you mean"):
            at.autotune(configs=CONFIGS, key=["N"], family="layernrom")(Kernel())


def test_another_application_s_sqlite_file_is_refused_at_decoration(tmp_path):
    import sqlite3

    other = tmp_path / "app.db"
    with sqlite3.connect(other) as con:
        con.execute("create table users (id integer)")
    with pytest.raises(InputError, match="a SQLite database of something else"):
        at.autotune(configs=CONFIGS, key=["N"], db=other)(Kernel())
    at.autotune(configs=CONFIGS, key=["N"], db=tmp_path / "new.db", rounds=3)(Kernel())  # made at the first record
    assert not (tmp_path / "new.db").exists()


# --- answering a key -----------------------------------------------------------------------------------------------


def test_an_empty_database_benchmarks_once_records_and_the_next_process_answers_from_it(url):
    tuner, kernel, timer = make(url, fails={2048})
    call(tuner, 1000)
    key = (1000, "float32", "float32")
    assert timer.calls == [{"N": 1000}] and tuner.benchmarked_keys == [key]
    assert tuner.answered_from == {key: at.BENCHMARK} and tuner.timed_launches == 300  # three configs timed
    assert kernel.launches[-1] == {"grid": (8,), "x": kernel.launches[-1]["x"], "y": kernel.launches[-1]["y"],
                                   "N": 1000, **at.launch_kwargs(CONFIGS[2])}  # fmt: skip
    assert tuner.cache[key] is CONFIGS[2] and tuner.best_config is CONFIGS[2]  # BLOCK 1024: 10 µs
    call(tuner, 1000)
    assert len(timer.calls) == 1 and len(kernel.launches) == 2  # known: a dict lookup, one launch

    entries = list(TuningDB(url, create=False).entries(family=BARE))
    assert {e.run.objective for e in entries} == {MEASURED_OBJECTIVE}
    assert {(e.run.gpu, e.run.arch, e.run.shape["N"], e.source) for e in entries} == {(GPU, ARCH, 1000, "autotune")}
    assert "ptxas" in entries[0].run.toolchain and entries[0].run.where == "scale_rows (mage_tune.autotune)"
    by_block = {e.config["BLOCK"]: e for e in entries}
    assert by_block[2048].outcome == "failed" and by_block[2048].value is None
    assert by_block[1024].config == {"BLOCK": 1024, "num_warps": 4, "num_stages": 1, "num_ctas": 1}
    assert by_block[1024].value == 10.0

    later, kernel, timer = make(url)  # a fresh process: the same database
    call(later, 1000)
    assert later.answered_from == {key: at.DATABASE} and later.answers[key].time_us == 10.0
    assert later.timed_launches == 0 and not timer.calls and not later.benchmarked_keys
    assert kernel.launches[-1]["BLOCK"] == 1024 and later.answers[key].run == tuner.answers[key].run


def test_exact_shape_first_then_the_nearest_measured_one(url):
    put(url, BARE, {"N": 1024}, [(flat(1024, 4), 9.0), (flat(512, 4), 8.0)])
    put(url, BARE, {"N": 4096}, [(flat(2048, 8), 30.0), (flat(256, 2), 40.0)])
    tuner, kernel, timer = make(url)
    call(tuner, 1024)
    assert kernel.launches[-1]["BLOCK"] == 512 and tuner.answers[(1024, "float32", "float32")].source == at.DATABASE
    call(tuner, 2048)  # as far from 1024 as from 4096 (log2): the smaller shape first
    answer = tuner.answers[(2048, "float32", "float32")]
    assert (answer.source, answer.measured_shape, kernel.launches[-1]["BLOCK"]) == (at.NEAREST, {"N": 1024}, 512)
    call(tuner, 16384)
    answer = tuner.answers[(16384, "float32", "float32")]
    assert (answer.source, answer.measured_shape, kernel.launches[-1]["BLOCK"]) == (at.NEAREST, {"N": 4096}, 2048)
    assert "nearest at N=4096, 30.00 µs" in str(answer)
    assert not timer.calls and tuner.timed_launches == 0


def test_a_measured_config_that_is_not_among_the_configs_is_passed_over(url):
    put(url, BARE, {"N": 1024}, [(flat(4096, 8), 5.0), (flat(256, 2), 7.0)])  # BLOCK 4096 is not offered
    tuner, kernel, timer = make(url)
    call(tuner, 1024)
    assert kernel.launches[-1]["BLOCK"] == 256 and not timer.calls
    other = "sqlite:///" + url.removeprefix("sqlite:///") + ".2"
    put(other, BARE, {"N": 1024}, [(flat(4096, 8), 5.0), (flat(256, 8), 6.0)])  # neither is: benchmarked
    tuner, kernel, timer = make(other)
    call(tuner, 1024)
    assert timer.calls == [{"N": 1024}] and tuner.answered_from[(1024, "float32", "float32")] == at.BENCHMARK


def test_a_config_spelled_with_triton_defaults_matches():
    assert at.normalized({"BLOCK": 8}) == at.normalized({"BLOCK": 8, "num_warps": 4, "num_stages": 3, "num_ctas": 1})
    assert at.normalized({"BLOCK": 8, "maxnreg": None}) == at.normalized({"BLOCK": 8})


def test_rows_of_another_gpu_family_or_objective_do_not_answer(url):
    put(url, BARE, {"N": 1024}, [(flat(512, 4), 8.0)], gpu="Other GPU")
    put(url, BARE, {"N": 1024}, [(flat(512, 4), 8.0)], objective=STATIC_OBJECTIVE)
    put(url, "scale_rows[x:bfloat16,y:bfloat16]", {"N": 1024}, [(flat(512, 4), 8.0)])
    tuner, _, timer = make(url)
    call(tuner, 1024)
    assert timer.calls == [{"N": 1024}]


def test_a_known_key_reads_nothing_again(url, monkeypatch):
    put(url, BARE, {"N": 1024}, [(flat(512, 4), 8.0)])
    tuner, kernel, _ = make(url)
    call(tuner, 1024)
    monkeypatch.setattr(TuningDB, "entries", lambda *a, **k: pytest.fail("read the database again"))
    monkeypatch.setattr(TuningDB, "__init__", lambda *a, **k: pytest.fail("opened the database again"))
    for _ in range(3):
        call(tuner, 1024)
    assert len(kernel.launches) == 4


def test_what_a_benchmark_measured_answers_this_process_at_other_shapes(url):
    tuner, _, timer = make(url)
    call(tuner, 1000)
    call(tuner, 1100)  # nearest: the shape this process just measured
    assert len(timer.calls) == 1 and tuner.answered_from[(1100, "float32", "float32")] == at.NEAREST


def test_no_database_still_benchmarks_each_key_once():
    tuner, _, timer = make("off")
    call(tuner, 1000)
    call(tuner, 1000)
    assert len(timer.calls) == 1 and tuner.answers[(1000, "float32", "float32")].run == ""


def test_a_key_no_config_runs_at_is_an_error_naming_each_config(url):
    tuner, _, _ = make(url, fails={256, 512, 1024, 2048})
    with pytest.raises(MeasureError, match=r"no config ran correctly \(triton.Config\(BLOCK=256.*wrong result"):
        call(tuner, 1000)


def test_one_config_is_launched_without_a_choice():
    kernel = Kernel()
    tuner = at.autotune(configs=CONFIGS[:1], key=["N"], db="off")(kernel)
    tuner.measure = lambda *a: pytest.fail("benchmarked")
    call(tuner, 1000)
    assert tuner.answered_from == {(1000, "float32", "float32"): at.ONLY} and kernel.launches[0]["BLOCK"] == 256


# --- a Triton family's rows ------------------------------------------------------------------------------------------

RMS_CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=1) for b, w in ((512, 4), (2048, 4), (4096, 8))]


def rms(db, family=str(RMSNORM)):
    """The example's Triton RMSNorm decorated with its family, launched through a stand-in."""
    kernel = load_family(str(RMSNORM)).jit_function
    tuner = at.autotune(configs=RMS_CONFIGS, key=["N"], family=family, db=db)(kernel)
    tuner.families()  # the family's kernel is this one (checked on the real function), then the stand-in launches
    tuner.fn = Kernel(kernel.arg_names)
    tuner.device_of = lambda bound: (GPU, ARCH.name)
    return tuner


def rms_call(tuner, m: int, d: int, dtype: str = "float32"):
    return tuner[(m,)](T(m, d, dtype=dtype), T(d, dtype=dtype), T(m, d, dtype=dtype), d, d, 1e-6)


def test_a_triton_familys_rows_are_the_ones_its_search_writes(url):
    fam = load_family(str(RMSNORM))
    # as runner.Search.run_info names a search's run of the family file
    put(url, fam.name, {"m": 4096, "d": 2048}, [(flat(2048, 4), 20.0), (flat(512, 4), 25.0)], origin=fam.origin)
    tuner = rms(url)
    tuner.measure = lambda *a: pytest.fail("benchmarked")
    rms_call(tuner, 4096, 2048)
    key = (2048, "float32", "float32", "float32")
    answer = tuner.answers[key]
    assert tuner.identity({"x": T(4096, 2048), "w": T(2048), "y": T(4096, 2048), "N": 2048}).shape == {
        "m": 4096, "d": 2048
    }  # fmt: skip
    assert (answer.source, answer.config, answer.time_us) == (at.DATABASE, RMS_CONFIGS[1], 20.0)
    launch = tuner.fn.launches[-1]
    assert (launch["BLOCK"], launch["SINGLE"], launch["num_warps"], launch["num_stages"]) == (2048, True, 4, 1)
    rms_call(tuner, 4096, 8192)  # nearest: the one measured shape; BLOCK 2048 < d now, a loop over the row
    launch = tuner.fn.launches[-1]
    assert tuner.answers[(8192, "float32", "float32", "float32")].source == at.NEAREST
    assert (launch["BLOCK"], launch["SINGLE"]) == (2048, False)


def test_a_family_config_invalid_at_the_shape_is_passed_over(url):
    fam = load_family(str(RMSNORM))
    # BLOCK 4096 over twice the row (d = 1024): the family refuses it there, so its fastest time does not answer
    put(url, fam.name, {"m": 4096, "d": 1024}, [(flat(4096, 8), 5.0), (flat(512, 4), 9.0)], origin=fam.origin)
    tuner = rms(url)
    rms_call(tuner, 4096, 1024)
    assert tuner.fn.launches[-1]["BLOCK"] == 512


def test_the_family_whose_dtypes_fit_answers(url):
    with pytest.raises(InputError, match=r"no family given fits the call.*x is bfloat16, the family's is float32"):
        rms_call(rms(url), 64, 2048, "bfloat16")
    both = rms(url, family=[str(RMSNORM), f"{RMSNORM}:BF16"])
    ident = both.identity({"x": T(64, 2048, dtype="bfloat16"), "w": T(2048, dtype="bfloat16"), "N": 2048})
    assert ident.name == "triton_rmsnorm_bf16" and ident.origin.endswith("triton_family.py:BF16")


def test_the_family_of_another_kernel_is_refused(url):
    kernel = load_family(str(RMSNORM)).jit_function
    other = str(ROOT / "examples" / "softmax_autotuned" / "family.py")
    tuner = at.autotune(configs=RMS_CONFIGS, key=["N"], family=other, db=url)(kernel)
    with pytest.raises(InputError, match="is for another kernel"):
        tuner.families()


def test_a_launch_option_the_family_has_no_knob_for_is_refused():
    fam = load_family(str(RMSNORM))
    assert at.family_config(fam, triton.Config({"BLOCK": 512})) == {"BLOCK": 512, "num_warps": 4, "num_stages": 3}
    with pytest.raises(InputError, match="sets num_ctas=2, which family triton_rmsnorm has no knob for"):
        at.family_config(fam, triton.Config({"BLOCK": 512}, num_ctas=2))


def test_a_family_key_is_benchmarked_through_the_familys_harness_and_recorded_as_its_search_would(url, monkeypatch):
    from mage_tune.measure.records import BenchRun, Result, Timing

    fam = load_family(str(RMSNORM))
    built = []
    monkeypatch.setattr(fam, "build", lambda config, shape, arch, checked: built.append(config) or f"variant {config}")

    def bench(problem, variants, baselines, rounds, seed):
        family, shape, arch = problem.family, problem.shape, problem.arch
        assert family is fam and shape == {"m": 64, "d": 1024} and baselines == () and arch == ARCH
        results = [
            Result(v, "variant", 0, ok=True, timings=(Timing("cold", 5.0 + i, 4.0, 9.0, 50, 4, rounds),),
                   single_launch_us=6.0)
            for i, v in enumerate(variants)
        ]  # fmt: skip
        return BenchRun(fam.name, shape, (), tuple(results), 0, 0, {})

    monkeypatch.setattr(at.measure, "bench", bench)
    tuner = rms(url)
    rms_call(tuner, 64, 1024)
    key = (1024, "float32", "float32", "float32")
    # BLOCK 4096 is over twice the row at d = 1024: pruned, never built
    assert [c["BLOCK"] for c in built] == [512, 2048]
    assert tuner.answers[key].source == at.BENCHMARK and tuner.answers[key].config is RMS_CONFIGS[0]
    assert tuner.timed_launches == 2 * (50 * 7 + at.autotune_bench.SINGLE_REPEATS)
    entries = sorted(TuningDB(url, create=False).entries(family=fam.origin), key=lambda e: e.number)
    assert [(e.outcome, e.value, e.config["BLOCK"]) for e in entries] == [
        ("measured", 5.0, 512), ("measured", 6.0, 2048), ("pruned", None, 4096)
    ]  # fmt: skip
    run = entries[0].run
    assert (run.family, run.origin, run.shape, run.objective) == (fam.name, fam.origin, {"m": 64, "d": 1024},
                                                                  MEASURED_OBJECTIVE)  # fmt: skip
    assert run.defaults == fam.with_defaults({}) and run.family_digest


def test_a_database_that_cannot_be_read_or_written_is_said_and_the_key_still_answered(tmp_path, capsys):
    tuner, kernel, _ = make(str(tmp_path))  # a folder, not a SQLite file
    call(tuner, 1000)
    key = (1000, "float32", "float32")
    assert tuner.answered_from == {key: at.BENCHMARK} and tuner.answers[key].run == ""
    assert kernel.launches[-1]["BLOCK"] == 1024
    err = capsys.readouterr().err
    assert "the tuning database is not read" in err and "is not written" in err
