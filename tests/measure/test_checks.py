"""Each output checked on its own, without a GPU: the metrics on small arrays with known answers, a failing or
unwritten output named, results and record lines with and without per-output checks, the copy baselines of a
family with in-place outputs (tests/fixtures/data/inplace_axpy_family.py), and the harness's check, restores, graph
probe and verification after timing run on the host with a numpy stand-in for torch."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from mage_tune.errors import ConfigError
from mage_tune.kernels import load_family
from mage_tune.kernels.base import OUT
from mage_tune.measure import baselines, checks
from mage_tune.measure.records import OutputCheck, Result, Timing
from mage_tune.measure.summary import errors_text
from mage_tune.records import schema

AXPY = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "inplace_axpy_family.py"


def test_rel_l2_is_the_norm_of_the_difference_over_the_norm_of_the_reference():
    assert checks.rel_l2([1.0, 2.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(1 / math.sqrt(14))
    assert checks.rel_l2([3.0, 4.0], [3.0, 4.0]) == 0.0
    assert checks.rel_l2([1.0], [0.0]) == pytest.approx(1e300)  # a zero reference: any difference is huge


def test_max_rel_counts_one_element_in_full_against_a_millionth_of_the_largest():
    # elementwise 0.5 / 1, 0 / 4 and 0.001 / (1e-6 · 4): the element at zero is measured against 4e-6
    assert checks.max_rel([1.5, -4.0, 0.001], [1.0, -4.0, 0.0]) == pytest.approx(250.0)
    assert checks.max_rel([1.5, -4.0, 0.0], [1.0, -4.0, 0.0]) == pytest.approx(0.5)
    # an error spread thin is small in rel_l2 but not in max_rel
    ref = np.ones(10_000)
    got = ref.copy()
    got[7] = 1.1
    assert checks.rel_l2(got, ref) == pytest.approx(0.001)
    assert checks.max_rel(got, ref) == pytest.approx(0.1)
    assert checks.max_rel([0.0, 0.0], [0.0, 0.0]) == 0.0


def test_ulp_in_float32_and_float16_is_numpys_spacing_at_the_reference():
    ref = np.array([1.0, 3.0, 0.75, 0.0])
    one_up = ref + np.array([2.0**-23, 2.0**-22, 2.0**-24, 2.0**-148])
    assert checks.ulp_of(ref, "float32").tolist() == [2.0**-23, 2.0**-22, 2.0**-24, 2.0**-149]
    assert checks.ulp(one_up, ref, "float32") == pytest.approx(2.0)  # 2^-148 at zero: two subnormal steps
    assert checks.ulp(one_up[:3], ref[:3], "float32") == pytest.approx(1.0)
    assert checks.ulp([1.0 + 2.0**-24], [1.0], "float32") == pytest.approx(0.5)
    assert checks.ulp_of([1.0, 1000.0, 0.0], "float16").tolist() == [2.0**-10, 0.5, 2.0**-24]
    assert checks.ulp([1000.25], [1000.0], "float16") == pytest.approx(0.5)
    assert checks.ulp([-1.0 - 2.0**-10], [-1.0], "float16") == pytest.approx(1.0)
    assert np.isfinite(checks.ulp_of([1e40, 7e4], "float32")).all()  # past the largest value: still finite
    assert np.isfinite(checks.ulp_of([7e4], "float16")).all()


def test_ulp_in_bfloat16_has_seven_fraction_bits_and_the_smallest_normals_spacing_below_it():
    ref = np.array([1.0, 3.0, 0.75, 2.0, np.nextafter(2.0, 0.0), -6.0])
    assert checks.ulp_of(ref, "bfloat16").tolist() == [2.0**-7, 2.0**-6, 2.0**-8, 2.0**-6, 2.0**-7, 2.0**-5]
    assert checks.ulp([1.0 + 2.0**-7, 3.0 + 2.0**-7], [1.0, 3.0], "bfloat16") == pytest.approx(1.0)
    assert checks.ulp([3.0 + 2.0**-7], [3.0], "bfloat16") == pytest.approx(0.5)
    tiny = 1e-40  # below bfloat16's smallest normal, 2^-126: spaced as 2^-133
    assert checks.ulp_of([tiny, 0.0, 2.0**-126], "bfloat16").tolist() == [2.0**-133] * 3
    assert checks.ulp([tiny + 2.0**-132], [tiny], "bfloat16") == pytest.approx(2.0)
    with pytest.raises(ValueError, match="device dtype"):
        checks.ulp_of([1.0], "float64")


def test_an_output_over_its_tolerance_is_named_with_its_metric():
    ref = np.array([1.0, 2.0, 4.0])
    passed = checks.compare("y", "ulp", ref + 2.0**-23, ref, 1.0, "float32")
    assert passed.check == OutputCheck("y", "ulp", pytest.approx(1.0), 1.0, True) and passed.why == ""
    assert passed.max_abs == pytest.approx(2.0**-23) and passed.rel_l2 > 0
    failed = checks.compare("mean", "rel_l2", 1.01 * ref, ref, 1e-5, "float32")
    assert not failed.check.ok and failed.check.error == pytest.approx(0.01)
    assert failed.why == "mean: relative error 0.01 over tolerance 1e-05"
    worst = checks.compare("y", "max_rel", [1.0, 2.0, 4.4], ref, 1e-3, "float32")
    assert worst.why == "y: largest relative error 0.1 over tolerance 0.001"
    ulps = checks.compare("y", "ulp", ref + 2.0**-20, ref, 1.0, "float32")
    assert ulps.why == "y: error in ulps 8 over tolerance 1"
    # the one output of a family that declares none: said as it always was
    assert (
        checks.compare(OUT, "rel_l2", 1.01 * ref, ref, 1e-5, "float32").why
        == "relative error 0.01 over tolerance 1e-05"
    )
    with pytest.raises(ValueError, match="metric"):
        checks.error("l1", ref, ref, "float32")


def test_an_output_not_written_or_not_finite_fails_with_a_count():
    ref = np.array([1.0, 2.0, 3.0, 4.0])
    got = np.array([1.0, np.nan, np.inf, 4.0])
    named = checks.compare("sums", "ulp", got, ref, 1.0, "float32")
    assert not named.check.ok and math.isnan(named.check.error) and math.isnan(named.rel_l2)
    assert named.why == "sums: 2 of 4 outputs not written or not finite"
    assert checks.compare(OUT, "rel_l2", got, ref, 1e-5, "float32").why == "2 of 4 outputs not written or not finite"
    wrong_size = checks.compare("sums", "rel_l2", ref[:3], ref, 1e-5, "float32")
    assert not wrong_size.check.ok and "3 elements" in wrong_size.why
    assert checks.compare("m", "rel_l2", ref.reshape(2, 2), ref, 1e-5, "float32").check.ok  # same size, any shape


def _result(**more) -> Result:
    timings = (Timing("cold", 2.0, 1.9, 2.1, 10, 10, 3),)
    return Result("v", "variant", 0, True, rel_err=1e-7, max_abs_err=1e-6, timings=timings, config={"t": 1}, **more)


def test_results_keep_each_outputs_check_and_old_records_still_read():
    checked = (OutputCheck("y", "ulp", 0.5, 1.0, True), OutputCheck("sums", "rel_l2", 9e-8, 1e-5, True))
    result = _result(outputs=checked)
    data = json.loads(json.dumps(result.to_json()))  # as a record line holds it
    assert data["outputs"] == [
        {"name": "y", "metric": "ulp", "error": 0.5, "tolerance": 1.0, "ok": True},
        {"name": "sums", "metric": "rel_l2", "error": 9e-8, "tolerance": 1e-5, "ok": True},
    ]
    assert Result.from_json(data) == result
    old = {k: v for k, v in data.items() if k != "outputs"}
    assert Result.from_json({**old, "added_later": 1}) == _result()
    assert errors_text(result) == "y 0.5 ulp, sums 9.0e-08"
    assert errors_text(_result()) == "1.0e-07"
    assert errors_text(_result(outputs=(OutputCheck(OUT, "rel_l2", 1e-7, 1e-5, True),))) == "1.0e-07"
    assert errors_text(_result(outputs=(OutputCheck("y", "max_rel", math.nan, 1e-5, False),))) == "y not finite"


def test_record_lines_with_each_outputs_check_validate_and_old_lines_still_do():
    result = json.loads(json.dumps(_result(outputs=(OutputCheck("y", "ulp", 0.5, 1.0, True),)).to_json()))
    old = {k: v for k, v in result.items() if k != "outputs"}
    session = {"copy_gbs": 4000.0, "control_us": 60.0}
    for measurement in (result, old):
        trial = {"number": 0, "outcome": "measured", "value": 2.0, "config": {}, "measurement": measurement}
        assert schema.problem("trial", trial) == ""
        assert schema.problem("baseline", {"result": measurement, "session": session}) == ""
    damaged = {**result, "outputs": [{"name": "y", "ok": "yes"}]}
    assert "ok" in schema.problem("baseline", {"result": damaged, "session": session})
    trial = {"number": 0, "outcome": "failed", "measurement": {**result, "outputs": [{"ok": False}]}}
    assert "name" in schema.problem("trial", trial)


def test_copies_write_the_first_written_output_and_a_family_only_in_place_offers_none():
    family = load_family(str(AXPY))
    shape = family.shape_from(n=1 << 20)
    copying = type("Copying", (type(family),), {"copy_of": "x"})()
    jobs = baselines.copy_jobs(copying, shape)
    assert jobs and all(j.expect == "x" and j.config["bytes"] == 4 * 1024 for j in jobs)  # sums: 1024 floats
    assert baselines.copy_target(copying, shape) == "sums"
    only = load_family(f"{AXPY}:AXPY_ONLY")
    assert only.inplace_names() == ("y",) and only.output_shapes(shape) == {}
    only_copying = type("OnlyCopying", (type(only),), {"copy_of": "x"})()
    assert baselines.copy_jobs(only_copying, shape) == []
    with pytest.raises(ConfigError, match="offers: none"):
        baselines.baseline_jobs(only_copying, shape, ("copy",))


# --- the harness's flow, emulated on the host ----------------------------------------------------------------------
# A numpy stand-in for the few torch calls the harness makes, whose graph capture records the launches (Python
# closures) and whose replay runs them: enough to run the check, the restores, the graph probe and the verification
# after timing without a GPU (tests/measure/test_gpu_outputs.py runs them on one).


class _Tensor:
    def __init__(self, array: np.ndarray):
        self.a = array

    def cuda(self):
        return _Tensor(self.a.copy())

    def to(self, dtype):
        return self if self.a.dtype == dtype else _Tensor(self.a.astype(dtype))

    def float(self):
        return _Tensor(self.a.astype(np.float32))

    def double(self):
        return _Tensor(self.a.astype(np.float64))

    def cpu(self):
        return _Tensor(self.a.copy())

    def numpy(self):
        return self.a

    def clone(self):
        return _Tensor(self.a.copy())

    def fill_(self, value):
        _FakeTorch.run(lambda: self.a.fill(value))

    def copy_(self, other):
        _FakeTorch.run(lambda: np.copyto(self.a, other.a))

    def numel(self):
        return self.a.size

    def element_size(self):
        return self.a.itemsize

    def data_ptr(self):
        return self.a.ctypes.data

    def all(self):
        return bool(np.all(self.a))


class _Graph:
    def __init__(self):
        self.ops = []

    def replay(self):
        for op in self.ops:
            op()


class _Capture:
    def __init__(self, graph=None):
        self.graph = graph

    def __enter__(self):
        _FakeTorch.capturing = self.graph

    def __exit__(self, *exc):
        _FakeTorch.capturing = None


class _Event:
    def __init__(self, enable_timing=False):
        self.at = 0.0

    def record(self):
        self.at = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3


class _Stream:
    cuda_stream = 0

    def synchronize(self):
        pass


class _FakeTorch:
    float32, float16, bfloat16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float32)
    capturing: _Graph | None = None

    @classmethod
    def run(cls, op):
        if cls.capturing is not None:
            cls.capturing.ops.append(op)
        else:
            op()

    from_numpy = staticmethod(_Tensor)
    isnan = staticmethod(lambda t: _Tensor(np.isnan(t.a)))
    equal = staticmethod(lambda a, b: bool(np.array_equal(a.a, b.a)))
    empty = staticmethod(lambda shape, dtype=None, device=None: _Tensor(np.full(shape, 7.0, dtype=dtype)))

    class cuda:  # as torch.cuda
        synchronize = staticmethod(lambda: None)
        CUDAGraph = _Graph
        Stream = _Stream
        Event = _Event
        stream = staticmethod(lambda stream: _Capture())
        graph = staticmethod(lambda graph, stream=None: _Capture(graph))
        current_stream = staticmethod(_Stream)

    class backends:  # as torch.backends
        class cuda:
            class matmul:
                allow_tf32 = True

        class cudnn:
            allow_tf32 = True


def _axpy(broken: bool = False, in_graphs: bool = True):
    """The fixture's kernel on the host (y = 0.75·x + y rounded once, per-chunk sums); `in_graphs=False` launches
    nothing while a graph is captured."""

    def launch(bufs):
        def step():
            new = (0.75 * bufs["x"].a.astype(np.float64) + bufs["y"].a).astype(np.float32)
            bufs["y"].a[:] = new
            if "sums" in bufs:
                bufs["sums"].a[:] = new.reshape(-1, 1024).sum(axis=1, dtype=np.float32) * (1.01 if broken else 1.0)

        if in_graphs or _FakeTorch.capturing is None:
            _FakeTorch.run(step)

    return launch


@pytest.fixture
def emulated(monkeypatch):
    from mage_tune import gpu
    from mage_tune.measure import harness
    from mage_tune.measure.records import Job, Plan

    monkeypatch.setattr(gpu, "torch", lambda: _FakeTorch)

    def run(spec: str, launch, regimes=("cold", "hot"), n: int = 1 << 16):
        family = load_family(spec)
        shape = family.shape_from(n=n)
        monkeypatch.setattr(harness, "make_launcher", lambda job, family, shape: launch)
        job = Job("emulated", "variant")
        plan = Plan(family=family.origin, shape=shape, jobs=(job,), regimes=regimes, rounds=3, cold_bytes=2**22)
        return harness.Runner(plan, 0).run(job)

    return run


@pytest.mark.parametrize("spec", [str(AXPY), f"{AXPY}:AXPY_ONLY"])
def test_in_place_outputs_are_timed_a_set_per_launch_and_one_launch_hot(emulated, spec):
    result = emulated(spec, _axpy())
    assert result.ok, result.error
    assert [(o.name, o.metric, o.ok) for o in result.outputs][:1] == [("y", "ulp", True)]
    assert result.outputs[0].error <= 0.5
    cold, hot = result.timings
    assert (cold.regime, hot.regime) == ("cold", "hot")
    assert cold.launches_per_graph == cold.buffer_sets == 10  # 512 KB a set: the in-place minimum of sets
    assert hot.launches_per_graph == hot.buffer_sets == 1


def test_a_planted_error_is_named_in_its_output_alone(emulated):
    result = emulated(str(AXPY), _axpy(broken=True))
    assert not result.ok and not result.timings
    assert result.error == "sums: relative error 0.01 over tolerance 1e-05"
    assert [o.ok for o in result.outputs] == [True, False]


@pytest.mark.parametrize("regime", ["cold", "hot"])
@pytest.mark.parametrize("spec", [str(AXPY), f"{AXPY}:AXPY_ONLY"])
def test_without_restores_the_timed_sets_are_caught_after_timing(emulated, monkeypatch, spec, regime):
    from mage_tune.measure import harness

    monkeypatch.setattr(harness.Buffers, "restore", lambda self, sets: None)
    result = emulated(spec, _axpy(), regimes=(regime,))
    assert not result.ok and not result.timings and all(o.ok for o in result.outputs)
    assert result.error.startswith("in-place buffer y of set 0 is not one step from the pristine inputs after timing")


def test_a_graph_that_launches_nothing_is_refused(emulated):
    from mage_tune.measure import harness

    with pytest.raises(harness.GraphEmpty, match="did not change its in-place buffers"):
        emulated(f"{AXPY}:AXPY_ONLY", _axpy(in_graphs=False))
    with pytest.raises(harness.GraphEmpty, match="did not write its output"):
        emulated(str(AXPY), _axpy(in_graphs=False))


def test_a_family_without_outputs_keeps_its_one_buffer(emulated):
    spec = str(Path(__file__).resolve().parents[1] / "fixtures" / "data" / "planted_crash_family.py")

    def twice(bufs):
        _FakeTorch.run(lambda: np.copyto(bufs[OUT].a, 2 * bufs["x"].a))

    def returned(bufs):
        out = _Tensor(np.empty_like(bufs["x"].a))
        _FakeTorch.run(lambda: np.copyto(out.a, 2 * bufs["x"].a))
        return out

    for launch in (twice, returned):
        result = emulated(spec, launch)
        assert result.ok and result.rel_err == 0.0 and [o.name for o in result.outputs] == [OUT]
        assert [t.buffer_sets for t in result.timings] == [8, 1]  # 4 MB of cold bytes over 512 KB sets
        assert all(t.launches_per_graph > t.buffer_sets for t in result.timings)  # as many launches as ~3 ms needs
    result = emulated(spec, lambda bufs: None)
    assert not result.ok and result.error == "65536 of 65536 outputs not written or not finite"


def test_a_variant_gets_its_buffers_by_parameter_name_and_its_scalars_packed(emulated, monkeypatch):
    import types

    from mage_tune.measure import harness
    from mage_tune.measure.records import Job

    calls = []

    class Direct:  # the driver launch (mage_tune/cuda_driver.py, tested on its own): what it is handed
        def __init__(self, function, grid, block, shared):
            self.made = (function, grid, block, shared)

        def launch(self, pointers, scalars, stream):
            calls.append((self.made, pointers, scalars, stream))
            return True

    function = types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=0xF00))  # a RawKernel: its Function's handle
    monkeypatch.setattr(harness, "load_kernel", lambda *a: (None, function))
    monkeypatch.setattr(harness, "KernelLaunch", Direct)
    monkeypatch.setattr(harness, "raw_stream", lambda: 0x5)
    planted = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "planted_crash_family.py"
    for spec, names in ((str(AXPY), ("x", "y", "sums")), (str(planted), ("x", OUT))):
        family = load_family(spec)
        shape = family.shape_from(n=4096)
        bufs = harness.Buffers(family, shape, 0, 2)
        job = Job("v", "variant", grid=(4, 1, 1), block=(256, 1, 1), dynamic_shared=512)
        harness.VariantLauncher(job, family, shape)(bufs.sets[1])
        made, pointers, scalars, stream = calls[-1]
        assert made == (0xF00, (4, 1, 1), (256, 1, 1), 512) and stream == 0x5
        assert list(pointers) == [bufs.sets[1][k].data_ptr() for k in names]
        assert list(scalars) == list(family.packed_scalars(shape))
        assert all(isinstance(a, np.generic) for a in scalars)
