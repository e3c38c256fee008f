"""Run one trusted command check: argv (no shell), sealed, bounded, redacted.

- The command starts in a new session (so a new process group), with stdin
  from `/dev/null`, in `cwd`, with an environment built only from
  `ENV_ALLOWLIST` (copied from ours when set) plus `ENV_FIXED`, plus the
  caller's `extra_env`. Everything else (tokens, `GIT_DIR`, `*_API_KEY`, ...)
  is dropped.
- On timeout the whole process group gets SIGTERM, then SIGKILL after
  `KILL_GRACE` seconds, so children die with their parent. When the command
  exits on its own, whatever it left running in its group is killed too.
  (A child that starts its own session escapes the group: not contained.)
- stdout and stderr are read incrementally; at most `output_cap` bytes of each
  are kept, the rest is counted and discarded (no memory or disk growth).
  The kept text is decoded as UTF-8 (invalid bytes replaced), marked when
  truncated, then passed through `redact`.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from git_agentckpt.contracts.checks import CheckResult
from git_agentckpt.display import escape_control, escape_for_display

__all__ = [
    "ENV_ALLOWLIST",
    "ENV_FIXED",
    "KILL_GRACE",
    "CommandOutcome",
    "command_check_result",
    "run_command",
    "scrubbed_env",
]

# Copied from the caller's environment when set: where programs are, who and
# where the user is, locale and time zone, a temp dir, and a hash seed for
# reproducible Python runs. Nothing that usually carries a secret.
ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_COLLATE",
    "LC_MESSAGES",
    "LC_NUMERIC",
    "LC_TIME",
    "TZ",
    "TMPDIR",
    "PYTHONHASHSEED",
)
# Always set: no colours, no pagers, no interactive prompts.
ENV_FIXED: Mapping[str, str] = {"TERM": "dumb", "NO_COLOR": "1", "PAGER": "cat"}
KILL_GRACE = 0.5  # seconds between SIGTERM and SIGKILL of the process group
_DRAIN_LIMIT = 1.0  # seconds to collect output once the group is dead
_POLL = 0.05  # seconds between exit checks when no pidfd is available
_READ = 65536


@dataclass(frozen=True)
class CommandOutcome:
    returncode: int | None  # None: timed out or never started
    timed_out: bool
    stdout: str
    stderr: str
    duration: float
    error: str | None = None  # why it could not start (e.g. program not found)


def scrubbed_env(
    source: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a command check gets (see `ENV_ALLOWLIST`, `ENV_FIXED`)."""
    src = os.environ if source is None else source
    env = {name: src[name] for name in ENV_ALLOWLIST if name in src}
    env.setdefault("PATH", os.defpath)
    env.update(ENV_FIXED)
    env.update(extra or {})
    return env


class _Capture:
    def __init__(self, cap: int) -> None:
        self.cap, self.data, self.dropped = cap, bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        self.data += chunk[: max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self, redact: Callable[[str], str]) -> str:
        text = self.data.decode("utf-8", "replace")
        if self.dropped:
            text += f"\n[... {self.dropped} more bytes not kept]"
        return redact(text)


def _killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _exited(pid: int) -> bool:
    """Whether the leader exited, without reaping it (its pid keeps the group id ours)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    output_cap: int = 65536,
    redact: Callable[[str], str] = lambda s: s,
    extra_env: Mapping[str, str] | None = None,
) -> CommandOutcome:
    """Run `argv` in `cwd` for at most `timeout` seconds (see the module doc)."""
    if isinstance(argv, str) or not argv:
        raise ValueError("argv must be a non-empty sequence of strings")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=scrubbed_env(extra=extra_env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        why = f"{exc.strerror or exc}: {exc.filename!r}" if exc.filename else str(exc)
        return CommandOutcome(None, False, "", "", time.monotonic() - start, why)
    assert proc.stdout is not None and proc.stderr is not None
    captures = {proc.stdout.fileno(): _Capture(output_cap)}
    captures[proc.stderr.fileno()] = _Capture(output_cap)
    try:
        timed_out = _supervise(proc, captures, start + timeout)
    finally:  # also on KeyboardInterrupt: _supervise has killed the group
        returncode = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    out, err = captures.values()
    return CommandOutcome(
        None if timed_out else returncode,
        timed_out,
        out.text(redact),
        err.text(redact),
        time.monotonic() - start,
    )


def _supervise(
    proc: subprocess.Popen[bytes], captures: dict[int, _Capture], deadline: float
) -> bool:
    """Collect output until the group is done; enforce the deadline. True if timed out."""
    pid = proc.pid  # == the process group id (new session)
    selector = selectors.DefaultSelector()
    for fd in captures:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    pidfd = _pidfd(pid)
    if pidfd is not None:
        selector.register(pidfd, selectors.EVENT_READ)
    timed_out = False
    stop_at: float | None = None  # when set: the group is being/has been killed
    term_sent_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if stop_at is None and _exited(pid):
                _killpg(pid, signal.SIGKILL)  # leftovers of a command that exited
                stop_at = now + _DRAIN_LIMIT
            elif stop_at is None and now >= deadline:
                timed_out = True
                _killpg(pid, signal.SIGTERM)
                term_sent_at = now
                stop_at = now + KILL_GRACE + _DRAIN_LIMIT
            if term_sent_at is not None and now >= term_sent_at + KILL_GRACE:
                _killpg(pid, signal.SIGKILL)
                term_sent_at = None
            finished = stop_at is not None and (now >= stop_at or not _open(selector, captures))
            if finished and (term_sent_at is None or _exited(pid)):
                break
            wait = _next_wait(now, deadline, stop_at, term_sent_at, pidfd is None)
            for key, _ in selector.select(wait):
                fd = int(key.fd)
                if fd == pidfd:
                    selector.unregister(fd)
                    continue
                _drain(fd, captures[fd], selector)
    finally:
        if term_sent_at is not None or stop_at is None:  # grace cut short, or an exception
            _killpg(pid, signal.SIGKILL)
        selector.close()
        if pidfd is not None:
            os.close(pidfd)
    return timed_out


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


def _open(selector: selectors.BaseSelector, captures: dict[int, _Capture]) -> bool:
    return any(fd in captures for fd in selector.get_map())


def _next_wait(
    now: float, deadline: float, stop_at: float | None, term_at: float | None, poll: bool
) -> float:
    limits = [deadline if stop_at is None else stop_at]
    if term_at is not None:
        limits.append(term_at + KILL_GRACE)
    wait = max(min(limits) - now, 0.0)
    return min(wait, _POLL) if poll or stop_at is not None else wait


def _drain(fd: int, capture: _Capture, selector: selectors.BaseSelector) -> None:
    try:
        chunk = os.read(fd, _READ)
    except BlockingIOError:
        return
    except OSError:
        chunk = b""
    if chunk:
        capture.add(chunk)
    else:
        selector.unregister(fd)


def command_check_result(outcome: CommandOutcome, argv: Sequence[str] = ()) -> CheckResult:
    """Map an outcome to a check result: exit 0 passes; an exit status, a
    signal or a timeout fails; a command that could not start is an error."""
    shown = f"{escape_for_display(argv)}: " if argv else ""
    took = f"{outcome.duration:.2f} s"
    if outcome.error is not None:
        return CheckResult("error", escape_control(f"{shown}cannot start: {outcome.error}"))
    if outcome.timed_out:
        return CheckResult("fail", f"{shown}timed out after {took}; its process group was killed")
    code = outcome.returncode
    if code == 0:
        return CheckResult("pass", f"{shown}exit 0 in {took}")
    if code is not None and code < 0:
        try:
            why = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            why = f"killed by signal {-code}"
    else:
        why = f"exit {code}"
    last = _last_line(outcome.stderr) or _last_line(outcome.stdout)
    detail = f"{shown}{why} in {took}" + (f": {last}" if last else "")
    return CheckResult("fail", escape_control(detail))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("[... ")]
    return lines[-1][:200] if lines else ""
