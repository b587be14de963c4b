"""One problem a family is tuned for: the family, the shape it runs at and the arch it is built for.

Search, bench, the measure plan, the warm start and the tuning choice each work on one such problem; they pass it as
one value rather than `family, shape, arch` side by side. The family's own methods (the plug-in contract,
docs/families.md) keep their `(config, shape, arch)` parameters: a Problem calls them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mage_tune.arch import Arch
from mage_tune.kernels.base import Config, Family, Shape, Variant


@dataclass(frozen=True, eq=False)  # a shape is a dict: a Problem is a value to pass, not a key
class Problem:
    family: Family
    shape: Shape
    arch: Arch

    def violations(self, config: Config) -> list[str]:
        """Why `config` cannot work here ([] when it can): the family's constraints at this shape and arch."""
        return self.family.violations(config, self.shape, self.arch)

    def build(self, config: Config, *, checked: bool = False) -> Variant:
        """`config` built for this shape and arch (`checked`: its constraints were checked just now)."""
        return self.family.build(config, self.shape, self.arch, checked=checked)
