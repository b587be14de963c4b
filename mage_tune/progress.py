"""Progress of a long loop, the one helper every command uses (search, bench, counters).

On a terminal: a bar redrawn in place (tqdm, fit to the output width). Anywhere else (a pipe, a file, a CI log,
TERM=dumb): a plain line each time another tenth of the work is done, at most every `every` items, and one at the
end, e.g. "search layernorm-m4096-d768-sm_90-static: 8/40 trials (20%), best 8.31 µs, 6 s": a log holds a dozen
lines, never thousands of carriage-return redraws.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

from tqdm import tqdm

from mage_tune.textwidth import columns

T = TypeVar("T")


def on_terminal(stream: IO) -> bool:
    """Whether `stream` is a terminal that redraws a line in place."""
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class Progress:
    """`total` items of work named `label`; `update(n)` or `set(done)` as they finish, `note` a short state (the
    best so far). A context manager; `close()` says the last count where a plain line has not."""

    def __init__(
        self, total: int, label: str, unit: str = "item", file: IO | None = None, every: int | None = None
    ) -> None:
        self.total, self.label, self.unit = max(0, int(total)), label, unit
        self.file = file if file is not None else sys.stderr
        self.done, self.note = 0, ""
        self._every = every
        self.step = self._step()
        self._said = 0  # the count the last plain line gave
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._closed = False
        self._bar = None
        if on_terminal(self.file):
            self._bar = tqdm(total=self.total, desc=label, unit=unit, file=self.file, ncols=columns())

    def set_total(self, total: int) -> None:
        """The work turned out to be `total` items (known once a plan is made)."""
        with self._lock:
            self.total = max(0, int(total))
            self.step = self._step()
            if self._bar is not None:
                self._bar.total = self.total
                self._bar.refresh()

    def _step(self) -> int:
        """Items between two plain lines: a tenth of the work, at most `every`."""
        step = max(1, math.ceil(self.total / 10))
        return min(step, self._every) if self._every else step

    @property
    def live(self) -> bool:
        """True where a bar is drawn (a terminal), False where plain lines are written."""
        return self._bar is not None

    def update(self, n: int = 1, note: str | None = None) -> None:
        with self._lock:
            self._set(self.done + n, note)

    def set(self, done: int, note: str | None = None) -> None:
        with self._lock:
            self._set(done, note)

    def _set(self, done: int, note: str | None) -> None:
        self.done = done
        if note is not None:
            self.note = note
        if self._closed:
            return
        if self._bar is not None:
            self._bar.n = done
            if note is not None:
                self._bar.set_postfix_str(note)
            self._bar.refresh()
        elif done >= self._said + self.step or (done >= self.total > self._said):
            self._line()

    def _line(self) -> None:
        self._said = self.done
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        note = f", {self.note}" if self.note else ""
        seconds = time.monotonic() - self._start
        print(
            f"{self.label}: {self.done}/{self.total} {self.unit}s{share}{note}, {seconds:.0f} s",
            file=self.file,
            flush=True,
        )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._bar is not None:
                self._bar.close()
            elif self.done != self._said:
                self._line()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def iterate(self, items: Iterable[T]) -> Iterator[T]:
        """Each of `items`, counted once the caller is done with it (when the next is asked for)."""
        for item in items:
            yield item
            self.update()
