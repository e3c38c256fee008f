"""The daemon's requests, and what its forked child does to become the caller.

`parse_request` reads a request's fields (protocol: `cli/launch.py`);
`preload` imports what every child needs, once, in the daemon;
`run_child` runs in the forked child: it takes the caller's stdin, stdout and
stderr, working directory, umask and environment (exactly: the daemon's own
environment is cleared first), resets what libgit2 read from the environment
at import, runs the click CLI and returns its exit status, which `report_exit` sends.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import mmap
import os
import pkgutil
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from git_agentckpt import after_reply
from git_agentckpt.daemon import find as daemon_find
from git_agentckpt.daemon.client import INTERNAL

# Not imported by the daemon: the entry points, and the MCP server, which never runs in
# a daemon child (`git ckpt mcp` is a long-running server: `launch.refusal`) and whose
# SDK (pydantic, starlette, httpx, anyio) doubles the daemon's memory (42 -> 82 MB),
# and with it the cost of every fork and of the child's copy-on-write faults.
_SKIP_PRELOAD = (
    "git_agentckpt.__main__",
    "git_agentckpt.daemon.server",
    "git_agentckpt.cli.mcp_",  # mcp_server, mcp_stdio: the SDK
)
_preloaded: list[bool] = []


@dataclass
class Request:
    kind: str
    fingerprint: str = ""
    cwd: str = "/"
    umask: int = 0o022
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    fds: list[int] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)  # of a request that is not `run`

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


class BadRequest(Exception):
    pass


STALE = "stale: this daemon runs another version or installation of git-ckpt"


def parse_request(payload: bytes, fingerprint: str | None = None) -> Request:
    """The request in `payload`; BadRequest if malformed (the fds come later, with "G").

    A `run` of another protocol or `fingerprint` is refused as STALE before
    anything else is read: its client then starts a daemon of its own version.
    """
    fields = [os.fsdecode(f) for f in payload.split(b"\0")]
    if len(fields) < 3:
        raise BadRequest("malformed request")
    req = Request(kind=fields[0], fingerprint=fields[2])
    if req.kind == "run" and fingerprint is not None and fields[2] != fingerprint:
        raise BadRequest(STALE)
    if fields[1] != daemon_find.PROTOCOL:
        raise BadRequest(
            f"{STALE} (protocol {fields[1]!r})" if req.kind == "run" else "protocol mismatch"
        )
    if req.kind != "run":
        req.fields = fields[3:]
        return req  # status, stop, view: any client of this user, whatever its version
    try:
        req.cwd, req.umask, argc = fields[3], int(fields[4]), int(fields[5])
        req.argv = fields[6 : 6 + argc]
        env_fields = fields[6 + argc :]
    except (IndexError, ValueError) as exc:
        raise BadRequest(f"malformed run request: {exc}") from exc
    if len(req.argv) != argc or argc < 1:
        raise BadRequest("malformed run request: argv missing")
    if not os.path.isabs(req.cwd):
        raise BadRequest("malformed run request: the working directory is not absolute")
    for item in env_fields:
        key, sep, value = item.partition("=")
        if sep:
            req.env[key] = value
    return req


def exit_status(wait_status: int) -> int:
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


def _text_stream(fd: int, mode: str, env: dict[str, str], errors: str) -> io.TextIOWrapper:
    encoding = "utf-8"
    spec = env.get("PYTHONIOENCODING", "")
    if spec:
        enc, _, errs = spec.partition(":")
        encoding, errors = enc or encoding, errs or errors
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: io.BufferedIOBase
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    line = mode == "w" and (fd == 2 or raw.isatty())
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, line_buffering=line)


def become_caller(req: Request) -> int | None:
    """Take the caller's fds, directory, umask and environment; an exit status if impossible."""
    for target, fd in enumerate(req.fds):
        if fd != target:
            os.dup2(fd, target)
    for fd in req.fds:
        if fd > 2:
            os.close(fd)
    try:
        os.chdir(req.cwd)
    except OSError as exc:
        os.write(2, f"git ckpt: error: cannot enter {req.cwd}: {exc.strerror}\n".encode())
        return 128
    os.umask(req.umask)
    take_environment(req.env)
    time.tzset()
    from git_agentckpt.git.discover import reset_environment_caches

    reset_environment_caches()
    sys.stdin = _text_stream(0, "r", req.env, "strict")
    sys.stdout = _text_stream(1, "w", req.env, "strict")
    sys.stderr = _text_stream(2, "w", req.env, "backslashreplace")
    sys.argv = list(req.argv)
    return None


def take_environment(env: dict[str, str]) -> None:
    """Make the environment exactly `env`: nothing of the daemon's own stays. Only what
    differs is changed (each change is a `putenv`; the two mostly agree)."""
    for key in [k for k in os.environ if k not in env]:
        del os.environ[key]
    for key, value in env.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def freeze_inherited() -> None:
    """First thing in a forked child: what the daemon holds goes out of the collector's
    sight (a full collection would touch every inherited object and copy its pages:
    ~70 ms at 84 MB)."""
    gc.freeze()


def run_child(req: Request) -> int:
    """In the forked child: become the caller's process, run the CLI (tidying that can
    wait runs after the answer, `after_reply.py`), its exit status."""
    after_reply.defer_in_this_process()
    failed = become_caller(req)
    return failed if failed is not None else run_cli()


def run_cli() -> int:
    from git_agentckpt.cli.main import main

    code: int = 0
    try:
        main()
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = 130
    finally:
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    return code


def child_failed(exc: BaseException) -> None:
    try:
        msg = f"git ckpt: error: internal error in the daemon's child: {type(exc).__name__}: {exc}"
        os.write(2, (msg + " (GIT_CKPT_DAEMON=off runs without the daemon)\n").encode())
    except OSError:
        pass


def preload() -> None:
    """Import every module of the package, and compile what every child would compile
    (once in a process)."""
    import git_agentckpt

    if _preloaded:
        return
    _preloaded.append(True)
    for info in pkgutil.walk_packages(git_agentckpt.__path__, "git_agentckpt."):
        if not info.name.startswith(_SKIP_PRELOAD):
            importlib.import_module(info.name)
    from git_agentckpt.cli.warm import warm_cli
    from git_agentckpt.redact import precompile

    warm_cli()
    precompile()


class ReportedSlots:
    """One byte per call in a page shared with every child the daemon forks: a child sets
    its own to 1 right before it reports its exit (`mark`); the daemon reads it when that
    call's client hangs up (a client gone before the report: kill the call; after it:
    let the child finish the work that waits for the answer, `after_reply.py`)."""

    def __init__(self, size: int = mmap.PAGESIZE) -> None:
        self.page = mmap.mmap(-1, size)  # MAP_SHARED | MAP_ANONYMOUS: shared across fork
        self.free = list(range(size - 1, -1, -1))

    def take(self) -> int:
        """A slot for the next child, cleared (-1: none free)."""
        if not self.free:
            return -1
        slot = self.free.pop()
        self.page[slot] = 0
        return slot

    def give_back(self, slot: int) -> None:
        if slot >= 0:
            self.free.append(slot)

    def mark(self, slot: int) -> None:
        """In the child, right before it reports: from now on its client may go."""
        self.page[slot] = 1

    def reported(self, slot: int) -> bool:
        return slot >= 0 and self.page[slot] == 1


def run_in_child(
    req: Request,
    own: int,
    leave_daemon: Callable[[], None],
    hooks: Sequence[Callable[[], None]],
    reported: tuple[ReportedSlots, int],
    forwarded: Iterable[int],
) -> NoReturn:
    """The forked child, from the fork to its exit: never returns into the daemon's loop.

    `own` is the client's socket, `leave_daemon` closes what the daemon holds,
    `hooks` are its `in_child` plug-ins, `reported` the slot it marks before it reports
    (-1: none; the work that waits for the answer then runs before the report)."""
    freeze_inherited()
    code = INTERNAL
    try:
        own_signals(forwarded)
        leave_daemon()
        for hook in hooks:
            hook()
        code = run_child(req)
    except BaseException as exc:
        child_failed(exc)
    finally:
        end_child(own, code, *reported)


def own_signals(forwarded: Iterable[int]) -> None:
    """First in a forked child: the default handlers (Ctrl-C interrupts the call), its own
    process group (the client forwards signals to it), the `forwarded` ones unblocked."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)


def end_child(own: int, code: int, slots: ReportedSlots, slot: int) -> NoReturn:
    """Last in a forked child: report `code` on the client's socket `own`; the work that
    waits for the answer before the report without a slot (`after_reply.py`: the daemon
    may kill us once our client hangs up), after it with one."""
    if slot < 0:
        after_reply.run_detached()
    else:
        slots.mark(slot)
    report_exit(own, code)
    if slot >= 0:
        after_reply.run_after_report()
    os._exit(code)


def report_exit(fd: int, code: int) -> None:
    """The child says how it ended, itself: its caller need not wait for the daemon.

    Every other file is closed first (its locks released, its output complete),
    so the caller's next call finds the repository as this one left it.
    """
    with contextlib.suppress(OSError):
        os.closerange(0, fd)
        os.closerange(fd + 1, 1 << 20)
        os.set_blocking(fd, True)
        os.write(fd, b"X" + code.to_bytes(4, "big", signed=True))
