"""The per-worktree daemon behind `git-ckpt`: modules imported once, one forked child per call.

Started in the background by `cli/launch.py` (or `git ckpt daemon start`) as
`python -P -c "...; from git_agentckpt.daemon.server import main; ..." FINGERPRINT
GIT_DIR WORKTREE` (the caller's own copy of the package first on the path). It takes
the lock `<git dir>/agent/daemon.lock` (a daemon of the same fingerprint already holds
it: this one exits; a stale one, of another version or installation, is asked to
stop and replaced), imports every module a command may need, binds
`<git dir>/agent/daemon.sock` (mode 0600), registers in this user's list of daemons
(`daemon/registry.py`: beyond GIT_CKPT_DAEMON_MAX daemons, the least recently used
one is asked to stop), then serves until it has been idle for GIT_CKPT_DAEMON_IDLE
seconds (300), gets SIGTERM, or `stop`.

One `select` loop, single-threaded (a fork of a threaded process is not safe),
over the listening socket, every client connection, a wake-up pipe for SIGCHLD
and SIGTERM, and any readers added with `Daemon.add_reader`. Connections are
read without blocking, each into its own buffer; a request not complete within
2 x GIT_CKPT_DAEMON_TIMEOUT seconds (2) is dropped, so an idle or trickling
connection never delays another call. For a complete `run` request the daemon
checks, before anything is forked: the fingerprint, the command as click parses it
(`cli/routing.refusal`: commands that need a person or the terminal, and calls for
another repository, are refused here, whatever the client thought) and the caller
(`daemon/peer.refusal`: the caller must be the daemon's twin). It then answers "A";
on the client's "G" it forks a child, which becomes the caller
(`daemon/child.run_in_child`). The daemon itself never opens a repository; between
calls it reads the worktree's cache files (`.git/agent/state/`) into the memos every
child starts with (`daemon/warm.py`), which a child trusts no more than the files:
their tips are compared with the refs.

Plugging in (the work-tree watcher and the cache read-ahead do, `daemon/watch.py`,
`daemon/warm.py`): a function appended to `STARTUP_HOOKS` is called once with the
`Daemon`, after the socket is bound and before serving. It can read `daemon.worktree`
and `daemon.git_dir`, register a readable fd with `daemon.add_reader(fd, callback)`
(run in the loop when the fd is readable; an exception removes the reader), queue
background work in slices with `daemon.add_idle(task)` (run once per loop round while
it returns True, between calls), answer requests of a kind of its own
(`daemon.services[kind]`: given the request's fields, it returns the reply's kind and
body), and append to `daemon.in_child` (in each child right after the fork),
`daemon.after_call` (in the daemon once a call's child is reaped), `daemon.at_exit`
(when the daemon exits) and `daemon.status_hooks[name]` (its result is shown under
`name` in `git ckpt daemon status --json`). In the child, `current` is the daemon it
was forked from (its memory as at the fork; None in any other process). A child must
still check that the repository it opened is `current.git_dir` before trusting
anything the daemon knows.

Protocol: see `daemon/client.py`. What is compared: see `daemon/peer.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence

from git_agentckpt.daemon import client, peer, registry
from git_agentckpt.daemon import find as daemon_find
from git_agentckpt.daemon.child import (
    BadRequest,
    ReportedSlots,
    Request,
    exit_status,
    parse_request,
    preload,
    run_in_child,
)
from git_agentckpt.daemon.claim import claim
from git_agentckpt.daemon.conn import Conn, receive
from git_agentckpt.daemon.conn import send as _send

FORWARDED = set(client.FORWARDED_SIGNALS)
Service = Callable[[list[str]], tuple[bytes, bytes]]
MAX_REASONS = 32  # distinct refusal reasons counted in `status` (then "other")

STARTUP_HOOKS: list[Callable[[Daemon], None]] = []
current: Daemon | None = None  # in a forked child: the daemon it was forked from


class Daemon:
    def __init__(
        self, fp: str, git_dir: str, worktree: str, dirfd: int, lockfd: int, env: dict[str, str]
    ) -> None:
        self.fp, self.git_dir, self.worktree = fp, git_dir, worktree
        self.dirfd, self.lockfd = dirfd, lockfd
        self.idle = daemon_find.idle_seconds(env)
        self.request_timeout = 2 * daemon_find.timeout_seconds(env)
        self.started = time.time()
        self.last_active = time.monotonic()
        self.served = 0
        self.refused: dict[str, int] = {}
        self.stopping = False
        self.conns: set[Conn] = set()  # every open client connection
        self.children: dict[int, Conn] = {}  # child pid -> its client
        self.readers: dict[int, Callable[[], None]] = {}
        self.idle_tasks: list[Callable[[], bool]] = []
        self.services: dict[str, Service] = {}
        self.in_child: list[Callable[[], None]] = []
        self.after_call: list[Callable[[], None]] = []
        self.at_exit: list[Callable[[], None]] = []
        self.status_hooks: dict[str, Callable[[], object]] = {}
        self.slots = ReportedSlots()  # which children reported (a page shared with them)
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket_path = daemon_find.socket_path(git_dir)
        self.socket_inode = -1
        self.wake_r, self.wake_w = os.pipe()

    # -- the hook for plug-ins ---------------------------------------------------------------

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        """Call `callback()` in the loop whenever `fd` is readable."""
        self.readers[fd] = callback
        self.sel.register(fd, selectors.EVENT_READ, ("reader", fd))

    def remove_reader(self, fd: int) -> None:
        if self.readers.pop(fd, None) is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(fd)

    def add_idle(self, task: Callable[[], bool]) -> None:
        """Background work in slices: `task()` runs once per loop round, between calls,
        while it returns True (the loop then polls instead of sleeping); keep a slice short."""
        self.idle_tasks.append(task)

    def _run_idle(self) -> None:
        for task in list(self.idle_tasks):
            try:
                more = task()
            except Exception:
                more = False  # a broken plug-in must not take the daemon down
            if not more:
                self.idle_tasks.remove(task)

    # -- life --------------------------------------------------------------------------------

    def bind(self) -> bool:
        addr = self.socket_path
        if len(os.fsencode(addr)) >= daemon_find.SUN_PATH_MAX:
            addr = f"/proc/self/fd/{self.dirfd}/{daemon_find.SOCKET_NAME}"
        with contextlib.suppress(FileNotFoundError):  # a crashed daemon's: we hold the lock
            os.unlink(daemon_find.SOCKET_NAME, dir_fd=self.dirfd)
        old = os.umask(0o177)  # the socket is created 0600: only this user may connect
        try:
            self.listener.bind(addr)
            st = os.stat(daemon_find.SOCKET_NAME, dir_fd=self.dirfd, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.umask(old)
        self.socket_inode = st.st_ino
        self.listener.listen(64)
        self.listener.setblocking(False)
        return True

    def close(self) -> None:
        """Run the `at_exit` hooks, remove our socket (only ours: we hold the lock), unlock."""
        registry.leave(self.git_dir)
        for hook in self.at_exit:
            with contextlib.suppress(Exception):
                hook()
        with contextlib.suppress(OSError):
            st = os.stat(daemon_find.SOCKET_NAME, dir_fd=self.dirfd, follow_symlinks=False)
            if st.st_ino == self.socket_inode:
                os.unlink(daemon_find.SOCKET_NAME, dir_fd=self.dirfd)
        self.listener.close()
        for fd in (self.lockfd, self.dirfd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def serve(self) -> None:
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.sel.register(self.listener, selectors.EVENT_READ, ("accept", 0))
        self.sel.register(self.wake_r, selectors.EVENT_READ, ("wake", 0))
        while True:
            if self.stopping and not self.children:
                return
            timeout = self._timeout()
            if timeout is not None and timeout <= 0 and self._idle() and not self.idle_tasks:
                return
            for key, _ in self.sel.select(None if timeout is None else max(timeout, 0)):
                kind, ref = key.data
                if kind == "accept":
                    self._accept()
                elif kind == "wake":
                    self._wake()
                elif kind == "conn":
                    self._readable(ref)
                else:
                    self._run_reader(ref)
            self._expire()
            self._reap()
            self._run_idle()

    def _idle(self) -> bool:
        return not self.children and not self.conns and not self.stopping

    def _timeout(self) -> float | None:
        if self.idle_tasks:
            return 0.0  # poll: background work is waiting
        now = time.monotonic()
        deadlines = [c.deadline for c in self.conns if c.state != "run"]
        if self._idle():
            deadlines.append(self.last_active + self.idle)
        return min(deadlines) - now if deadlines else None

    def _wake(self) -> None:
        try:
            signals = os.read(self.wake_r, 512)
        except BlockingIOError:
            return
        if signal.SIGTERM in signals:
            self.stopping = True  # run no new call; exit when the last ends

    def _run_reader(self, fd: int) -> None:
        callback = self.readers.get(fd)
        try:
            if callback is not None:
                callback()
        except Exception:
            self.remove_reader(fd)  # a broken plug-in must not take the daemon down

    # -- connections -------------------------------------------------------------------------

    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        try:
            if peer.peer_of(sock).uid != os.getuid():
                sock.close()  # never serve another user, never tell them anything
                return
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        conn = Conn(sock, time.monotonic() + self.request_timeout)
        self.conns.add(conn)
        self.sel.register(sock, selectors.EVENT_READ, ("conn", conn))

    def _drop(self, conn: Conn) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
        conn.sock.close()
        for fd in conn.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        conn.fds = []
        if conn.req is not None:
            conn.req.close_fds()
        self.conns.discard(conn)

    def _expire(self) -> None:
        now = time.monotonic()
        for conn in [c for c in self.conns if c.state != "run" and c.deadline <= now]:
            self._drop(conn)  # too slow (or idle on purpose): its client runs the call

    def _readable(self, conn: Conn) -> None:
        if conn.state == "run":
            self._client_gone(conn)
            return
        what = receive(conn)
        if what == "go":
            self._fork(conn)
        elif what == "drop":
            self._drop(conn)
        elif what == "request":
            self._answer(conn)

    def _answer(self, conn: Conn) -> None:
        try:
            req = parse_request(conn.payload, self.fp)
        except BadRequest as exc:
            self._refuse(conn, str(exc))
            return
        conn.req = req
        if req.kind == "status":  # asking is not using: it does not delay the idle exit
            _send(conn, b"S", json.dumps(self.status()).encode())
        elif req.kind in self.services:
            _send(conn, *self._serve(req))
        elif req.kind == "stop":
            _send(conn, b"K", b"stopping")
            self.stopping = True
        elif req.kind == "run":
            why = self._refusal(conn, req)
            if why is None:
                conn.state = "go"
                if not _send(conn, b"A"):
                    self._drop(conn)
                return
            self._refuse(conn, why)
            return
        else:
            self._refuse(conn, f"unknown request {req.kind!r}")
            return
        self._drop(conn)

    def _serve(self, req: Request) -> tuple[bytes, bytes]:
        try:
            return self.services[req.kind](req.fields)
        except Exception as exc:  # a broken plug-in must not take the daemon down
            return b"R", f"{req.kind} failed: {type(exc).__name__}".encode()

    def _refusal(self, conn: Conn, req: Request) -> str | None:
        from git_agentckpt.cli.routing import refusal

        if self.stopping:
            return "not served: the daemon is stopping"
        why = refusal(req.argv[1:], req.cwd, req.env, self.git_dir)
        why = why or peer.refusal(conn.sock, req.cwd)
        return None if why is None else f"not served: {why}"

    def _refuse(self, conn: Conn, why: str) -> None:
        key = why if why in self.refused or len(self.refused) < MAX_REASONS else "other"
        self.refused[key] = self.refused.get(key, 0) + 1
        _send(conn, b"R", why.encode())
        self._drop(conn)

    def _fork(self, conn: Conn) -> None:
        req = conn.req
        assert req is not None
        conn.slot = self.slots.take()
        pid = self._fork_child(conn, req)
        if pid is None:
            return
        req.close_fds()
        with contextlib.suppress(OSError):  # also done by the child: whichever runs first
            os.setpgid(pid, pid)
        self.served += 1
        self.last_active = time.monotonic()
        registry.touch(self.git_dir)
        conn.state, conn.pid = "run", pid
        self.children[pid] = conn
        _send(conn, b"P", pid)

    def _fork_child(self, conn: Conn, req: Request) -> int | None:
        """Fork a child for `conn`'s call: its pid; None if refused (the fork failed)."""
        # Held back until the child has its own handlers (a Ctrl-C the client
        # forwards at once must interrupt the call, not hit the daemon's SIG_IGN).
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
            self.slots.give_back(conn.slot)
            conn.slot = -1
            self._refuse(conn, f"fork failed: {exc}")
            return None
        if pid == 0:
            self._child(conn, req)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        return pid

    def _child(self, conn: Conn, req: Request) -> None:
        """In the forked child: never returns into the daemon's loop."""
        global current
        current = self
        own, slot = conn.sock.fileno(), (self.slots, conn.slot)
        run_in_child(req, own, lambda: self._leave(conn.sock), self.in_child, slot, FORWARDED)

    def _leave(self, keep: socket.socket) -> None:
        """In a forked child: close what the daemon holds, but `keep`."""
        self.sel.close()
        self.listener.close()
        for fd in (self.wake_r, self.wake_w, self.lockfd, self.dirfd):
            os.close(fd)
        for other in self.conns:
            if other.sock is keep:
                continue
            other.sock.close()
            for fd in other.fds + (other.req.fds if other.req else []):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _client_gone(self, conn: Conn) -> None:
        """A client hung up while its call runs: before the call reported its exit (the
        client was killed), kill the call too; after it, the child is finishing the work
        that waits for the answer (`after_reply.py`) and is reaped when it ends."""
        try:
            if conn.sock.recv(4096, socket.MSG_DONTWAIT):
                return  # a client never sends more; stray bytes are dropped
        except BlockingIOError:
            return
        except OSError:
            pass
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
        if self.slots.reported(conn.slot):
            return
        with contextlib.suppress(OSError):
            os.kill(conn.pid, signal.SIGKILL)

    def _reap(self) -> None:
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            self.slots.give_back(conn.slot)
            conn.slot = -1
            _send(conn, b"X", exit_status(wait_status))  # unless the child said it already
            self._drop(conn)
            self.last_active = time.monotonic()
            for hook in self.after_call:
                with contextlib.suppress(Exception):  # a broken plug-in must not stop us
                    hook()

    def status(self) -> dict[str, object]:
        from git_agentckpt import __version__

        extra: dict[str, object] = {}
        for name, hook in self.status_hooks.items():
            try:
                extra[name] = hook()
            except Exception as exc:
                extra[name] = f"error: {type(exc).__name__}: {exc}"
        return extra | {
            "pid": os.getpid(),
            "version": __version__,
            "python": sys.executable,
            "package": daemon_find.package_dir(),
            "fingerprint": self.fp,
            "worktree": self.worktree,
            "git_dir": self.git_dir,
            "socket": self.socket_path,
            "started": int(self.started),
            "served": self.served,
            "refused": dict(self.refused),
            "calls": sorted(self.children),  # pids of the calls running now
            "idle_timeout": self.idle,
            "idle_for": round(time.monotonic() - self.last_active, 3),
            "request_timeout": self.request_timeout,
            "stopping": self.stopping,
        }


def attach(daemon: Daemon) -> None:
    """Where plug-ins attach: every STARTUP_HOOKS function, once, before serving (the
    work-tree watcher first, `daemon_watch.py`)."""
    from git_agentckpt.daemon import warm, watch

    for builtin in (warm.attach, watch.attach):
        if builtin not in STARTUP_HOOKS:
            STARTUP_HOOKS.insert(0, builtin)
    for hook in STARTUP_HOOKS:
        hook(daemon)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3:
        print("usage: git_agentckpt.daemon.server FINGERPRINT GIT_DIR WORKTREE", file=sys.stderr)
        return 2
    os.closerange(3, 1 << 16)  # fds a hook or agent left open must not be held for minutes
    os.chdir("/")
    return run(*args)


def run(fp: str, git_dir: str, worktree: str) -> int:
    """Be the daemon of `git_dir` in this process, until it exits (see the module doc)."""
    try:
        claimed = claim(git_dir, fp)
    except OSError:
        return 0  # no daemon here (read-only repository, ...): calls run on their own
    if claimed is None:
        return 0
    preload()
    if daemon_find.fingerprint() != fp:
        return 0  # the package changed while this daemon started
    daemon = Daemon(fp, git_dir, worktree, *claimed, dict(os.environ))
    try:
        if daemon.bind():
            registry.join(git_dir, worktree)
            attach(daemon)
            daemon.serve()
    finally:
        daemon.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
