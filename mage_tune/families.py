"""What a family file imports: the two bases, the pieces of a family's contract (see kernels/base.py), and
`import_file` for the files beside it."""

from mage_tune.compile import SourceOptions
from mage_tune.kernels.base import (
    OUT,
    Baseline,
    CompareFact,
    Config,
    CudaFamily,
    Family,
    Knob,
    Launch,
    Output,
    Scalar,
    Shape,
)
from mage_tune.kernels.registry import load_family
from mage_tune.kernels.triton_family import TritonFamily
from mage_tune.user_files import import_file

__all__ = [
    "OUT",
    "Baseline",
    "CompareFact",
    "Config",
    "CudaFamily",
    "Family",
    "Knob",
    "Launch",
    "Output",
    "Scalar",
    "Shape",
    "SourceOptions",
    "TritonFamily",
    "import_file",
    "load_family",
]
