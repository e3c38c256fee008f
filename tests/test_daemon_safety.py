"""The daemon's safety rules (issue 12, item 3): safe by construction.

- it belongs to one work tree and is found through a socket in its git dir;
- a call is served only for the daemon's twin (same user, namespaces, root,
  cgroup, limits, privileges), otherwise it runs in the caller's own process;
- commands that need a person or the terminal are refused by the daemon itself;
- connections never block each other, a stopped daemon never hangs a client,
  Ctrl-C and SIGTERM always end it;
- the call's environment is exactly the caller's.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git
from daemon_helpers import (
    GIT_CKPT,
    blocked_child,
    blocked_event,
    daemon_pids,
    gone,
    notes,
    ok,
    run,
    running_status,
    serving,
    status,
    wait_for,
)

from git_agentckpt.daemon import client as launch
from git_agentckpt.daemon import find as daemon_find
from git_agentckpt.daemon import peer as daemon_peer

pytestmark = pytest.mark.mode("daemon", reason="tests of the daemon: they turn it on themselves")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from serving(monkeypatch, tmp_path)


@pytest.fixture
def task_repo(repo: Path, served: None) -> Path:
    ok(repo, "daemon", "start")
    ok(repo, "init")
    ok(repo, "task", "start", "t1", "--goal", "stay safe")
    assert status(repo)["served"] == 2
    return repo


def debug_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, GIT_CKPT_DEBUG="1", **extra)


# -- where the daemon is ---------------------------------------------------------------------


def test_discovery_finds_the_per_worktree_git_dir_without_pygit2(repo: Path) -> None:
    real = Path(os.path.realpath(repo))
    found = daemon_find.discover(str(repo / "src"), {})
    assert found == (str(real), str(real / ".git"))
    wt = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", str(wt))
    wt_found = daemon_find.discover(str(wt), {})
    assert wt_found is not None
    assert wt_found == (os.path.realpath(wt), str(real / ".git" / "worktrees" / "wt"))
    for var in daemon_find.UNCLEAR_VARS:  # git is told where the repository is
        assert daemon_find.discover(str(repo), {var: str(repo / ".git")}) is None
    assert daemon_find.discover(str(repo / ".git"), {}) is None  # no work tree here
    assert daemon_find.discover(str(repo.parent), {}) is None  # outside any repository
    (repo / "nested").mkdir()
    (repo / "nested" / ".git").write_text("not a gitdir line\n")
    assert daemon_find.discover(str(repo / "nested"), {}) is None  # unclear: own process


def test_each_worktree_has_its_own_daemon(repo: Path, served: None, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt))
    ok(repo, "daemon", "start")
    ok(wt, "daemon", "start")
    main, linked = running_status(repo), running_status(wt)
    assert main["pid"] != linked["pid"]
    assert linked["worktree"] == os.path.realpath(wt)
    assert linked["socket"] == os.path.realpath(
        repo / ".git" / "worktrees" / "wt" / "agent" / "daemon.sock"
    )
    ok(wt, "list")
    assert (status(repo)["served"], status(wt)["served"]) == (0, 1)


def test_a_path_longer_than_a_socket_address_is_served(served: None, tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["a-rather-long-directory-name-" + str(i) for i in range(4)])
    deep.mkdir(parents=True)
    git(deep, "init", "-q")
    (deep / "f.txt").write_text("x\n")
    git(deep, "add", "f.txt")
    git(deep, "commit", "-qm", "one")
    sock = deep / ".git" / "agent" / "daemon.sock"
    assert len(os.fsencode(os.path.realpath(sock))) > daemon_find.SUN_PATH_MAX
    ok(deep, "init")
    ok(deep, "daemon", "start")
    assert running_status(deep)["socket"] == os.path.realpath(sock)
    ok(deep, "list")
    assert status(deep)["served"] == 1


def test_a_stale_daemon_is_refused_and_replaced(repo: Path, served: None, tmp_path: Path) -> None:
    """A daemon of another fingerprint (here: another HOME) never serves; it is replaced."""
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    shutil.copy(Path(os.environ["HOME"]) / ".gitconfig", other_home / ".gitconfig")
    ok(repo, "daemon", "start", env=dict(os.environ, HOME=str(other_home)))
    old = status(repo)
    proc = run(repo, "init", env=debug_env())
    assert proc.returncode == 0, proc.stderr
    assert "daemon: stale: this daemon runs another version" in proc.stderr
    wait_for(lambda: gone(old["pid"]), "the stale daemon to go")
    new = running_status(repo)
    assert new["pid"] != old["pid"]
    assert new["fingerprint"] == daemon_find.fingerprint()
    ok(repo, "list")
    assert status(repo)["served"] == 1
    assert len(daemon_pids(tmp_path)) == 1


# -- what the daemon refuses -----------------------------------------------------------------


def _raw_run(repo: Path, argv: list[str], cwd: str | None = None) -> tuple[str, bytes] | None:
    """Send a `run` request as a (modified) client would: the daemon's first answer."""
    sock = launch.connect(str(repo / ".git"), 10.0)
    try:
        env = [f"{k}={v}" for k, v in os.environ.items()]
        where = cwd or os.getcwd()
        fields = ["run", daemon_find.PROTOCOL, daemon_find.fingerprint(), where, "18"]
        launch.send_request(sock, [*fields, str(len(argv) + 1), GIT_CKPT, *argv, *env])
        return launch.Replies(sock).next(30.0)
    finally:
        sock.close()


def test_terminal_commands_are_refused_by_the_daemon_itself(task_repo: Path) -> None:
    """A client that skips its own check (or a forged one) still cannot have the daemon
    run `trust` or a person's confirmation on a terminal it controls."""
    before = status(task_repo)["served"]
    cases = {
        ("trust",): "`trust` needs a person at the terminal",
        ("-C", ".", "trust", "--list"): "`trust` needs a person at the terminal",
        # click's combined short flags, which a second parser missed (issue 24)
        ("-qC", ".", "trust"): "`trust` needs a person at the terminal",
        ("-qC.", "trust"): "`trust` needs a person at the terminal",
        ("-qC", ".", "confirm", "t1", "--by-human"): "`confirm --by-human` needs a person",
        ("confirm", "--by-human", "t1"): "`confirm --by-human` needs a person",
        ("check", "t1", "--rebaseline"): "`check --rebaseline` needs a person",
        ("fetch", "origin"): "`fetch` may have git ask for credentials",
        ("push", "origin"): "`push` may have git ask for credentials",
        ("daemon", "stop"): "`daemon` manages the daemon itself",
        ("-C", "/", "list"): "the call is for another repository than this daemon's",
    }
    for argv, why in cases.items():
        reply = _raw_run(task_repo, list(argv))
        assert reply is not None and reply[0] == "R", argv
        assert reply[1].decode().startswith(f"not served: {why}"), reply
    # then it waits for "G": never sent
    assert _raw_run(task_repo, ["-C", str(task_repo), "list"]) == ("A", b"")
    after = status(task_repo)
    assert after["served"] == before
    assert sum(after["refused"].values()) == len(cases)
    ok(task_repo, "check", "t1")  # a plain check is served
    assert status(task_repo)["served"] == before + 1


def test_combined_short_flags_never_take_a_person_s_command_to_the_daemon(
    task_repo: Path,
) -> None:
    """Through the real entry point: `-qC .` and friends are read as click reads them, by
    the client and again by the daemon (issue 24: a second parser let them through)."""
    before = status(task_repo)["served"]
    assert "nothing to approve" in ok(task_repo, "-qC", ".", "trust")
    assert "nothing to approve" in ok(task_repo, "-qC.", "trust")
    proc = run(task_repo, "-qC", ".", "confirm", "t1", "--by-human")
    assert proc.returncode != 0 and "terminal" in proc.stderr, proc.stderr  # not one here
    assert status(task_repo)["served"] == before
    ok(task_repo, "-qC", ".", "list")  # a plain call with the same flags is served
    assert status(task_repo)["served"] == before + 1


# -- who is served ---------------------------------------------------------------------------


def test_a_request_for_another_working_directory_is_refused(task_repo: Path) -> None:
    """The request names a working directory: it must be the caller's own, or the call
    would run somewhere its caller is not (a path the caller may not even reach)."""
    elsewhere = "/" if os.getcwd() != "/" else "/tmp"
    reply = _raw_run(task_repo, ["-C", str(task_repo), "list"], cwd=elsewhere)
    assert reply == ("R", b"not served: working directory differs from the caller's own")
    assert _raw_run(task_repo, ["-C", str(task_repo), "list"]) == ("A", b"")


def test_the_peer_check_refuses_another_user() -> None:
    """`peer.refusal` itself, for a caller of another uid (the daemon's accept drops such
    a caller before, `test_another_user_is_never_served`: each check is tested alone)."""
    if os.getuid() != 0:
        pytest.skip("needs root to connect as another user")
    open_dir = tempfile.mkdtemp()  # under /tmp: a path another user can reach
    os.chmod(open_dir, 0o755)
    path = os.path.join(open_dir, "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o777)
    listener.listen(1)
    listener.settimeout(30)
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
            sock.recv(1)
        finally:
            os._exit(0)
    try:
        conn, _ = listener.accept()
        try:
            assert daemon_peer.refusal(conn, os.getcwd()) == "another user"
        finally:
            conn.close()
    finally:
        listener.close()
        os.waitpid(pid, 0)
        shutil.rmtree(open_dir)


def test_the_same_process_has_the_same_identity_and_a_lower_limit_differs() -> None:
    mine = daemon_peer.identity("/proc/self")
    assert {"mount namespace", "cgroup", "root directory", "privileges (CapEff)"} <= set(mine)
    assert any(k.startswith("resource limit (Max file size)") for k in mine)
    twin = subprocess.Popen(["sleep", "60"])
    limited = subprocess.Popen(
        ["sleep", "60"],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20)),
    )
    try:
        assert daemon_peer.difference(mine, daemon_peer.identity(f"/proc/{twin.pid}")) is None
        theirs = daemon_peer.identity(f"/proc/{limited.pid}")
        assert daemon_peer.difference(mine, theirs) == "resource limit (Max file size) differs"
    finally:
        for p in (twin, limited):
            p.kill()
            p.wait()


def _limit_fsize() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def test_a_lower_file_size_limit_runs_in_its_own_process(task_repo: Path) -> None:
    before = status(task_repo)["served"]
    plain = run(task_repo, "show", "t1", "--json")
    limited = run(task_repo, "show", "t1", "--json", env=debug_env(), preexec_fn=_limit_fsize)
    assert limited.returncode == 0, limited.stderr
    assert limited.stdout == plain.stdout
    why = "not served: resource limit (Max file size) differs"
    assert f"git ckpt: daemon: {why}; running in this process" in limited.stderr
    after = status(task_repo)
    assert after["served"] == before + 1  # only the plain call
    assert after["refused"] == {why: 1}


def _unshare_works() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare -m is not permitted here: {probe.stderr.strip()}"
    return None


def test_a_caller_in_another_mount_namespace_runs_in_its_own_process(task_repo: Path) -> None:
    """A read-only sandbox over the repository: the write must fail, not go through the daemon."""
    why_not = _unshare_works()
    if why_not:
        pytest.skip(why_not)
    (task_repo / "src" / "app.py").write_text("print('sandboxed')\n")
    tip = git(task_repo, "rev-parse", "refs/agent/checkpoints/t1")
    before = status(task_repo)["served"]
    where = str(os.path.realpath(task_repo))
    script = (
        f'mount --bind -o ro "{where}" "{where}" && exec "{GIT_CKPT}" create -t t1 -m sandboxed'
    )
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        cwd=task_repo,
        env=debug_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 7, proc.stderr  # the system refused: read-only
    assert "not served: mount namespace differs" in proc.stderr
    assert "read-only file system" in proc.stderr
    assert git(task_repo, "rev-parse", "refs/agent/checkpoints/t1") == tip
    assert status(task_repo)["served"] == before
    ok(task_repo, "create", "-t", "t1", "-m", "outside")  # the same call outside is served
    assert status(task_repo)["served"] == before + 1


# -- connections never block each other ------------------------------------------------------


def _connect_raw(repo: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(repo / ".git" / "agent" / "daemon.sock"))
    return sock


def test_an_idle_and_a_trickling_connection_do_not_delay_calls(
    repo: Path, served: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon gives requests 60 s here; a call gives up on it after 10 s and runs
    itself (not served). A daemon that read one connection at a time would sit on the
    silent one for 60 s; every call below must be served by it all the same."""
    ok(repo, "daemon", "start", env=dict(os.environ, GIT_CKPT_DAEMON_TIMEOUT="30"))
    ok(repo, "init")
    before = status(repo)["served"]
    silent, trickle = _connect_raw(repo), _connect_raw(repo)
    try:
        for byte in b"\0\0\0":  # the start of a length that never completes
            trickle.send(bytes([byte]))
            ok(repo, "list")
        assert status(repo)["served"] == before + 3
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):  # still open: the calls did not wait for it
            silent.recv(1)
    finally:
        silent.close()
        trickle.close()


def test_an_incomplete_request_is_dropped(repo: Path, served: None) -> None:
    ok(repo, "daemon", "start", env=dict(os.environ, GIT_CKPT_DAEMON_TIMEOUT="0.2"))
    assert status(repo)["request_timeout"] == pytest.approx(0.4)
    sock = _connect_raw(repo)
    try:
        sock.send(b"\0\0")
        sock.settimeout(30)
        assert sock.recv(1) == b""  # closed by the daemon, unanswered
    finally:
        sock.close()


def _stopped_daemon(repo: Path) -> int:
    pid: int = status(repo)["pid"]
    os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T", "SIGSTOP")
    return pid


def test_a_stopped_daemon_does_not_hang_the_client(task_repo: Path) -> None:
    before = status(task_repo)["served"]
    pid = _stopped_daemon(task_repo)
    env = debug_env(GIT_CKPT_DAEMON_TIMEOUT="1")
    try:
        proc = run(task_repo, "event", "t1", "--type", "note", "--json", '{"n": 1}', env=env)
        assert proc.returncode == 0, proc.stderr
        assert "git ckpt: daemon: no answer within 1 s; running in this process" in proc.stderr
    finally:
        os.kill(pid, signal.SIGCONT)
    # The daemon now reads the request the client gave up on: it must never run it.
    assert status(task_repo)["served"] == before
    assert [e["data"] for e in notes(task_repo)] == [{"n": 1}]


def _waiting_on_a_socket(pid: int) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    return any(os.readlink(fd).startswith("socket:") for fd in fds.iterdir())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_client_waiting_on_a_stopped_daemon(task_repo: Path, signum: int) -> None:
    before = status(task_repo)["served"]
    pid = _stopped_daemon(task_repo)
    env = dict(os.environ, GIT_CKPT_DAEMON_TIMEOUT="600")  # it would wait ten minutes
    try:
        proc = subprocess.Popen(
            [GIT_CKPT, "event", "t1", "--type", "note", "--json", '{"n": 2}'],
            cwd=task_repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        wait_for(lambda: _waiting_on_a_socket(proc.pid), "the client to wait on the daemon")
        proc.send_signal(signum)
        proc.communicate(timeout=30)
        assert proc.returncode == 128 + signum
    finally:
        os.kill(pid, signal.SIGCONT)
    assert status(task_repo)["served"] == before
    assert notes(task_repo) == []


def test_sigterm_ends_a_running_call_even_when_its_daemon_is_stopped(task_repo: Path) -> None:
    """The call runs; then its daemon is stopped: SIGTERM still ends the caller (143)."""
    env = dict(os.environ, GIT_CKPT_DAEMON_TIMEOUT="1")  # the grace for a silent daemon: 2 s
    proc = blocked_event(task_repo, env=env)
    child = blocked_child(task_repo)
    pid = _stopped_daemon(task_repo)
    try:
        proc.send_signal(signal.SIGTERM)  # forwarded to the call, which dies of it
        proc.wait(timeout=30)  # stdin stays open: only the signal can end the call
        assert proc.returncode == 128 + signal.SIGTERM
    finally:
        os.kill(pid, signal.SIGCONT)
        assert proc.stdin is not None
        proc.stdin.close()
    wait_for(lambda: gone(child), "the call to be reaped")
    assert notes(task_repo) == []


# -- the call's environment is exactly the caller's ------------------------------------------


def test_the_environment_of_the_daemon_never_reaches_a_call(repo: Path, served: None) -> None:
    """Started with GIT_CKPT_TASK=x and a secret-named variable; calls without them must not
    see them: `create` must go to the single active task (not x), and the secret's value in
    an event must be stored as given (it would be redacted if the variable were set)."""
    secret = "zebra-quokka-771"
    leaky = dict(os.environ, GIT_CKPT_TASK="x", ODD_API_TOKEN=secret)
    ok(repo, "daemon", "start", env=leaky)
    ok(repo, "init")
    ok(repo, "task", "start", "t1", "--goal", "no leaks")
    (repo / "src" / "app.py").write_text("print('leak?')\n")
    made = ok(repo, "create", "-m", "no task named").strip()
    assert json.loads(ok(repo, "show", "t1", "--json"))["checkpoint"]["id"] == made
    ok(repo, "event", "t1", "--type", "note", "--json", json.dumps({"value": secret}))
    assert [e["data"] for e in notes(repo)] == [{"value": secret}]
    assert status(repo)["served"] == 6  # init, task start, create, event, show, log
    # and a caller that does set them has them (the daemon passes the caller's, all of it):
    # its `create` is for task x, which nobody started
    named = run(repo, "create", "-m", "task x", env=dict(os.environ, GIT_CKPT_TASK="x"))
    assert named.returncode == 3 and "no task 'x'" in named.stderr


def _umask_077() -> None:
    os.umask(0o077)


def test_umask_and_working_directory_are_the_callers(repo: Path, served: None) -> None:
    ok(repo, "daemon", "start")  # its own umask is 022
    proc = run(repo / "src", "init", preexec_fn=_umask_077)
    assert proc.returncode == 0, proc.stderr
    assert status(repo)["served"] == 1
    made = repo / ".agent" / "ckpt.toml"  # found from src/, written at the top
    assert made.stat().st_mode & 0o777 == 0o600


# -- the hook for the work-tree watcher ------------------------------------------------------

HOOKED_DAEMON = """
import os, sys
from git_agentckpt.daemon import find as daemon_find, server

log, git_dir, worktree = sys.argv[1:]

def note(text):
    with open(log, "a") as fh:
        fh.write(text + "\\n")

def attach(daemon):
    r, w = os.pipe()
    def readable():
        note("reader " + os.read(r, 10).decode())
        daemon.remove_reader(r)
    daemon.add_reader(r, readable)
    os.write(w, b"ready")
    daemon.services["echo"] = lambda fields: (b"E", " ".join(fields).encode())
    daemon.in_child.append(lambda: note(f"in_child {server.current.git_dir} {os.getpid()}"))
    slices = []
    def walk():
        slices.append(1)
        if len(slices) == 3:
            note("idle task done")
        return len(slices) < 3
    daemon.add_idle(walk)
    daemon.status_hooks["plugin"] = lambda: {"slices": len(slices)}
    daemon.at_exit.append(lambda: note("at_exit"))

server.STARTUP_HOOKS.append(attach)
sys.exit(server.main([daemon_find.fingerprint(), git_dir, worktree]))
"""


def run_hooked_daemon(repo: Path, log_file: Path) -> list[str]:
    """Run HOOKED_DAEMON, one `list` through it; the lines its plug-in wrote."""
    real = os.path.realpath(repo)
    daemon = subprocess.Popen(
        [sys.executable, "-c", HOOKED_DAEMON, str(log_file), f"{real}/.git", real],
        stdin=subprocess.DEVNULL,
    )
    try:
        running_status(repo)
        # idle slices run between calls, interleaved with the work-tree watcher's walk
        wait_for(lambda: status(repo)["plugin"] == {"slices": 3}, "the plug-in's idle slices")
        ok(repo, "list")
        assert status(repo)["served"] == 1
        echoed = launch.ask(f"{real}/.git", ["echo", daemon_find.PROTOCOL, "*", "a", "b"], 10)
        assert echoed == ("E", b"a b")
    finally:
        launch.control(f"{real}/.git", "stop")
        daemon.wait(timeout=30)
    lines = log_file.read_text().splitlines()
    assert sorted(lines[:2]) == ["idle task done", "reader ready"]
    return lines[2:]


def test_plug_ins_get_a_reader_a_service_and_child_hooks(
    repo: Path, served: None, tmp_path: Path
) -> None:
    real = os.path.realpath(repo)
    lines = run_hooked_daemon(repo, tmp_path / "hooks.log")
    assert lines[0].startswith(f"in_child {real}/.git ")
    assert lines[1:] == ["at_exit"]


def test_the_launcher_imports_stay_light() -> None:
    """`git-ckpt` keeps its imports light: no click, pygit2 or typing before the handoff."""
    probe = (
        "import sys, runpy; sys.argv = ['git-ckpt', 'list']\n"
        "import git_agentckpt.cli.launch as l\n"
        "print(sorted(m for m in ('click', 'pygit2', 'typing', 'socket', 'yaml') "
        "if m in sys.modules))\n"
    )
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert seen.stdout.strip() == "[]", seen.stderr


def test_an_exit_status_that_arrives_before_the_pid_is_the_calls(tmp_path: Path) -> None:
    """A quick call on a loaded machine can end, and report its exit status ("X"), before
    the daemon sends its pid ("P"): the caller takes that status (it exited 70 before)."""
    import array
    import threading

    git_dir = tmp_path / ".git"
    sock_path = Path(daemon_find.socket_path(str(git_dir)))
    sock_path.parent.mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(1)

    def scripted_daemon() -> None:
        conn, _ = listener.accept()
        with conn:
            size = int.from_bytes(conn.recv(4), "big")
            got = 0
            while got < size:
                got += len(conn.recv(size - got))
            conn.sendall(b"A")
            fds = array.array("i")
            _, anc, _, _ = conn.recvmsg(1, socket.CMSG_LEN(3 * fds.itemsize))
            for _, _, data in anc:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
            for fd in fds:
                os.close(fd)
            conn.sendall(b"X" + (3).to_bytes(4, "big", signed=True))
            conn.sendall(b"P" + (os.getpid()).to_bytes(4, "big", signed=True))

    server = threading.Thread(target=scripted_daemon)
    server.start()
    try:
        status, why = launch.run_remote(str(git_dir), daemon_find.fingerprint(), ["list"])
    finally:
        server.join(timeout=30)
        listener.close()
    assert (status, why) == (3, "")
