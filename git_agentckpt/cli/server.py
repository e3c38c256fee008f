"""The warm server behind `git-ckpt`: modules imported once, one forked child per call.

Started in the background by `cli/launch.py` (or `git ckpt server start`) as
`python -P -c "...; from git_agentckpt.cli.server import main; ..." FINGERPRINT`
(the caller's own copy of the package first on the path). It imports every module a
command may need, binds the abstract unix socket named after the fingerprint
(another server already bound it: this one exits), then serves until it has
been idle for GIT_CKPT_SERVER_IDLE seconds (900), gets SIGTERM, or `stop`.

For each `run` request it forks. The child takes the client's stdin, stdout
and stderr, working directory, umask, environment and argv, resets what
libgit2 read from the environment at import (config search paths, home),
runs the click CLI and exits with its status, which the server sends back.
The server itself never opens a repository: every child starts from the same
pristine state. It runs single-threaded (a fork of a threaded process is not
safe), on one `select` loop over the listening socket, the clients' sockets
and a wake-up pipe for SIGCHLD and SIGTERM.

Protocol: see `cli/launch.py`.
"""

from __future__ import annotations

import array
import contextlib
import importlib
import io
import json
import os
import pkgutil
import selectors
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from git_agentckpt.cli import launch

_FDS_SPACE = socket.CMSG_SPACE(3 * array.array("i").itemsize)
FORWARDED = set(launch.FORWARDED_SIGNALS)
_SKIP_PRELOAD = ("git_agentckpt.__main__", "git_agentckpt.cli.server")


@dataclass
class Request:
    kind: str
    cwd: str = "/"
    umask: int = 0o022
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    fds: list[int] = field(default_factory=list)


class BadRequest(Exception):
    pass


def preload() -> None:
    """Import every module of the package, and compile what every child would compile."""
    import git_agentckpt

    for info in pkgutil.walk_packages(git_agentckpt.__path__, "git_agentckpt."):
        if info.name not in _SKIP_PRELOAD:
            importlib.import_module(info.name)
    from git_agentckpt.cli.main import load_all_commands
    from git_agentckpt.redact import precompile

    load_all_commands()
    precompile()


def parse_request(head_fds: list[int], payload: bytes, fp: str) -> Request:
    fields = [os.fsdecode(f) for f in payload.split(b"\0")]
    if len(fields) < 3 or fields[1] != launch.PROTOCOL:
        raise BadRequest("protocol mismatch")
    req = Request(kind=fields[0], fds=head_fds)
    if req.kind != "run":
        return req  # status and stop: any client of this user, whatever its version
    if fields[2] != fp:
        raise BadRequest("fingerprint mismatch")
    try:
        req.cwd, req.umask, argc = fields[3], int(fields[4]), int(fields[5])
        req.argv = fields[6 : 6 + argc]
        env_fields = fields[6 + argc :]
    except (IndexError, ValueError) as exc:
        raise BadRequest(f"malformed run request: {exc}") from exc
    if len(req.argv) != argc or len(req.fds) != 3:
        raise BadRequest("malformed run request: argv or file descriptors missing")
    for item in env_fields:
        key, sep, value = item.partition("=")
        if sep:
            req.env[key] = value
    return req


def read_request(conn: socket.socket, fp: str) -> Request:
    conn.settimeout(5.0)
    fds = array.array("i")
    head, ancdata, _flags, _addr = conn.recvmsg(4, _FDS_SPACE)  # the fds come with it
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    try:
        rest = launch.recv_exact(conn, 4 - len(head)) if len(head) < 4 else b""
        if rest is None:
            raise BadRequest("connection closed")
        size = int.from_bytes(head + rest, "big")
        if size > launch.MAX_REQUEST:
            raise BadRequest(f"request of {size} bytes")
        payload = launch.recv_exact(conn, size)
        if payload is None:
            raise BadRequest("connection closed")
        return parse_request(list(fds), payload, fp)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _reply(conn: socket.socket, kind: bytes, body: bytes | int) -> None:
    if isinstance(body, int):
        data = kind + body.to_bytes(4, "big", signed=True)
    else:
        data = kind + len(body).to_bytes(4, "big") + body
    with contextlib.suppress(OSError):  # the client is gone
        conn.sendall(data)


def exit_status(wait_status: int) -> int:
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


class Server:
    def __init__(self, fp: str, idle: float) -> None:
        self.fp = fp
        self.idle = idle
        self.started = time.time()
        self.last_active = time.monotonic()
        self.served = 0
        self.stopping = False
        self.children: dict[int, socket.socket] = {}  # child pid -> its client
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.wake_r, self.wake_w = os.pipe()

    def bind(self) -> bool:
        try:
            self.listener.bind(launch.address(self.fp))
        except OSError:
            return False  # another server holds the name
        self.listener.listen(64)
        self.listener.setblocking(False)
        return True

    def serve(self) -> None:
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        while True:
            if self.stopping and not self.children:
                return
            timeout = None
            if not self.children and not self.stopping:
                timeout = self.idle - (time.monotonic() - self.last_active)
                if timeout <= 0:
                    return
            for key, _ in self.sel.select(timeout):
                if key.data == "accept":
                    self._accept()
                elif key.data == "wake":
                    self._wake()
                else:
                    self._client_gone(key.data)
            self._reap()

    def _stop_listening(self) -> None:
        """Run no new call (their clients run them themselves); exit when the last ends."""
        self.stopping = True

    def _wake(self) -> None:
        try:
            signals = os.read(self.wake_r, 512)
        except BlockingIOError:
            return
        if signal.SIGTERM in signals:
            self._stop_listening()

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        conn.setblocking(True)
        try:
            cred = conn.getsockopt(socket.SOL_SOCKET, launch.SO_PEERCRED, 12)
            if int.from_bytes(cred[4:8], sys.byteorder) != os.getuid():
                conn.close()  # never serve another user
                return
            req = read_request(conn, self.fp)
        except (OSError, BadRequest) as exc:
            _reply(conn, b"R", str(exc).encode())
            conn.close()
            return
        if req.kind == "status":  # asking is not using: it does not delay the idle exit
            _reply(conn, b"S", json.dumps(self.status()).encode())
        elif req.kind == "stop":
            _reply(conn, b"K", b"stopping")
            self._stop_listening()
        elif req.kind == "run" and self.stopping:
            for fd in req.fds:
                os.close(fd)
            _reply(conn, b"R", b"stopping")
        elif req.kind == "run":
            self._fork(conn, req)
            return
        else:
            _reply(conn, b"R", f"unknown request {req.kind!r}".encode())
        conn.close()

    def _fork(self, conn: socket.socket, req: Request) -> None:
        # Held back until the child has its own handlers (a Ctrl-C the client
        # forwards at once must interrupt the call, not hit the server's SIG_IGN).
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
            for fd in req.fds:
                os.close(fd)
            _reply(conn, b"R", f"fork failed: {exc}".encode())
            conn.close()
            return
        if pid == 0:
            code = launch.INTERNAL
            try:
                self._close_in_child(conn)
                code = run_child(req)
            except BaseException as exc:  # never return into the server's loop
                _child_failed(exc)
            finally:
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        for fd in req.fds:
            os.close(fd)
        with contextlib.suppress(OSError):  # also done by the child: whichever runs first
            os.setpgid(pid, pid)
        self.served += 1
        self.last_active = time.monotonic()
        self.children[pid] = conn
        _reply(conn, b"P", pid)
        self.sel.register(conn, selectors.EVENT_READ, pid)

    def _close_in_child(self, own: socket.socket) -> None:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with contextlib.suppress(OSError):  # its own group: the client forwards signals to it
            os.setpgid(0, 0)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        self.sel.close()
        self.listener.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        for conn in self.children.values():
            conn.close()
        own.close()

    def _client_gone(self, pid: int) -> None:
        """A client hung up (it was killed) while its child runs: kill the child too."""
        conn = self.children.get(pid)
        if conn is None:
            return
        try:
            if conn.recv(4096, socket.MSG_DONTWAIT):
                return  # a client never sends more; stray bytes are dropped
        except BlockingIOError:
            return
        except OSError:
            pass
        self.sel.unregister(conn)
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
                break
            except OSError:
                continue

    def _reap(self) -> None:
        while self.children:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(conn)
            _reply(conn, b"X", exit_status(wait_status))
            conn.close()
            self.last_active = time.monotonic()

    def status(self) -> dict[str, object]:
        from git_agentckpt import __version__

        return {
            "pid": os.getpid(),
            "version": __version__,
            "python": sys.executable,
            "package": launch.package_dir(),
            "fingerprint": self.fp,
            "started": int(self.started),
            "served": self.served,
            "calls": sorted(self.children),  # pids of the calls running now
            "idle_timeout": self.idle,
            "idle_for": round(time.monotonic() - self.last_active, 3),
            "stopping": self.stopping,
        }


def _child_failed(exc: BaseException) -> None:
    try:
        msg = f"git ckpt: error: internal error in the server's child: {type(exc).__name__}: {exc}"
        os.write(2, (msg + " (GIT_CKPT_SERVER=off runs without the server)\n").encode())
    except OSError:
        pass


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


def run_child(req: Request) -> int:
    """In the forked child: become the client's process, run the CLI, its exit status."""
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
    os.environ.clear()
    os.environ.update(req.env)
    time.tzset()
    from git_agentckpt.git.repo import reset_environment_caches

    reset_environment_caches()
    sys.stdin = _text_stream(0, "r", req.env, "strict")
    sys.stdout = _text_stream(1, "w", req.env, "strict")
    sys.stderr = _text_stream(2, "w", req.env, "backslashreplace")
    sys.argv = list(req.argv)
    return _run_cli()


def _run_cli() -> int:
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


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m git_agentckpt.cli.server FINGERPRINT", file=sys.stderr)
        return 2
    fp = args[0]
    os.closerange(3, 1 << 16)  # fds a hook or agent left open must not be held for minutes
    os.chdir("/")
    preload()
    if launch.fingerprint() != fp:
        return 0  # the package changed while this server started
    server = Server(fp, launch.idle_seconds(os.environ))
    if not server.bind():
        return 0
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
