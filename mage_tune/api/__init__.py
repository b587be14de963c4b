"""The whole loop from Python: `mage_tune.search` and `mage_tune.bench` run what `mage-tune search` and `mage-tune
bench` run, with the same arguments and defaults, and return typed results whose `.table()` is what the command
prints and whose `.to_json()` is what its --json prints. The commands are thin wrappers over them.

    >>> import mage_tune
    >>> found = mage_tune.search("layernorm", {"m": 4096, "d": 768}, trials=40, static=True)
    >>> found.best_config, found.best_us, found.run_dir
    >>> timed = mage_tune.bench("layernorm", {"m": 4096, "d": 768}, settings=found.best_config)
    >>> timed.best_us, timed.baselines

Nothing is printed but through the `echo` callable a call is handed (and the bar of `progress=True`); an error is a
MageError (mage_tune.errors), which the command line says in one line.
"""

from mage_tune.api.bench_loop import BenchResult, KernelResult, bench
from mage_tune.api.common import OptionConflict
from mage_tune.api.search_loop import NothingScored, SearchInterrupted, SearchResult, TrialRecord, search

__all__ = [
    "BenchResult",
    "KernelResult",
    "NothingScored",
    "OptionConflict",
    "SearchInterrupted",
    "SearchResult",
    "TrialRecord",
    "bench",
    "search",
]
