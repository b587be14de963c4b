"""What a family file imports: the two bases and the pieces of a family's contract (see kernels/base.py)."""

from mage_tune.kernels.base import Baseline, CompareFact, Config, CudaFamily, Family, Knob, Launch, Shape
from mage_tune.kernels.registry import load_family
from mage_tune.kernels.triton_family import TritonFamily

__all__ = [
    "Baseline",
    "CompareFact",
    "Config",
    "CudaFamily",
    "Family",
    "Knob",
    "Launch",
    "Shape",
    "TritonFamily",
    "load_family",
]
