"""embedding-layernorm, the layer norm with an embedding lookup fused in: the layer norm's space exactly, its rows
read through an int64 index (compiled for real: a 64-bit load of the index, the bounds trap), inputs and a float64
reference of the lookup then the norm, its shape from the tensors' sizes and the scalars packed as the kernel
declares them."""

from __future__ import annotations

import numpy as np
import pytest

from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.kernels import get_family
from mage_tune.problem import Problem
from mage_tune.tuning.warm import random_valid

ARCH = get_arch("sm_90")
FUSED = get_family("embedding-layernorm")
PLAIN = get_family("layernorm")


def test_its_space_is_the_layer_norms_at_any_vocab():
    assert [k.name for k in FUSED.knobs] == [k.name for k in PLAIN.knobs]
    for d in (768, 1000, 4096):
        plain, fused = {"m": 512, "d": d}, {"m": 512, "d": d, "vocab": 300}
        configs = random_valid(Problem(PLAIN, plain, ARCH), 40, d)
        assert configs
        for config in configs:
            assert FUSED.violations(config, fused, ARCH) == []
            assert FUSED.launch(config, fused, ARCH) == PLAIN.launch(config, plain, ARCH)
        assert FUSED.count_configs(fused, ARCH) == PLAIN.count_configs(plain, ARCH)


@pytest.mark.parametrize(
    "settings",
    [{}, {"persist": 4, "threads": 128}, {"passes": "twopass"}, {"passes": "welford"}, {"l2_ahead": 2}],
    ids=["default", "persist", "twopass", "welford", "l2_ahead"],
)
def test_its_rows_are_read_through_the_index(settings):
    shape = {"m": 1000, "d": 768, "vocab": 5000}
    config = FUSED.complete(settings, shape, ARCH)
    source = FUSED.render(config, shape)
    assert "const long long* __restrict__ index" in source and "__trap()" in source
    assert "long long* __restrict__ index" not in PLAIN.render(config, {"m": 1000, "d": 768})
    variant = FUSED.build(config, shape, ARCH)  # checks the PTX's parameters against the packed scalars
    census = census_variant(variant)
    plain = census_variant(PLAIN.build(config, {"m": 1000, "d": 768}, ARCH))
    wide = {bits: n for bits, n in census.sass.global_loads.items() if bits == 64}
    assert wide and not {bits: n for bits, n in plain.sass.global_loads.items() if bits == 64}
    # the same loads of the rows as the layer norm's, plus the index's
    assert census.sass.global_loads.get(128, 0) == plain.sass.global_loads.get(128, 0)


def test_inputs_reference_and_scalars():
    shape = {"m": 37, "d": 64, "vocab": 11}
    inputs = FUSED.make_inputs(shape, np.random.default_rng(0))
    assert inputs["table"].shape == (11, 64) and inputs["index"].shape == (37,)
    assert inputs["index"].dtype == np.int64 and inputs["index"].max() == 10 and inputs["index"].min() >= 0
    rows = inputs["table"][inputs["index"]].astype(np.float64)
    mean = rows.mean(axis=1, keepdims=True)
    var = ((rows - mean) ** 2).mean(axis=1, keepdims=True)
    want = (rows - mean) / np.sqrt(var + 1e-5) * inputs["scale"] + inputs["bias"]
    np.testing.assert_allclose(FUSED.reference(inputs, shape), want, rtol=1e-12)
    m, vocab, eps = FUSED.packed_scalars(shape)
    assert (m.dtype, vocab.dtype, eps.dtype) == (np.int32, np.int64, np.float32) and (m, vocab) == (37, 11)
    assert FUSED.device_dtype("index") == "int64" and FUSED.device_dtype("table") == "float32"
    sizes = {"table": (11, 64), "index": (37,), "scale": (64,), "bias": (64,)}
    assert FUSED.shape_of(sizes) == shape
