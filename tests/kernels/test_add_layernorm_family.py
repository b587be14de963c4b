"""add-layernorm, add-layernorm-sum, add-vector-layernorm and add-row-layernorm(-sum), the layer norm with a residual
add fused in: the layer norm's space with passes=regs alone, each row of res loaded beside x's (compiled for real:
twice x's loads of the rows, the sum's stores beside y's for -sum, one row of res through the read-only path for
-vector, one row beside res loaded as the scale is for -row), the outputs and float64 references of the sum and its
norm, the shape from the tensors' sizes."""

from __future__ import annotations

import numpy as np
import pytest

from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.kernels import get_family
from mage_tune.problem import Problem
from mage_tune.tuning.warm import random_valid

ARCH = get_arch("sm_90")
PLAIN = get_family("layernorm")
ADD, SUM = get_family("add-layernorm"), get_family("add-layernorm-sum")
VECTOR = get_family("add-vector-layernorm")
ROW, ROW_SUM = get_family("add-row-layernorm"), get_family("add-row-layernorm-sum")
SHAPE = {"m": 1000, "d": 768}


@pytest.mark.parametrize("family", [ADD, SUM, VECTOR, ROW, ROW_SUM], ids=lambda f: f.name)
def test_its_space_is_the_layer_norms_with_the_row_in_registers(family):
    for config in random_valid(Problem(PLAIN, SHAPE, ARCH), 60, 3):
        problems = family.violations(config, SHAPE, ARCH)
        if config["passes"] == "regs":
            assert problems == [] and family.launch(config, SHAPE, ARCH) == PLAIN.launch(config, SHAPE, ARCH)
        else:
            assert problems == [
                f"{family.name} adds each row of res to x's as it is loaded, into registers: it "
                f"needs passes=regs, not passes={config['passes']}"
            ]
    assert family.tuned_as == "layernorm" and "passes=regs only" in family.constraint_text()[-1]


@pytest.mark.parametrize(
    "settings",
    [{}, {"persist": 4, "threads": 128}, {"affine": "smem", "rows": 2}, {"vec": 4, "l2_ahead": 1}],
    ids=["default", "persist", "affine-smem", "vec4-l2_ahead"],
)
def test_res_is_loaded_beside_x_and_the_sum_stored_beside_y(settings):
    config = PLAIN.complete({"passes": "regs", **settings}, SHAPE, ARCH)
    plain = census_variant(PLAIN.build(config, SHAPE, ARCH))
    add = census_variant(ADD.build(config, SHAPE, ARCH))
    total = census_variant(SUM.build(config, SHAPE, ARCH))
    x_loads = plain.ptx.params["x"].loads
    assert add.ptx.params["res"].loads == add.ptx.params["x"].loads == x_loads
    assert total.ptx.params["res"].loads == x_loads
    assert add.ptx.params["y"].stores == plain.ptx.params["y"].stores
    assert total.ptx.params["h"].stores == total.ptx.params["y"].stores == plain.ptx.params["y"].stores
    assert "h" not in add.ptx.params


def test_outputs_inputs_and_references():
    shape = {"m": 9, "d": 32}
    inputs = SUM.make_inputs(shape, np.random.default_rng(0))
    assert set(inputs) == {"x", "res", "scale", "bias"} and inputs["res"].shape == (9, 32)
    refs = SUM.references(inputs, shape)
    h = inputs["x"].astype(np.float64) + inputs["res"]
    np.testing.assert_allclose(refs["h"], h, rtol=1e-15)
    mean = h.mean(axis=1, keepdims=True)
    var = ((h - mean) ** 2).mean(axis=1, keepdims=True)
    want = (h - mean) / np.sqrt(var + 1e-5) * inputs["scale"] + inputs["bias"]
    np.testing.assert_allclose(refs["y"], want, rtol=1e-12)
    np.testing.assert_allclose(ADD.references(inputs, shape)["__out__"], want, rtol=1e-12)
    assert SUM.output_shapes(shape) == {"y": (9, 32), "h": (9, 32)} and [o.name for o in SUM.output_list()] == [
        "y",
        "h",
    ]
    assert ADD.output_shapes(shape) == {"__out__": (9, 32)}
    sizes = {"x": (9, 32), "res": (9, 32), "scale": (32,), "bias": (32,)}
    assert ADD.shape_of(sizes) == SUM.shape_of(sizes) == shape
    assert SUM.bytes_moved(shape) - ADD.bytes_moved(shape) == 4 * 9 * 32


def test_one_row_of_res_is_added_to_every_row():
    shape = {"m": 9, "d": 32}
    inputs = VECTOR.make_inputs(shape, np.random.default_rng(1))
    assert inputs["res"].shape == (32,) and inputs["x"].shape == (9, 32)
    h = inputs["x"].astype(np.float64) + inputs["res"].astype(np.float64)[None, :]
    mean = h.mean(axis=1, keepdims=True)
    var = ((h - mean) ** 2).mean(axis=1, keepdims=True)
    want = (h - mean) / np.sqrt(var + 1e-5) * inputs["scale"] + inputs["bias"]
    np.testing.assert_allclose(VECTOR.references(inputs, shape)["__out__"], want, rtol=1e-12)
    assert VECTOR.shape_of({"x": (9, 32), "res": (32,), "scale": (32,), "bias": (32,)}) == shape
    assert VECTOR.bytes_moved(shape) == 4 * (2 * 9 * 32 + 3 * 32)
    config = PLAIN.complete({"passes": "regs"}, SHAPE, ARCH)
    plain = census_variant(PLAIN.build(config, SHAPE, ARCH))
    vector = census_variant(VECTOR.build(config, SHAPE, ARCH))
    # res read as scale is (the same row for every row of x), x as the plain norm reads it
    assert vector.ptx.params["res"].loads == vector.ptx.params["scale"].loads > 0
    assert vector.ptx.params["x"].loads == plain.ptx.params["x"].loads
    assert "res + (xr - x)" not in VECTOR.build(config, SHAPE, ARCH).source


SETTINGS = [{}, {"persist": 4, "threads": 128}, {"affine": "smem", "rows": 2}, {"vec": 4, "l2_ahead": 1}]


@pytest.mark.parametrize("settings", SETTINGS, ids=["default", "persist", "affine-smem", "vec4-l2_ahead"])
def test_a_row_beside_res_is_loaded_with_each_row_and_x_and_res_as_before(settings):
    config = PLAIN.complete({"passes": "regs", **settings}, SHAPE, ARCH)
    for with_row, without in ((ROW, ADD), (ROW_SUM, SUM)):
        row = census_variant(with_row.build(config, SHAPE, ARCH)).ptx.params
        plain = census_variant(without.build(config, SHAPE, ARCH)).ptx.params
        assert set(row) == {*plain, "row"}
        assert all(row[name] == plain[name] for name in plain)  # x, res, scale, bias, y (and h) as without the row
        assert row["row"].loads == row["x"].loads  # one load of the row's columns with each of x's


def test_the_row_is_read_as_the_scale_is_through_the_read_only_path():
    config = PLAIN.complete({"passes": "regs"}, SHAPE, ARCH)
    params = census_variant(ROW.build(config, SHAPE, ARCH)).ptx.params
    assert params["row"].loads == params["scale"].loads > 0 and params["row"].load_bits == params["scale"].load_bits
    source = ROW_SUM.build(config, SHAPE, ARCH).source
    assert "load_ro(p, addend_row + c * STRIDE + t * V)" in source and "res + (xr - x)" in source


def test_the_row_is_added_to_res_then_to_x_in_the_references():
    shape = {"m": 9, "d": 32}
    inputs = ROW_SUM.make_inputs(shape, np.random.default_rng(2))
    assert set(inputs) == {"x", "res", "row", "scale", "bias"}
    assert inputs["res"].shape == (9, 32) and inputs["row"].shape == (32,)
    h = inputs["x"].astype(np.float64) + (inputs["res"].astype(np.float64) + inputs["row"].astype(np.float64))
    mean = h.mean(axis=1, keepdims=True)
    var = ((h - mean) ** 2).mean(axis=1, keepdims=True)
    want = (h - mean) / np.sqrt(var + 1e-5) * inputs["scale"] + inputs["bias"]
    refs = ROW_SUM.references(inputs, shape)
    np.testing.assert_allclose(refs["h"], h, rtol=1e-15)
    np.testing.assert_allclose(refs["y"], want, rtol=1e-12)
    np.testing.assert_allclose(ROW.references(inputs, shape)["__out__"], want, rtol=1e-12)
    sizes = {"x": (9, 32), "res": (9, 32), "row": (32,), "scale": (32,), "bias": (32,)}
    assert ROW.shape_of(sizes) == ROW_SUM.shape_of(sizes) == shape
    assert ROW.param_names == ("x", "res", "row", "scale", "bias", "y")
    assert ROW_SUM.param_names == ("x", "res", "row", "scale", "bias", "y", "h")
    assert ROW.bytes_moved(shape) - ADD.bytes_moved(shape) == ROW_SUM.bytes_moved(shape) - SUM.bytes_moved(shape) == 128
    assert ROW.tuned_as == ROW_SUM.tuned_as == "layernorm"
