"""The family contract, checked the same way over every family: the built-ins and every example in examples/, as
Optuna runs one storage test suite over every storage. Each family's default config is rendered, compiled (NVRTC and
ptxas, or Triton offline) and censused for real; its inputs, reference and baselines are checked for shape and sense.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from mage_tune.arch import get_arch
from mage_tune.census import census_artifact
from mage_tune.errors import ConfigError
from mage_tune.kernels import builtin_names, load_family
from mage_tune.kernels.base import MAX_DIM, Family

EXAMPLES = [
    "examples/rmsnorm/family.py",
    "examples/rmsnorm/family.py:BF16",
    "examples/rmsnorm/triton_family.py",
    "examples/rmsnorm/triton_family.py:BF16",
    "examples/softmax_autotuned/family.py",
    "examples/layernorm_bulk/family.py",
    "examples/layernorm_cluster/family.py",
    "examples/layernorm_stats/family.py",
    "examples/adamw/family.py",
]
SPECS = [*builtin_names(), *EXAMPLES]
DEVICE = get_arch("sm_90")  # each family builds for its own target there (the Hopper families: sm_90a)


def small_shape(family: Family) -> dict[str, int]:
    """A shape each family takes: its defaults, the other dimensions 1024 (big enough for every example's space)."""
    return family.shape_from({dim: family.default_dims.get(dim, 1024) for dim in family.dims})


@pytest.fixture(scope="module", params=SPECS)
def built(request):
    family = load_family(request.param)
    shape = small_shape(family)
    arch = family.target_arch(DEVICE)
    config = family.default_config(shape, arch)
    return family, shape, config, family.build(config, shape, arch)


@pytest.mark.parametrize("spec", SPECS)
def test_declares_the_contract(spec):
    family = load_family(spec)
    assert isinstance(family, Family) and family.missing_members() == []
    assert family.origin and load_family(family.origin) is family  # found again from what records keep
    assert isinstance(family.name, str) and family.name and family.dims
    names = [k.name for k in family.knobs]
    assert len(names) == len(set(names)) and all(k.domain for k in family.knobs)
    assert set(family.default_dims) <= set(family.dims)
    assert family.tolerance > 0 and all(isinstance(s, str) for s in family.constraint_text())


@pytest.mark.parametrize("spec", SPECS)
def test_free_knobs_are_read_by_no_constraint(spec):
    """A knob declared free is skipped by the enumeration's checks: no value of it may change what is valid."""
    import itertools
    import random

    family = load_family(spec)
    shape = small_shape(family)
    free = [k for k in family.knobs if k.free]
    rng = random.Random(0)
    for _ in range(300 if free else 0):
        config = {k.name: rng.choice(k.domain) for k in family.knobs}
        verdicts = set()
        for values in itertools.product(*(k.domain for k in free)):
            varied = {**config, **dict(zip((k.name for k in free), values, strict=True))}
            verdicts.add(bool(family.violations(varied, shape, family.target_arch(DEVICE))))
        assert len(verdicts) == 1, config


@pytest.mark.parametrize("spec", SPECS)
def test_space_and_settings(spec):
    family = load_family(spec)
    shape = small_shape(family)
    arch = family.target_arch(DEVICE)
    first = next(family.configs(shape, arch))
    assert family.violations(first, shape, arch) == []
    settings = [f"{k}={v}" for k, v in first.items()]
    assert family.parse_settings(settings, shape, arch) == first
    with pytest.raises(ConfigError, match="unknown knob"):
        family.parse_settings(["no_such_knob=1"], shape, arch)
    with pytest.raises(ConfigError, match="between 1 and"):
        family.shape_from({dim: MAX_DIM + 1 for dim in family.dims})


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
def test_a_refusal_is_every_config_s_first_problems(spec, arch):
    """Where a family refuses a shape and arch outright (the listing then checks no combination), each config's
    violations start with those problems; where it does not, its target's defaults are valid."""
    family = load_family(spec)
    shape = small_shape(family)
    arch = get_arch(arch)
    refused = family.refusal(shape, arch)
    config = family.default_config(shape, family.target_arch(DEVICE))
    if refused:
        assert family.violations(config, shape, arch)[: len(refused)] == refused
        assert list(family.configs(shape, arch)) == []
        with pytest.raises(ConfigError, match=refused[0][:40]):
            family.complete({}, shape, arch)
    if arch == family.target_arch(DEVICE):
        assert refused == [] and family.violations(config, shape, arch) == []


def test_the_default_config_builds_and_censuses(built):
    family, shape, config, variant = built
    assert variant.family == family.name and variant.config == config and variant.shape == shape
    art = variant.artifact
    assert art.cubin and art.sass and art.ptx
    assert variant.threads > 0 and all(g > 0 for g in variant.launch.grid)
    (census,) = census_artifact(
        art, kernel=variant.kernel_name, block=variant.block, param_names=list(variant.param_names)
    )
    assert census.occupancy is not None and census.occupancy.blocks_per_sm > 0
    assert census.resources.registers and census.resources.registers > 0
    assert family.render(config, shape).strip()


@pytest.mark.parametrize("spec", SPECS)
def test_inputs_reference_and_cost(spec):
    family = load_family(spec)
    shape = family.shape_from({dim: 8 if dim in ("m",) else 256 for dim in family.dims})
    inputs = family.make_inputs(shape, np.random.default_rng(0))
    # float32 on the host (the harness rounds to the device's dtype), integers (indices) as the device holds them
    assert inputs and all(
        v.dtype == np.float32 or v.dtype == np.dtype(family.device_dtype(k)) == np.int64 for k, v in inputs.items()
    )
    refs = family.references(inputs, shape)
    written = family.output_shapes(shape)
    for output in family.output_list():
        ref = refs[output.name]
        # an in-place output is an input the kernel updates: its reference has that input's shape
        assert ref.shape == (inputs[output.name].shape if output.inplace else tuple(written[output.name]))
        assert ref.dtype == np.float64 and np.isfinite(ref).all()
    assert family.bytes_moved(shape) > 0 and family.flops(shape) >= 0
    for name in [*inputs, *(o.name for o in family.output_list())]:
        assert family.device_dtype(name) in ("float32", "bfloat16", "float16", "int32", "int64")
    if family.copy_of:  # the copy writes the first written output
        first = next(iter(written.values()))
        assert family.copy_of in inputs and inputs[family.copy_of].size == int(np.prod(first))


@pytest.mark.parametrize("spec", SPECS)
def test_baselines_are_the_kinds_it_names(spec):
    family = load_family(spec)
    shape = small_shape(family)
    kernels = family.baseline_kernels(shape)
    labels = [b.label for b in kernels]
    assert len(labels) == len(set(labels))
    assert {b.kind for b in kernels} | ({"copy"} if family.copy_of else set()) == set(family.baselines)


@pytest.mark.parametrize("spec", SPECS)
def test_pickles_as_how_to_find_it(spec):
    """Compile processes and GPU workers get a family by pickle: it travels as its origin and loads the same."""
    family = load_family(spec)
    assert pickle.loads(pickle.dumps(family)) is family
