"""mage-tune: generate, census, compare, measure and search GPU kernel variants."""

import importlib
import sys
import types

from mage_tune.errors import MageError

__version__ = "0.1.0"

__all__ = ["MageError", "__version__", "autotune", "bench", "census", "compare", "load", "search"]


def __getattr__(name: str):
    # `mage_tune.census` is the census subpackage, and calling it censuses a file (`mage_tune.census("k.cu")` ->
    # list of Census): imported on first use, so `import mage_tune` stays fast, and callable however often.
    if name == "census":
        import mage_tune.census as census

        return census
    if name == "compare":  # our variant beside a Triton kernel, offline: mage_tune.comparison.compare
        from mage_tune.comparison import compare

        return compare
    if name == "load":  # a family with its tuning data, choosing and launching a config per shape
        from mage_tune.runtime import load

        return load
    if name == "autotune":  # a Triton autotune answered from the tuning database: mage_tune.tuning.autotune
        from mage_tune.tuning.autotune import autotune

        return autotune
    if name == "bench":  # check and time variants beside the baselines on the GPU: mage_tune.api.bench
        from mage_tune.api import bench

        return bench
    if name == "search":  # the search subpackage, callable: mage_tune.search(family, shape, ...) -> SearchResult
        package = importlib.import_module("mage_tune.search")
        if type(package) is types.ModuleType:
            package.__class__ = _CallableSearch
        return package
    raise AttributeError(f"module 'mage_tune' has no attribute {name!r}")


class _CallableSearch(types.ModuleType):
    """`mage_tune.search` is the search subpackage and, called, mage_tune.api.search: the whole search loop from
    Python (see `help(mage_tune.api.search)`)."""

    def __call__(self, *args, **kwargs):
        return importlib.import_module("mage_tune.api").search(*args, **kwargs)


class _Package(types.ModuleType):
    """`mage_tune.search` answers through __getattr__ whatever was imported before: importing any module of the
    search subpackage binds the plain subpackage to that name, which would hide the callable one."""

    @property
    def search(self):
        return __getattr__("search")

    @search.setter
    def search(self, package) -> None:  # the import system binding the subpackage: the getter answers with it
        pass


sys.modules[__name__].__class__ = _Package
