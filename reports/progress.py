"""Progress of a long command on stderr: a bar on a terminal, plain lines otherwise, nothing with ``--quiet``.

A run, a sweep or a live serve can take minutes; a user watching a log file (stderr not a terminal, as in
CI, ``nohup`` or ``2> log``) must see it move too.  :class:`Status` keeps what is going on (a phase, a
count towards a total, the parts at work) and shows it in one of three ways: ``"bar"`` (a tqdm bar),
``"lines"`` (one plain line whenever a phase starts, and every :data:`EVERY_S` seconds while one lasts,
from a daemon thread that ends with the status), or ``"off"``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import TextIO

EVERY_S = float(os.environ.get("STREAMGLOBE_PROGRESS_S", 5.0))
"""Seconds between two plain progress lines (the environment variable changes it, e.g. for tests)."""


def progress_mode(progress: bool | str, stream: TextIO | None = None) -> str:
    """``"bar"``, ``"lines"`` or ``"off"``: ``progress`` itself when it is one of them; True is a bar on a
    terminal and plain lines otherwise; False is off."""
    if isinstance(progress, str):
        if progress not in ("bar", "lines", "off"):
            raise ValueError(f"progress mode {progress!r}")
        return progress
    if not progress:
        return "off"
    return "bar" if (stream or sys.stderr).isatty() else "lines"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds} s"


class Status:
    """What a command is doing, shown on stderr as its mode says (:func:`progress_mode`).

    ``total`` counts the units (``unit``) of the longest phase; :meth:`update` moves the count and says
    which parts are at work, :meth:`phase` starts a phase that has no count (writing files, computing the
    expected answers).  Use it as a context manager: the bar is closed and the thread ended on exit."""

    def __init__(
        self,
        label: str,
        total: int,
        unit: str,
        progress: bool | str,
        *,
        stream: TextIO | None = None,
        of: str | None = None,
    ):
        self.label = label
        self.total = max(total, 0)
        self.unit = unit
        self.of = of  # the total as the user counts it (``6,000 tuples x 7 strategies``), else ``total units``
        self.stream = stream or sys.stderr
        self.mode = progress_mode(progress, self.stream)
        self.started = time.monotonic()
        self.done = 0
        self.detail = ""
        self.current = ""  # the phase without a count, if one is on
        self._lock = threading.Lock()
        self._printed = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None
        if self.mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, unit=unit, unit_scale=True, file=self.stream, leave=False, desc=of)
        elif self.mode == "lines":
            self._thread = threading.Thread(target=self._tick, name=f"{label}-progress", daemon=True)
            self._thread.start()

    def update(self, done: int, detail: str = "") -> None:
        """``done`` units of ``total`` so far; ``detail`` says what is at work."""
        with self._lock:
            self.done, self.detail, self.current = min(done, self.total), detail, ""
            if self._bar is not None:
                self._bar.set_description(detail, refresh=False)
                self._bar.n = self.done
                self._bar.refresh()

    def phase(self, text: str) -> None:
        """A phase without a count starts (``writing report.html``): on its own line at once in lines mode."""
        with self._lock:
            self.current = text
            if self._bar is not None:
                self._bar.set_description(text)
            elif self.mode == "lines":
                self._line()

    def note(self, text: str) -> None:
        """A line worth showing at once (a part finished): printed in lines mode, the bar's text otherwise."""
        with self._lock:
            if self._bar is not None:
                self._bar.set_description(text)
            elif self.mode == "lines":
                self._write(f"{self.label}: {text} ({_duration(time.monotonic() - self.started)})")

    def text(self) -> str:
        """The current state in words: ``45% of 6,000 tuples x 7 strategies; sharing-em: planning 40%`` (or the
        phase)."""
        if self.current:
            return self.current
        share = (
            f"{100 * self.done / self.total:.0f}% of {self.of or f'{self.total:,} {self.unit}s'}" if self.total else ""
        )
        return "; ".join(part for part in (share, self.detail) if part)

    def _line(self) -> None:
        self._write(f"{self.label}: {self.text()} ({_duration(time.monotonic() - self.started)})")

    def _write(self, line: str) -> None:
        self._printed = time.monotonic()
        with contextlib.suppress(OSError, ValueError):  # stderr closed or gone: progress is not worth an error
            print(line, file=self.stream, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, EVERY_S)):
            with self._lock:
                if time.monotonic() - self._printed >= EVERY_S:
                    self._line()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Status:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
