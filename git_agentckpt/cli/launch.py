"""`git-ckpt`'s entry point: hand the call to a warm server, or run it here.

Python start-up plus the modules a command needs (click, pygit2, yaml, ours)
cost 150-250 ms before any work, and agents call `git ckpt` after every turn.
A per-user server (`cli/server.py`) keeps those modules imported and forks one
child per call. The child receives this process's stdin, stdout and stderr
(the file descriptors themselves, over a unix socket), its argv, working
directory, umask and whole environment, so it behaves as the call would have
here: same output, same terminal checks, same exit status.

This module runs before anything else is imported, so it uses only what the
interpreter or the `git-ckpt` script has already loaded (`os`, `sys`, `re`
and so `enum`, which makes `signal` cheap) and the C module `_socket`;
`typing` alone would cost ~10 ms, `socket` ~4 ms.

When no server answers, the call runs here as before and a server is started
in the background for the next calls. `GIT_CKPT_SERVER=off` turns all of this
off; `git ckpt server status|stop` manage it. Linux only (abstract unix
sockets, SO_PEERCRED); elsewhere every call runs here.

The wire protocol (version `ckpt1`; the socket's name carries a fingerprint of
the interpreter, the installed package and HOME, so a server never serves a
client of another version):

    client -> server  4-byte length N (with SCM_RIGHTS: fds 0, 1, 2), then N
                      bytes of NUL-separated fields:
                      kind ("run" | "status" | "stop"), protocol, fingerprint,
                      and for "run": cwd, umask, argc, argv..., environ...
    server -> client  "P" + pid      the child started (run)
                      "X" + status   the child ended: its exit status, or
                                     128 + signal (run)
                      "R" + reason   refused before starting anything: the
                                     client runs the call itself
                      "S" + JSON     status; "K" stop accepted
    Every number is a 4-byte big-endian integer. A client that disappears
    (EOF on its socket) has its child's process group killed (SIGKILL), as if
    the call had run in the killed process.
"""

from __future__ import annotations

import _socket
import os
import signal
import sys

TYPE_CHECKING = False  # no `import typing` here (see the module docstring)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

PROTOCOL = "ckpt1"
MODE_VAR = "GIT_CKPT_SERVER"  # auto (default) | off
IDLE_VAR = "GIT_CKPT_SERVER_IDLE"  # seconds without a call before the server exits
DEFAULT_IDLE = 900.0
OFF_WORDS = frozenset({"0", "off", "no", "false", "never"})
# Commands that always run in the calling process: `trust` and `confirm` (--by-human)
# ask the person at this terminal, `fetch` and `push` may have git ask for credentials
# there (the server's children have no controlling terminal), and `server` manages the
# server itself.
INLINE_COMMANDS = frozenset({"trust", "confirm", "fetch", "push", "server"})
MAX_REQUEST = 4 << 20  # bytes of argv + environment a server accepts
SO_PEERCRED = 17  # Linux; _socket does not export it
INTERNAL = 70  # errors.Exit.INTERNAL (not imported: errors pulls in more)
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(_socket, "CMSG_SPACE")


def enabled(env: Mapping[str, str]) -> bool:
    return supported() and env.get(MODE_VAR, "auto").strip().lower() not in OFF_WORDS


def idle_seconds(env: Mapping[str, str]) -> float:
    try:
        return max(1.0, float(env.get(IDLE_VAR, "") or DEFAULT_IDLE))
    except ValueError:
        return DEFAULT_IDLE


def package_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fingerprint(pkg: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """What a server must share with its clients: interpreter, package files, HOME.

    The package part is the newest mtime and the number of its `.py` files
    (about 70 `stat` calls, ~0.3 ms) and the mtime of the directory holding
    it (site-packages: any install or removal there changes it): editing or
    upgrading the package or a dependency gives a new fingerprint, so a new
    server; the old one idles out. HOME keeps the servers of separate homes
    (and of tests) apart.
    """
    from git_agentckpt import __version__

    pkg = pkg or package_dir()
    env = os.environ if env is None else env
    newest, count = 0, 0
    stack = [pkg]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    newest = max(newest, entry.stat().st_mtime_ns)
                    count += 1
    exe = f"{sys.executable}|{sys.prefix}"  # the venv, not only the interpreter behind it
    # installing or removing any package in the venv changes its site-packages directory
    try:
        site = os.stat(os.path.dirname(pkg)).st_mtime_ns
    except OSError:
        site = 0
    home = env.get("HOME", "")
    return f"{PROTOCOL}|{__version__}|{exe}|{pkg}|{count}|{newest}|{site}|{home}"


def address(fp: str) -> bytes:
    """The abstract socket name: no file to go stale after a crash (Linux)."""
    h = 0xCBF29CE484222325  # FNV-1a, 64 bits: hashlib would cost ~3 ms to import
    for byte in fp.encode("utf-8", "surrogateescape"):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return b"\0git-ckpt/%d/%016x" % (os.getuid(), h)


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv` (after the group's options), or None."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-C":
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return arg
    return None


def _int(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


def connect(addr: bytes, timeout: float | None = None) -> _socket.socket | None:
    """A connection to the server at `addr` if one answers and runs as this user."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(addr)
        cred = sock.getsockopt(_socket.SOL_SOCKET, SO_PEERCRED, 12)
        if int.from_bytes(cred[4:8], sys.byteorder) != os.getuid():
            sock.close()  # somebody else holds the name: never hand them our files
            return None
    except OSError:
        sock.close()
        return None
    return sock


def send_request(sock: _socket.socket, fields: Sequence[str], fds: Sequence[int] = ()) -> None:
    payload = b"\0".join(os.fsencode(f) for f in fields)
    head = _int(len(payload))
    if fds:
        rights = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
        ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)]
        sent = sock.sendmsg([head], ancillary)
    else:
        sent = sock.send(head)
    sock.sendall(head[sent:] + payload)


def recv_exact(sock: _socket.socket, n: int) -> bytes | None:
    """`n` bytes, or None at end of stream."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def recv_reply(sock: _socket.socket) -> tuple[str, bytes] | None:
    """One server reply: its kind letter and body, or None at end of stream."""
    kind = recv_exact(sock, 1)
    if kind is None:
        return None
    if kind in (b"P", b"X"):
        body = recv_exact(sock, 4)
    else:
        size = recv_exact(sock, 4)
        body = None if size is None else recv_exact(sock, int.from_bytes(size, "big"))
    return None if body is None else (kind.decode(), body)


def control(addr: bytes, kind: str, timeout: float = 5.0) -> tuple[str, bytes] | None:
    """Send `status` or `stop` to the server at `addr`; its reply, or None if none runs."""
    sock = connect(addr, timeout)
    if sock is None:
        return None
    try:
        send_request(sock, [kind, PROTOCOL, "*"])
        return recv_reply(sock)
    except OSError:
        return None
    finally:
        sock.close()


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


class _Forwarder:
    """Signals to this process go to the child's process group once its pid is known.

    Installed before the request is sent, so a Ctrl-C that comes before the
    server's answer is not lost: it is sent on as soon as the pid arrives.
    """

    def __init__(self) -> None:
        self.pid: int | None = None
        self.pending: list[int] = []
        self.saved = {s: signal.signal(s, self.handle) for s in FORWARDED_SIGNALS}

    def handle(self, signum: int, _frame: object) -> None:
        if self.pid is None:
            self.pending.append(signum)
        else:
            self.send(signum)

    def send(self, signum: int) -> None:
        for kill in (os.killpg, os.kill):  # the group, or the child if it has none yet
            try:
                kill(self.pid or 0, signum)
                return
            except OSError:
                continue

    def start(self, pid: int) -> None:
        self.pid = pid
        for signum in self.pending:
            self.send(signum)

    def restore(self) -> None:
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)
        if self.pending:  # interrupted before anything started
            sys.exit(128 + self.pending[0])


def run_remote(fp: str, argv: Sequence[str]) -> int | None:
    """Run the call in a forked child of the server: its exit status.

    None when no server answered or it refused before starting anything:
    the caller then runs the call itself.
    """
    sock = connect(address(fp))
    if sock is None:
        return None
    fds, opened = _std_fds()
    forwarder = _Forwarder()
    try:
        fields = [
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
        send_request(sock, fields, fds)
        reply = recv_reply(sock)
    except OSError:
        reply = None
    finally:
        for fd in opened:
            os.close(fd)
    if reply is None or reply[0] != "P":
        sock.close()
        forwarder.restore()
        return None  # nothing started: run it here
    pid = int.from_bytes(reply[1], "big", signed=True)
    forwarder.start(pid)
    return _wait_child(sock, pid)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _wait_child(sock: _socket.socket, pid: int) -> int:
    """Wait until the server reports the end of the child (signals go on to it)."""
    try:
        reply = recv_reply(sock)
    except OSError:
        reply = None
    finally:
        sock.close()
    if reply is not None and reply[0] == "X":
        return int.from_bytes(reply[1], "big", signed=True)
    # The server died while the child ran: wait for the child, then say so.
    while _alive(pid):
        _sleep(0.05)
    os.write(
        2,
        b"git ckpt: error: the git-ckpt server stopped before reporting how this call "
        b"ended (pid %d); `git ckpt log` shows what it wrote, and GIT_CKPT_SERVER=off "
        b"runs calls without the server\n" % pid,
    )
    return INTERNAL


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie nobody reaps has ended: its server is gone)."""
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
    import time

    time.sleep(seconds)


def spawn_server(fp: str) -> int | None:
    """Start a server in the background (its own session, stdio on /dev/null): its pid."""
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
        "from git_agentckpt.cli.server import main; sys.exit(main())"
    )
    argv = [sys.executable, "-P", "-c", code, fp]
    try:
        return os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions, setsid=True)
    except OSError:
        return None  # no server this time; the call itself is unaffected


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["--version"]:  # what click prints, without importing click (~40 ms)
        from git_agentckpt import __version__

        sys.stdout.write(f"git-ckpt {__version__}\n")
        sys.exit(0)
    if enabled(os.environ) and command_of(argv) not in INLINE_COMMANDS | {None}:
        fp = fingerprint()
        status = run_remote(fp, argv)
        if status is not None:
            sys.exit(status)
        spawn_server(fp)  # imports on the other core while this call runs here
    from git_agentckpt.cli.main import main as cli_main

    cli_main()
