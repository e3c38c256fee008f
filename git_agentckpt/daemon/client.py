"""The client side of the daemon's protocol: connect, hand a call over, wait for its end.

Used by the `git-ckpt` entry point (`cli/launch.py`) for every call, by the daemon
commands (`git ckpt daemon ...`) and by a daemon child asking for the watcher's view
(`daemon/barrier.py`). Like the entry point, it imports only what the interpreter
has already loaded (`os`, `sys`, `time`) and the C modules `_socket` and `_signal`.

The wire protocol (version `ckpt2`):

    client -> daemon  4-byte length N, then N bytes of NUL-separated fields:
                      kind ("run" | "status" | "stop"), protocol, fingerprint,
                      and for "run": cwd, umask, argc, argv..., environ...
    daemon -> client  "A"            accepted: every check passed (run)
                      "R" + reason   refused, nothing started: the client runs
                                     the call itself ("stale: ..." when the
                                     fingerprint differs: it also starts a new
                                     daemon, which replaces this one)
                      "S" + JSON     status; "K" + text: stop accepted
    client -> daemon  "G"            go: the client is committed (run); with
                                     SCM_RIGHTS: its fds 0, 1, 2
    daemon -> client  "P" + pid      the child started
                      "X" + status   the call ended: its exit status (sent by
                                     the child itself), or 128 + signal (sent
                                     by the daemon when it reaps a child that
                                     did not report)
    client -> daemon  kind "view" (a daemon child, `daemon/barrier.py`): protocol,
                      "*", the name of the cookie file it created
    daemon -> client  "V" + JSON     the watcher's view, or `null` (a full scan)
    Text bodies are a 4-byte length and the bytes; numbers are 4-byte
    big-endian integers. The two-step start ("A", then "G") means a request
    the client gave up on (timeout, signal) is never run: the daemon forks
    only on "G". A client that disappears (EOF on its socket) while its call
    runs has the call's process killed (SIGKILL), as if it had run there.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from git_agentckpt.daemon.find import (
    PROTOCOL,
    SOCKET_NAME,
    SUN_PATH_MAX,
    agent_dir,
    package_dir,
    socket_path,
    timeout_seconds,
)

TYPE_CHECKING = False  # no `import typing` here (see the module docstring)
if TYPE_CHECKING:
    import signal
    from collections.abc import Sequence
else:  # the C module: `signal` wraps it in enums, ~5 ms of every warm call's start-up
    import _signal as signal


MAX_REQUEST = 4 << 20  # bytes of argv + environment a daemon accepts
SO_PEERCRED = 17  # Linux; _socket does not export it
INTERNAL = 70  # errors.Exit.INTERNAL (not imported: errors pulls in more)
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
POLL_SECONDS = 0.25  # while a call runs: how often to look whether its process still lives


# -- talking to the daemon ------------------------------------------------------------------


def _int(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


class NoDaemon(Exception):
    """No daemon listens (no socket, or a stale one): one may be started."""


def connect(git_dir: str, timeout: float | None) -> _socket.socket:
    """A connection to the daemon of `git_dir`, running as this user.

    Raises NoDaemon when none listens, OSError for anything else (then the
    call runs here and no daemon is started). A path longer than a socket
    address can hold is reached through /proc/self/fd/<fd of its directory>.
    """
    path = socket_path(git_dir)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    dirfd = -1
    try:
        sock.settimeout(timeout)
        if len(os.fsencode(path)) >= SUN_PATH_MAX:
            dirfd = os.open(agent_dir(git_dir), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            path = f"/proc/self/fd/{dirfd}/{SOCKET_NAME}"
        sock.connect(path)
        cred = sock.getsockopt(_socket.SOL_SOCKET, SO_PEERCRED, 12)
        if int.from_bytes(cred[4:8], sys.byteorder) != os.getuid():
            raise PermissionError("the daemon's socket belongs to another user")
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        sock.close()
        raise NoDaemon(str(exc)) from exc
    except BaseException:
        sock.close()
        raise
    finally:
        if dirfd >= 0:
            os.close(dirfd)
    return sock


def send_request(sock: _socket.socket, fields: Sequence[str]) -> None:
    payload = b"\0".join(os.fsencode(f) for f in fields)
    sock.sendall(_int(len(payload)) + payload)


class Replies:
    """The daemon's replies, parsed from what has arrived (a read may time out mid-way)."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _take(self) -> tuple[str, bytes] | None:
        buf = self.buf
        if not buf:
            return None
        kind = buf[:1]
        if kind in (b"A", b"G"):
            size = 1
        elif kind in (b"P", b"X"):
            size = 5
        elif len(buf) < 5:
            return None
        else:
            size = 5 + int.from_bytes(buf[1:5], "big")
        if len(buf) < size:
            return None
        self.buf = buf[size:]
        body = buf[1:size] if size <= 5 else buf[5:size]
        return kind.decode("latin-1"), body

    def next(self, timeout: float | None) -> tuple[str, bytes] | None:
        """The next reply; None at end of stream; TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            reply = self._take()
            if reply is not None:
                return reply
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no answer")
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk


def ask(git_dir: str, fields: Sequence[str], timeout: float) -> tuple[str, bytes] | None:
    """Send one request to the daemon of `git_dir`; its reply, or None if none came."""
    try:
        sock = connect(git_dir, timeout)
    except (NoDaemon, OSError):
        return None
    try:
        send_request(sock, fields)
        return Replies(sock).next(timeout)
    except OSError:
        return None
    finally:
        sock.close()


def control(git_dir: str, kind: str, timeout: float = 5.0) -> tuple[str, bytes] | None:
    """Send `status` or `stop` to the daemon of `git_dir`; its reply, or None if none runs."""
    return ask(git_dir, [kind, PROTOCOL, "*"], timeout)


def _std_fds() -> tuple[list[int], list[int]]:
    """fds 0-2 to pass; a closed one is replaced by /dev/null (returned to close)."""
    fds, opened = [], []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            fds.append(null)
            opened.append(null)
    return fds, opened


class Interrupted(BaseException):
    """A signal came before the call started: this process ends (128 + the signal)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Forwarder:
    """Signals end this process until the call's pid is known, then go to its process group."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.received: list[int] = []
        self.saved = {s: signal.signal(s, self.handle) for s in FORWARDED_SIGNALS}

    def handle(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        if self.pid is None:
            raise Interrupted(signum)
        for kill in (os.killpg, os.kill):  # the group, or the child if it has none yet
            try:
                kill(self.pid, signum)
                return
            except OSError:
                continue

    def restore(self) -> None:
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)


def _request(argv: Sequence[str], fp: str) -> list[str]:
    return [
        "run",
        PROTOCOL,
        fp,
        os.getcwd(),
        str(_umask()),
        str(len(argv) + 1),
        sys.argv[0],
        *argv,
        *(f"{k}={v}" for k, v in os.environ.items()),
    ]


def _handshake(sock: _socket.socket, replies: Replies, argv: Sequence[str], fp: str) -> str:
    """Send the call and wait for "A"; "" when accepted, else why not."""
    timeout = timeout_seconds(os.environ)
    send_request(sock, _request(argv, fp))
    try:
        reply = replies.next(timeout)
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    if reply is None:
        return "the daemon closed the connection"
    if reply[0] == "A":
        return ""
    if reply[0] == "R":
        return os.fsdecode(reply[1])
    return f"unexpected reply {reply[0]!r}"


def _go(sock: _socket.socket, fds: Sequence[int] | None) -> None:
    """Commit: "G" with fds 0-2 (or `fds`, the caller's stand-ins for them). Only now: a
    request given up on holds none of our files (a stopped daemon holding our stdout
    would keep `$(git ckpt …)` waiting)."""
    opened: list[int] = []
    if fds is None:
        fds, opened = _std_fds()
    try:
        rights = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
        sock.settimeout(None)
        if not sock.sendmsg([b"G"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)]):
            raise OSError("could not send the call's files")
    finally:
        for fd in opened:
            os.close(fd)


def run_remote(
    git_dir: str, fp: str, argv: Sequence[str], fds: Sequence[int] | None = None
) -> tuple[int | None, str]:
    """Run the call in a child of the daemon: (its exit status, ""). `fds`: what the call
    gets as its stdin, stdout and stderr (default: this process's own 0, 1 and 2).

    (None, why) when nothing was started: the caller then runs the call
    itself; `why` is "none" when no daemon listens (start one), "stale: ..."
    when it is of another version (start one: it replaces the old one).
    """
    forwarder = _Forwarder()
    sock: _socket.socket | None = None
    try:
        try:
            sock = connect(git_dir, timeout_seconds(os.environ))
        except NoDaemon:
            return None, "none"
        replies = Replies(sock)
        why = _handshake(sock, replies, argv, fp)
        if why:
            return None, why
        _go(sock, fds)  # committed: from here on the daemon runs the call
        reply = replies.next(None)
        if reply is not None and reply[0] == "X":
            # the call ran and reported its exit before the daemon got to send its
            # pid (a quick call on a loaded machine): the stream holds X, then P
            return int.from_bytes(reply[1], "big", signed=True), ""
        if reply is None or reply[0] != "P":
            _report(b"the git-ckpt daemon did not start the call")
            return INTERNAL, ""
        forwarder.pid = int.from_bytes(reply[1], "big", signed=True)
        return _wait_child(replies, forwarder), ""
    except Interrupted as exc:
        return 128 + exc.signum, ""
    except OSError as exc:
        if forwarder.pid is None:
            return None, f"connection failed: {exc}"
        _report(b"lost the connection to the git-ckpt daemon")
        return INTERNAL, ""
    finally:
        if sock is not None:
            sock.close()
        forwarder.restore()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _wait_child(replies: Replies, forwarder: _Forwarder) -> int:
    """Wait for the call's exit status ("X"), from the child itself or the daemon.

    The child reports its own exit; the daemon reports a death by signal. If
    the call's process is gone and no status comes within the grace period
    (the daemon is stopped or dead), this process ends all the same.
    """
    pid = forwarder.pid or 0
    grace = 2 * timeout_seconds(os.environ)
    gone_at: float | None = None
    while True:
        try:
            reply = replies.next(POLL_SECONDS)
        except TimeoutError:
            reply = ("", b"")
        if reply is not None and reply[0] == "X":
            return int.from_bytes(reply[1], "big", signed=True)
        if alive(pid):
            if reply is None:  # the daemon and the child closed it: the child is ending
                _sleep(0.05)
            continue
        now = time.monotonic()
        gone_at = gone_at or now
        if reply is not None and now - gone_at < grace:
            continue
        if forwarder.received:
            return 128 + forwarder.received[0]
        _report(b"the git-ckpt daemon stopped before reporting how this call ended (pid %d)" % pid)
        return INTERNAL


def _report(what: bytes) -> None:
    os.write(
        2,
        b"git ckpt: error: " + what + b"; `git ckpt log` shows what it wrote, and "
        b"GIT_CKPT_DAEMON=off runs calls without the daemon\n",
    )


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie nobody reaps has ended: its daemon is gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def spawn_daemon(fp: str, worktree: str, git_dir: str) -> int | None:
    """Start the daemon of `git_dir` in the background (own session, stdio on /dev/null)."""
    null = os.devnull
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0),
    ]
    # The very package this process runs (not whatever `-m` would find from the
    # working directory, e.g. a source checkout): its parent goes first on the path.
    code = (
        f"import sys; sys.path.insert(0, {os.path.dirname(package_dir())!r}); "
        "from git_agentckpt.daemon.server import main; sys.exit(main())"
    )
    argv = [sys.executable, "-P", "-c", code, fp, git_dir, worktree]
    try:
        return os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions, setsid=True)
    except OSError:
        return None  # no daemon this time; the call itself is unaffected
