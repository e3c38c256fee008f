"""Progress on stderr for long work, in git's own style.

    Snapshotting files: 12000
    Restoring files:  45% (450/1000)
    Restoring files: 100% (1000/1000), done.

A line is rewritten in place (ended by `\\r`) and finished with `, done.` as git's
`progress.c` does. Like git it waits before showing anything, so quick work
prints nothing: 1 s (`GIT_CKPT_PROGRESS_DELAY` sets it, 0 in tests), and it
redraws at most 10 times a second. Nothing is shown unless the CLI turned it on
(`configure`): only when stderr is a terminal, never with `--json` or `--quiet`
or when `GIT_CKPT_NO_PROGRESS` is set, so scripts and agents that read the
output never see it, and library callers never do.

Domain code makes a `Progress` and hands its `advance` to the git layer as a
plain callback; the git layer never prints.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from types import TracebackType
from typing import TextIO

from git_agentckpt.display import plain

DEFAULT_DELAY = 1.0  # seconds before the first line (git waits 2 s)
MIN_INTERVAL = 0.1  # at most 10 redraws a second

_enabled = False
_line_owner: Progress | None = None  # the progress whose line the cursor is on


def wanted(*, json_output: bool, quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether a CLI call shows progress: stderr is a terminal, no --json / --quiet,
    no GIT_CKPT_NO_PROGRESS."""
    if json_output or quiet or os.environ.get("GIT_CKPT_NO_PROGRESS"):
        return False
    err = stream if stream is not None else sys.stderr
    try:
        return err.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def configure(enabled: bool) -> None:
    """Turn progress on or off for this process (the CLI decides, with `wanted`)."""
    global _enabled
    _enabled = enabled


def enabled() -> bool:
    return _enabled


def _delay() -> float:
    raw = os.environ.get("GIT_CKPT_PROGRESS_DELAY")
    if raw is None:
        return DEFAULT_DELAY
    try:
        return max(0.0, float(raw))
    except ValueError:
        return DEFAULT_DELAY


class Progress:
    """One counter with a title; `advance` / `update` from the work, `done` at its end.

    A context manager: leaving it normally prints the `, done.` line (when anything
    was shown); leaving it on an error only ends the line.
    """

    def __init__(self, title: str, total: int | None = None) -> None:
        self.title = title
        self.total = total
        self.value = 0
        self.active = _enabled
        self._start = time.monotonic()
        self._delay = _delay()
        self._last_draw = 0.0
        self._shown = False
        self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self.done()
        else:
            self._end_line()

    def advance(self, n: int = 1) -> None:
        self.update(self.value + n)

    def update(self, value: int) -> None:
        self.value = value
        if not self.active:
            return
        now = time.monotonic()
        if now - self._start < self._delay:
            return
        if self._shown and now - self._last_draw < MIN_INTERVAL:
            return
        self._draw("\r")
        self._last_draw = now

    def done(self) -> None:
        """The last line, `, done.` (nothing when nothing was shown: quick work)."""
        if not self.active:
            return
        if self._shown or (time.monotonic() - self._start >= self._delay and self.value):
            self._draw(", done.\n")
        self.active = False
        self._release()

    def _counters(self) -> str:
        if self.total:
            pct = min(100, self.value * 100 // self.total)
            return f"{pct:3d}% ({self.value}/{self.total})"
        return str(self.value)

    def _draw(self, end: str) -> None:
        global _line_owner
        if _line_owner is not None and _line_owner is not self:
            _line_owner._interrupted()
        text = f"{self.title}: {self._counters()}"
        pad = " " * max(0, self._width - len(text))  # clear what a longer line left
        self._width = len(text)
        try:
            err = plain(sys.stderr)  # its `\r` is ours: not escaped
            err.write(text + pad + end)
            err.flush()
        except (OSError, ValueError):
            self.active = False
            return
        self._shown = True
        _line_owner = self if end == "\r" else None

    def _interrupted(self) -> None:
        """Another progress takes the line: this one moves on to a fresh line later."""
        global _line_owner
        with contextlib.suppress(OSError, ValueError):
            plain(sys.stderr).write("\n")
        self._width = 0
        _line_owner = None

    def _end_line(self) -> None:
        if self._shown and _line_owner is self:
            self._interrupted()
        self.active = False
        self._release()

    def _release(self) -> None:
        global _line_owner
        if _line_owner is self:
            _line_owner = None


# a piece of git's own progress output: "Receiving objects:  45% (9/20)", "remote: ..."
_GIT_METER = re.compile(rb"^(remote: )?[A-Z][A-Za-z ]*: +\d")


class GitMeters:
    """Passes git's own progress meters (run with `--progress`) on to our stderr, and
    nothing else git writes there (its errors become our one-line message)."""

    def __init__(self) -> None:
        self._partial = b""

    def __call__(self, chunk: bytes) -> None:
        data = self._partial + chunk
        pieces = re.split(rb"(?<=[\r\n])", data)
        self._partial = pieces.pop() if pieces and not pieces[-1].endswith((b"\r", b"\n")) else b""
        shown = b"".join(p for p in pieces if _GIT_METER.match(p))
        if not shown:
            return
        global _line_owner
        if _line_owner is not None:
            _line_owner._interrupted()
        try:
            sys.stderr.flush()
            sys.stderr.buffer.write(shown)
            sys.stderr.buffer.flush()
        except (AttributeError, OSError, ValueError):
            pass
