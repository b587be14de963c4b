"""Heartbeats for ask/tell trials, so a killed worker's trial goes stale instead of holding its place for ever."""

from __future__ import annotations

import contextlib
import threading


class Heartbeat:
    """Ask/tell trials get no heartbeat from Optuna (only Study.optimize starts one), so beat for them here:
    a trial whose process is killed stops beating and `fail_stale_trials` fails it after the grace period."""

    def __init__(self, storage):
        self.storage = storage
        self.live: set[int] = set()
        self.adopted: set[int] = set()  # other processes' RUNNING trials this one has beaten for once (adopt)
        self._stop = threading.Event()
        self._thread = None
        # RDB storages opened with a heartbeat interval (storage.py); journal files have none.
        self.interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
        if hasattr(storage, "record_heartbeat") and self.interval:
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            for trial_id in list(self.live):
                with contextlib.suppress(Exception):
                    self.storage.record_heartbeat(trial_id)

    def add(self, trial) -> None:
        self.live.add(trial._trial_id)
        if self._thread is not None:
            with contextlib.suppress(Exception):
                self.storage.record_heartbeat(trial._trial_id)

    def discard(self, trial) -> None:
        self.live.discard(trial._trial_id)

    def adopt(self, running) -> None:
        """Beat once for each RUNNING trial of another process. Optuna fails only trials that have beaten at least
        once, so a process killed between ask() and its first beat would leave a trial RUNNING for ever, holding a
        place; with this one beat it goes stale after the grace period unless its owner is alive and beating."""
        if self._thread is None:
            return
        for trial in running:
            if trial._trial_id not in self.live and trial._trial_id not in self.adopted:
                self.adopted.add(trial._trial_id)
                with contextlib.suppress(Exception):
                    self.storage.record_heartbeat(trial._trial_id)

    def close(self) -> None:
        self._stop.set()
