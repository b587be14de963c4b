"""The choice of a config per shape (mage_tune.load(family).choice(shape)), without a GPU: each source in its turn
(measured here, nearest measured shape, model, default), the user's database before the shipped data, another
GPU's shapes a factor of two apart in one more dimension, and the GPU and arch taken from the data where none is given.
Every expectation is recomputed here from the runs the test wrote."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from tuning_data import ARCH, GPU, layernorm_configs, made_up_time, make_db, run

import mage_tune
from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.runtime import load
from mage_tune.tuning import choice as choice_module
from mage_tune.tuning import shipped
from mage_tune.tuning.choice import TunedKernel

FAMILY = get_family("layernorm")
SHAPES = ({"m": 4096, "d": 768}, {"m": 4096, "d": 2048}, {"m": 1024, "d": 1024})


@pytest.fixture(autouse=True)
def no_device(monkeypatch):
    """Answer as on a machine without a GPU, wherever the tests run."""
    monkeypatch.setattr(choice_module.device, "has_gpu", lambda: False)


def _measured(db_url: str) -> dict[str, list[tuple[float, dict]]]:
    """(time, config) of every trial the fixture wrote, per shape as JSON, fastest first."""
    out: dict[str, list[tuple[float, dict]]] = {}
    for seed, shape in enumerate(SHAPES):
        for c in layernorm_configs(shape, 14, seed):
            out.setdefault(json.dumps(shape, sort_keys=True), []).append((made_up_time(c, shape), c))
    return {k: sorted(v, key=lambda p: p[0]) for k, v in out.items()}


def test_measured_here_is_the_fastest_at_the_shape(layernorm_db):
    kernel = load("layernorm", db=layernorm_db, use_shipped=False)
    for shape in SHAPES:
        best_time, best = _measured(layernorm_db)[json.dumps(shape, sort_keys=True)][0]
        picked = kernel.choice(shape, gpu=GPU, arch=ARCH)
        assert picked.source == "measured here" and picked.data == "tuning database"
        assert picked.config == best and picked.time_us == pytest.approx(best_time)
        assert picked.measured_shape == shape
        launch = FAMILY.launch(best, shape, ARCH)
        assert (picked.launch.grid, picked.launch.block, picked.launch.dynamic_shared) == (
            launch.grid,
            launch.block,
            launch.dynamic_shared,
        )


def test_nearest_measured_shape_whose_config_is_valid_here(layernorm_db):
    kernel = load("layernorm", db=layernorm_db, use_shipped=False)
    measured = _measured(layernorm_db)
    for shape in ({"m": 4096, "d": 800}, {"m": 8192, "d": 1536}, {"m": 512, "d": 64}):
        distance = {
            k: math.dist([math.log2(v) for v in shape.values()], [math.log2(json.loads(k)[d]) for d in shape])
            for k in measured
        }
        expect = None
        for k in sorted(measured, key=lambda k: distance[k]):
            valid = [(t, c) for t, c in measured[k] if not FAMILY.violations(c, shape, ARCH)]
            if valid:
                expect = (json.loads(k), *valid[0])
                break
        picked = kernel.choice(shape, gpu=GPU, arch=ARCH)
        near, time_us, config = expect
        assert picked.source == f"nearest measured shape m={near['m']},d={near['d']}"
        assert picked.config == config and picked.time_us == pytest.approx(time_us)
        assert picked.measured_shape == near and not FAMILY.violations(picked.config, shape, ARCH)
        assert picked.launch == FAMILY.launch(config, shape, ARCH)  # launched at this shape, not the measured one


def test_the_model_where_no_measured_config_is_valid(layernorm_db):
    """At an odd width no measured config (all vec 8 or 16) is valid; the model, fitted on the 42 trials, picks."""
    shape = {"m": 4096, "d": 767}
    assert all(FAMILY.violations(c, shape, ARCH) for rows in _measured(layernorm_db).values() for _, c in rows)
    picked = load("layernorm", db=layernorm_db, use_shipped=False).choice(shape, gpu=GPU, arch=ARCH)
    assert picked.source == "model" and picked.data == "tuning database"
    assert not FAMILY.violations(picked.config, shape, ARCH) and picked.config["vec"] == 4
    assert picked.time_us is None and picked.measured_shape is None


def test_the_default_where_nothing_else_answers(tmp_path):
    shape = {"m": 4096, "d": 767}
    few = make_db(tmp_path / "few.sqlite", [run("layernorm", SHAPES[0], layernorm_configs(SHAPES[0], 3, 0))])
    for kernel in (load("layernorm", db=few, use_shipped=False), load("layernorm", db="off", use_shipped=False)):
        picked = kernel.choice(shape, gpu=GPU, arch=ARCH)
        assert picked.source == "default" and picked.data == ""
        assert picked.config == FAMILY.default_config(shape, ARCH)


def test_the_users_database_before_the_shipped_data(tmp_path):
    h200 = "NVIDIA H200"
    ours = [e for e in shipped.entries("layernorm", ARCH) if e.run.gpu == h200]
    by_shape: dict[str, list] = {}
    for e in ours:
        by_shape.setdefault(json.dumps(e.run.shape, sort_keys=True), []).append(e)
    first, second = sorted(by_shape)[:2]
    shape, other = json.loads(first), json.loads(second)
    fastest = min(
        (e for e in by_shape[first] if not FAMILY.violations(FAMILY.with_defaults(e.config), shape, ARCH)),
        key=lambda e: e.value,
    )
    picked = load("layernorm", db="off").choice(shape, gpu=h200, arch=ARCH)
    assert picked.source == "measured here" and picked.data == shipped.LABEL
    assert picked.config == FAMILY.with_defaults(fastest.config) and picked.time_us == fastest.value

    # The user's own trials at that shape on the H200 win, slower or not; a shape they lack is the shipped one's.
    mine = layernorm_configs(shape, 3, 7)
    url = make_db(tmp_path / "mine.sqlite", [run("layernorm", shape, mine, gpu=h200)])
    kernel = load("layernorm", db=url)
    picked = kernel.choice(shape, gpu=h200, arch=ARCH)
    assert picked.data == "tuning database" and picked.source == "measured here"
    assert picked.config == min(mine, key=lambda c: made_up_time(c, shape))
    assert kernel.choice(other, gpu=h200, arch=ARCH).data == shipped.LABEL
    assert load("layernorm", db=url, use_shipped=False).choice(other, gpu=h200, arch=ARCH).data == "tuning database"


def test_a_pick_of_another_gpu_s_trials_says_whose(layernorm_db):
    picked = load("layernorm", db=layernorm_db, use_shipped=False).choice(SHAPES[0], gpu="Other GPU", arch=ARCH)
    assert picked.source == f"nearest measured shape m=4096,d=768 on {GPU}"
    assert picked.config == _measured(layernorm_db)[json.dumps(SHAPES[0], sort_keys=True)][0][1]


def test_another_gpu_s_shape_counts_one_doubling_further(tmp_path):
    """This GPU's shape 0.4 away is nearer than another GPU's exact one (1); the other GPU's exact shape is nearer
    than this GPU's shape 3.9 away (tuning.db.OTHER_GPU_DISTANCE)."""
    near, far, exact = {"m": 4096, "d": 1024}, {"m": 512, "d": 4096}, {"m": 4096, "d": 768}
    mine_near, mine_far, theirs = (layernorm_configs(s, 3, i) for i, s in enumerate((near, far, exact)))
    both = [run("layernorm", near, mine_near), run("layernorm", exact, theirs, gpu="Other GPU")]
    kernel = load("layernorm", db=make_db(tmp_path / "both.sqlite", both), use_shipped=False)
    picked = kernel.choice(exact, gpu=GPU, arch=ARCH)
    assert picked.source == "nearest measured shape m=4096,d=1024"
    assert picked.config == FAMILY.with_defaults(min(mine_near, key=lambda c: made_up_time(c, near)))

    runs = [run("layernorm", far, mine_far), run("layernorm", exact, theirs, gpu="Other GPU")]
    kernel = load("layernorm", db=make_db(tmp_path / "far.sqlite", runs), use_shipped=False)
    picked = kernel.choice(exact, gpu=GPU, arch=ARCH)
    assert picked.source == "nearest measured shape m=4096,d=768 on Other GPU"
    assert picked.config == FAMILY.with_defaults(min(theirs, key=lambda c: made_up_time(c, exact)))
    assert kernel.measured_shapes(GPU, ARCH) == [far]  # an export tables this GPU's shapes alone


def test_gpu_and_arch_from_the_data_where_none_is_given(layernorm_db):
    kernel = load("layernorm", db=layernorm_db)
    assert kernel.context() == (GPU, ARCH)
    assert kernel.context(arch="90") == (GPU, ARCH)
    picked = kernel.choice(SHAPES[0])
    assert (picked.gpu, picked.arch, picked.source) == (GPU, ARCH, "measured here")
    assert load("layernorm", db="off").context() == ("NVIDIA H200", ARCH)  # the shipped data's
    assert load("layernorm", db="off", use_shipped=False).context() == ("", ARCH)
    # with no data at all, an sm_90a-only family's arch is its own target, not the plain default it cannot build for
    assert load("matmul-bf16", db="off", use_shipped=False).context(this_machine=False) == ("", get_arch("sm_90a"))
    assert isinstance(mage_tune.load("layernorm", db="off"), TunedKernel)


def test_choice_checks_the_shape_and_fills_defaults(layernorm_db):
    kernel = load("layernorm", db=layernorm_db, use_shipped=False)
    with pytest.raises(mage_tune.MageError, match="takes the dimensions"):
        kernel.choice({"m": 4096, "k": 3}, gpu=GPU, arch=ARCH)
    picked = kernel.choice({"m": 4096, "d": 768}, gpu=GPU, arch=ARCH)
    assert json.loads(json.dumps(picked.to_json()))["config"] == picked.config
    assert str(picked).startswith("layernorm m=4096,d=768: ") and "[measured here (tuning database" in str(picked)


def test_load_needs_no_gpu_library():
    code = (
        "import sys, mage_tune\n"
        "k = mage_tune.load('layernorm', db='off')\n"
        "print(k.choice({'m': 4096, 'd': 768}, gpu='NVIDIA H200', arch='sm_90').source)\n"
        "print(sorted(n for n in ('torch', 'cupy', 'triton') if n in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["measured here", "[]"]


def test_a_fused_family_takes_the_choice_of_the_family_it_is_tuned_as(layernorm_db, tmp_path):
    fused = load("embedding-layernorm", db=layernorm_db, use_shipped=False)
    assert fused.family.tuned_as == "layernorm"
    plain = load("layernorm", db=layernorm_db, use_shipped=False)
    for shape in SHAPES:
        want = plain.choice(shape, gpu=GPU, arch=ARCH)
        got = fused.choice({**shape, "vocab": 5000}, gpu=GPU, arch=ARCH)
        assert got.family == "embedding-layernorm" and got.shape == {**shape, "vocab": 5000}
        assert got.config == want.config and got.source == f"layernorm's {want.source}"
        assert got.time_us == want.time_us and got.measured_shape == want.measured_shape
    # where the family has trials of its own, they choose (the borrowed data is not read)
    shape = {"m": 4096, "d": 768, "vocab": 5000}
    own = layernorm_configs({"m": 4096, "d": 768}, 3, 7)
    url = make_db(tmp_path / "own.db", [run("embedding-layernorm", shape, own)])
    mine = load("embedding-layernorm", db=url, use_shipped=False).choice(shape, gpu=GPU, arch=ARCH)
    fastest = min(own, key=lambda c: made_up_time(c, shape))
    assert mine.source == "measured here" and mine.config == get_family("embedding-layernorm").with_defaults(fastest)
    # with no data anywhere, its own default (never the other family's default dressed as borrowed)
    bare = load("embedding-layernorm", db="off", use_shipped=False).choice(shape, gpu=GPU, arch=ARCH)
    assert bare.source == "default"


def test_a_family_of_arch_specific_code_chooses_for_the_suffixed_target_of_this_gpu(monkeypatch):
    """On an sm_90 device the wgmma families choose and build for sm_90a (their target_arch); a plain family keeps
    the device's arch; an arch with no suffixed target mage-tune knows (sm_80) stays as it is."""
    from mage_tune.arch import get_arch
    from mage_tune.kernels import load_family

    monkeypatch.setattr(choice_module.device, "has_gpu", lambda: True)
    monkeypatch.setattr(choice_module.device, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(choice_module.device, "arch_of_device", lambda: get_arch("sm_90"))
    sm90 = load_family("mage_tune/kernels/matmul_3xtf32_sm90.py")
    shape = {"m": 1000, "n": 520, "k": 263}
    picked = load(sm90, db="off", use_shipped=False).choice(shape)
    assert picked.arch == "sm_90a" and picked.source == "default"
    shipped_pick = load(sm90, db="off").choice(shape)  # its measured H200 trials ship with the package
    assert shipped_pick.arch == "sm_90a" and shipped_pick.source.startswith("nearest measured shape")
    assert picked.launch == sm90.launch(sm90.complete({}, shape, get_arch("sm_90a")), shape, get_arch("sm_90a"))
    assert load("layernorm", db="off", use_shipped=False).choice({"m": 4096, "d": 768}).arch == "sm_90"
    assert [sm90.target_arch(get_arch(a)).name for a in ("sm_80", "sm_90", "sm_90a")] == ["sm_80", "sm_90a", "sm_90a"]
    assert load_family("mage_tune/kernels/matmul_bf16.py").target_arch(get_arch("sm_90")).name == "sm_90a"
