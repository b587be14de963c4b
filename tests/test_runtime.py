"""The CPU side of launching tuned kernels on tensors (mage_tune/runtime.py): which parameters are inputs, how a
shape follows from the inputs' dimensions (Family.input_dims / shape_of), and the errors for inputs that disagree.
The launches themselves are in tests/torch/test_gpu_torch_ops.py."""

from __future__ import annotations

import pytest

import mage_tune
from mage_tune.errors import InputError
from mage_tune.kernels import load_family
from mage_tune.kernels.registry import BUILTINS
from mage_tune.runtime import RunnableKernel


def test_a_loaded_family_can_launch_and_names_its_inputs():
    kernel = mage_tune.load("layernorm", db="off")
    assert isinstance(kernel, RunnableKernel)
    assert kernel.inputs == ("x", "scale", "bias")
    assert mage_tune.load("matmul-3xtf32", db="off").inputs == ("A", "B")


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_each_builtin_family_says_how_its_shape_follows_from_its_inputs(name):
    family = load_family(name)
    assert family.input_dims, f"{name} gives no input_dims"
    assert set(family.input_dims) <= set(family.param_names)
    assert {d for dims in family.input_dims.values() for d in dims} == set(family.dims)
    shape = family.shape_from({d: family.default_dims.get(d, 256) for d in family.dims})
    dims = {k: tuple(shape[d] for d in names) for k, names in family.input_dims.items()}
    assert family.shape_of(dims) == shape


def test_inputs_that_disagree_are_named():
    ln = load_family("layernorm")
    assert ln.shape_of({"x": (300, 768), "scale": (768,), "bias": (768,)}) == {"m": 300, "d": 768}
    with pytest.raises(InputError, match="input bias has d = 767 where an earlier input has 768"):
        ln.shape_of({"x": (300, 768), "scale": (768,), "bias": (767,)})
    with pytest.raises(InputError, match=r"input x has 3 dimensions \(2, 300, 768\); it takes 2 \(m × d\)"):
        ln.shape_of({"x": (2, 300, 768), "scale": (768,), "bias": (768,)})
    with pytest.raises(InputError, match="takes an input 'scale'"):
        ln.shape_of({"x": (300, 768)})


def test_binding_tensors_by_position_and_name_refuses_what_does_not_fit():
    kernel = mage_tune.load("layernorm", db="off")
    assert list(kernel._bind(("x", "w"), {"bias": "b"})) == ["x", "scale", "bias"]
    with pytest.raises(InputError, match="takes 3 inputs"):
        kernel._bind(("x", "w", "b", "y"), {})
    with pytest.raises(InputError, match="has no input 'y'"):
        kernel._bind(("x", "w", "b"), {"y": 1})
    with pytest.raises(InputError, match="input scale given twice"):
        kernel._bind(("x", "w", "b"), {"scale": 1})
    with pytest.raises(InputError, match="input bias not given"):
        kernel._bind(("x", "w"), {})
