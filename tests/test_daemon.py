"""The per-worktree daemon (daemon/server.py) behind the `git-ckpt` entry point (cli/launch.py).

Calls served by the daemon behave as calls in their own process: output, exit
status, stdin, terminal, signals, environment. Its safety rules (who is served,
what is refused, connections that never block each other) are in
test_daemon_safety.py.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
import tempfile
import time
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
    log,
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
from git_agentckpt.daemon.child import BadRequest, exit_status, parse_request

pytestmark = pytest.mark.mode("daemon", reason="tests of the daemon: they turn it on themselves")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from serving(monkeypatch, tmp_path)


@pytest.fixture
def task_repo(repo: Path, served: None) -> Path:
    ok(repo, "init")
    # in its own process: no daemon yet; it starts one in the background
    ok(repo, "task", "start", "t1", "--goal", "serve calls warm")
    running_status(repo)
    return repo


def test_first_writing_call_starts_the_daemon_and_later_calls_use_it(
    repo: Path, served: None, tmp_path: Path
) -> None:
    assert not status(repo)["running"]
    ok(repo, "init")
    ok(repo, "list")
    ok(repo, "--help")
    ok(repo, "create", "--help")
    assert daemon_pids(tmp_path) == []  # reading, help and init start no daemon
    ok(repo, "task", "start", "t1", "--goal", "serve calls warm")
    first = running_status(repo)
    assert first["served"] == 0  # the call that started it ran in its own process
    assert first["worktree"] == os.path.realpath(repo)
    assert first["socket"] == os.path.realpath(repo / ".git" / "agent" / "daemon.sock")
    (repo / "src" / "app.py").write_text("print('changed')\n")
    ok(repo / "src", "create", "--task", "t1", "-m", "after a change")
    ok(repo, "list")
    after = status(repo)
    assert after["pid"] == first["pid"]
    assert after["served"] == 2


def test_output_and_exit_status_match_a_call_without_the_daemon(task_repo: Path) -> None:
    inline = dict(os.environ, GIT_CKPT_SERVER="off")
    cases = [
        ("list", "--json"),
        ("show", "t1", "--json"),
        ("show", "t1"),
        ("log", "t1", "--json"),
        ("show", "no-such-task"),  # 3, not found
        ("create", "--task", "bad name"),  # 2, bad task name
        ("bogus",),  # 2, click usage error
        ("--version",),
    ]
    before = status(task_repo)["served"]
    for args in cases:
        a, b = run(task_repo, *args, env=inline), run(task_repo, *args)
        assert (b.returncode, b.stdout, b.stderr) == (a.returncode, a.stdout, a.stderr), args
    # every case with a command went through the daemon (`--version` has none)
    assert status(task_repo)["served"] == before + len(cases) - 1


def test_stdin_environment_and_working_directory_reach_the_call(task_repo: Path) -> None:
    payload = json.dumps({"tool": "pytest", "note": "from stdin"})
    ok(task_repo / "src", "event", "t1", "--type", "tool.call", "--json", "-", input=payload)
    events = log(task_repo)
    assert events[-1]["type"] == "tool.call"
    assert events[-1]["data"]["note"] == "from stdin"
    (task_repo / "src" / "app.py").write_text("print('env')\n")
    env = dict(os.environ, GIT_CKPT_TASK="t1")
    made = ok(task_repo / "src", "create", "-m", "task from the environment", env=env).strip()
    shown = json.loads(ok(task_repo, "show", "t1", "--json"))
    assert shown["checkpoint"]["id"] == made
    assert shown["checkpoint"]["subject"].endswith("task from the environment")


def test_a_terminal_on_stdout_is_seen_by_the_call(task_repo: Path) -> None:
    """The fd itself is passed: `--json` is pretty on a terminal, compact in a pipe."""
    before = status(task_repo)["served"]
    main_fd, sub_fd = pty.openpty()
    try:
        proc = subprocess.run(
            [GIT_CKPT, "list", "--json"], cwd=task_repo, stdout=sub_fd, stderr=sub_fd, timeout=60
        )
        os.close(sub_fd)
        chunks = []
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main_fd)
    assert proc.returncode == 0
    text = b"".join(chunks).decode()
    assert text.startswith("[\r\n  {"), text[:40]  # indented: isatty() was true
    assert '"task": "t1"' in text
    assert status(task_repo)["served"] == before + 1
    piped = ok(task_repo, "list", "--json")
    assert piped.startswith('[{"') and "\n  " not in piped


def test_the_call_reads_git_config_from_its_own_environment(
    repo: Path, served: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libgit2 read HOME/XDG_CONFIG_HOME when the daemon imported it; the child resets that."""
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")  # no [user]
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{who}_NAME", raising=False)
        monkeypatch.delenv(f"GIT_{who}_EMAIL", raising=False)
    daemon_xdg, client_xdg = tmp_path / "xdg-daemon", tmp_path / "xdg-client"
    (client_xdg / "git").mkdir(parents=True)
    (client_xdg / "git" / "config").write_text(
        "[user]\n\tname = Via Xdg\n\temail = xdg@example.com\n"
    )
    ok(repo, "daemon", "start", env=dict(os.environ, XDG_CONFIG_HOME=str(daemon_xdg)))
    client_env = dict(os.environ, XDG_CONFIG_HOME=str(client_xdg))
    ok(repo, "init", env=client_env)
    ok(repo, "task", "start", "t1", "--goal", "who am I", env=client_env)
    assert status(repo)["served"] == 2
    author = git(repo, "log", "-1", "--format=%an <%ae>", "refs/agent/checkpoints/t1")
    assert author == "Via Xdg <xdg@example.com>"


def test_ctrl_c_reaches_the_call(task_repo: Path) -> None:
    proc = blocked_event(task_repo)
    child = blocked_child(task_repo)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)  # stdin stays open: only the signal can end the call
    assert proc.stderr is not None and proc.stdin is not None
    err = proc.stderr.read()
    proc.stdin.close()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    wait_for(lambda: gone(child), "the call to end")
    assert notes(task_repo) == []


def test_a_killed_client_takes_its_call_with_it(task_repo: Path) -> None:
    proc = blocked_event(task_repo)
    child = blocked_child(task_repo)
    proc.kill()  # SIGKILL: nothing can be forwarded, the daemon must notice
    proc.wait(timeout=30)
    wait_for(lambda: gone(child), "the orphaned call to be killed")
    assert proc.stdin is not None
    proc.stdin.close()
    assert notes(task_repo) == []
    wait_for(lambda: status(task_repo)["calls"] == [], "the daemon to reap it")


def test_a_call_killed_by_a_signal_exits_128_plus_the_signal(task_repo: Path) -> None:
    proc = blocked_event(task_repo)
    os.kill(blocked_child(task_repo), signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGKILL


def test_a_daemon_killed_mid_call_does_not_lose_the_calls_status(task_repo: Path) -> None:
    """The child reports its own exit status: the call ends as it would have on its own."""
    proc = blocked_event(task_repo)
    child = blocked_child(task_repo)
    daemon = status(task_repo)["pid"]
    os.kill(daemon, signal.SIGKILL)
    _, err = proc.communicate(json.dumps({"n": 1}), timeout=30)
    assert proc.returncode == 0, err
    wait_for(lambda: gone(child), "the call to end")
    assert [e["data"] for e in notes(task_repo)] == [{"n": 1}]
    # the next writing call finds the dead daemon's socket, runs itself, starts a new one
    ok(task_repo, "event", "t1", "--type", "note", "--json", json.dumps({"n": 2}))
    new = running_status(task_repo)
    assert new["pid"] != daemon
    ok(task_repo, "list")
    assert status(task_repo)["served"] == new["served"] + 1


def test_stop_lets_running_calls_finish(task_repo: Path) -> None:
    old_pid = status(task_repo)["pid"]
    proc = blocked_event(task_repo)
    blocked_child(task_repo)
    stopper = subprocess.Popen(
        [GIT_CKPT, "daemon", "stop"],
        cwd=task_repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: status(task_repo).get("stopping"), "the daemon to stop accepting")
    served = status(task_repo)["served"]
    ok(task_repo, "list")  # refused by the stopping daemon: runs in its own process
    assert status(task_repo)["served"] == served
    assert stopper.poll() is None  # still waiting for the call
    _, err = proc.communicate(json.dumps({"n": 2}), timeout=30)
    assert proc.returncode == 0, err
    stop_out, _ = stopper.communicate(timeout=30)
    assert stopper.returncode == 0
    assert stop_out.startswith("stopped: pid")
    assert [e["data"] for e in notes(task_repo)] == [{"n": 2}]
    assert gone(old_pid)
    # the `list` above ran in its own process and may have started a new daemon, which
    # takes over the socket once the old one left: the old one's socket is gone
    after = status(task_repo)
    assert not after["running"] or after["pid"] != old_pid


def test_concurrent_calls_are_all_served(task_repo: Path) -> None:
    before = status(task_repo)["served"]
    procs = [
        subprocess.Popen(
            [GIT_CKPT, "event", "t1", "--type", "note", "--json", json.dumps({"i": i})],
            cwd=task_repo,
            env=dict(os.environ, GIT_CKPT_DEBUG="1"),  # why a call was not served, if one is not
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    errors = []
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        errors.append(err)
    assert status(task_repo)["served"] == before + 8, (errors, status(task_repo))
    assert sorted(e["data"]["i"] for e in notes(task_repo)) == list(range(8))


@pytest.mark.parametrize("var", ["GIT_CKPT_DAEMON_IDLE", "GIT_CKPT_SERVER_IDLE"])
def test_the_daemon_exits_when_idle(
    repo: Path, served: None, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    for name in ("GIT_CKPT_SERVER_IDLE", "GIT_CKPT_DAEMON_IDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, "1")
    ok(repo, "daemon", "start")
    first = status(repo)
    assert first["idle_timeout"] == 1.0
    wait_for(lambda: not status(repo)["running"], "the idle daemon to exit")
    wait_for(lambda: gone(first["pid"]), "its process to end")
    assert not (repo / ".git" / "agent" / "daemon.sock").exists()


@pytest.mark.parametrize("var", ["GIT_CKPT_DAEMON", "GIT_CKPT_SERVER"])
def test_off_runs_every_call_itself_and_starts_nothing(
    repo: Path, served: None, tmp_path: Path, var: str
) -> None:
    env = dict(os.environ, **{var: "off"})
    ok(repo, "init", env=env)
    ok(repo, "list", env=env)
    # A call spawns its daemon before it runs itself: had one been started, its
    # process would be there now (it lives until idle), bound or not.
    assert daemon_pids(tmp_path) == []
    assert not status(repo)["running"]
    assert status(repo, env)["enabled"] is False


def test_trust_and_daemon_commands_never_go_through_the_daemon(repo: Path, served: None) -> None:
    ok(repo, "daemon", "start")
    ok(repo, "init")
    before = status(repo)["served"]
    assert "nothing to approve" in ok(repo, "trust")
    ok(repo, "trust", "--list")
    ok(repo, "daemon", "status")
    ok(repo, "server", "status")  # the former name still works
    assert status(repo)["served"] == before
    assert "server" not in ok(repo, "--help")  # hidden
    assert "daemon" in ok(repo, "--help")


def test_a_bad_request_is_refused_and_the_daemon_keeps_serving(repo: Path, served: None) -> None:
    ok(repo, "daemon", "start")
    git_dir = str(repo / ".git")
    sock = launch.connect(git_dir, 5.0)
    launch.send_request(sock, ["run", "ckpt0", "nope"])
    reply = launch.Replies(sock).next(10.0)
    sock.close()
    assert reply is not None and reply[0] == "R"
    assert reply[1].startswith(b"stale: this daemon runs another version")
    ok(repo, "init")
    assert status(repo)["served"] == 1
    assert list(status(repo)["refused"].values()) == [1]


def _as_nobody(path: str) -> str:
    """Connect to the socket at `path` as user 65534: what it saw."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nobody; it says what it saw on the pipe
        seen = "nothing"
        try:
            os.close(read_end)
            os.setgid(65534)
            os.setuid(65534)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(path)
            try:
                sock.sendall(b"\0\0\0\3run")
                answer = sock.recv(1)
                seen = "closed unanswered" if answer == b"" else f"answered {answer!r}"
            except (BrokenPipeError, ConnectionResetError):
                seen = "closed unanswered"
        except BaseException as exc:
            seen = f"{type(exc).__name__}: {exc}"
        finally:
            os.write(write_end, seen.encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        seen = pipe.read().decode()
    os.waitpid(pid, 0)
    return seen


def test_another_user_is_never_served(repo: Path, served: None) -> None:
    ok(repo, "daemon", "start")
    path = repo / ".git" / "agent" / "daemon.sock"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    if os.getuid() == 0:  # as root (CI, this sandbox), become another user for real
        with tempfile.TemporaryDirectory() as open_dir:
            os.chmod(open_dir, 0o755)
            link = os.path.join(open_dir, "s")
            os.link(path, link)  # the same socket, reachable by anybody
            assert _as_nobody(link) == "PermissionError: [Errno 13] Permission denied"
            os.chmod(link, 0o666)  # even if the socket's mode let them in
            assert _as_nobody(link) == "closed unanswered"
    assert status(repo)["served"] == 0


def test_fingerprint_follows_the_package_files_and_home(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("A = 1\n")
    (pkg / "sub" / "b.py").write_text("B = 1\n")
    env = {"HOME": "/home/one"}
    first = daemon_find.fingerprint(str(pkg), env)
    assert daemon_find.fingerprint(str(pkg), env) == first
    later = time.time() + 10
    os.utime(pkg / "sub" / "b.py", (later, later))
    touched = daemon_find.fingerprint(str(pkg), env)
    assert touched != first
    (pkg / "c.py").write_text("C = 1\n")
    added = daemon_find.fingerprint(str(pkg), env)
    assert added != touched
    os.utime(tmp_path, (later + 5, later + 5))  # a dependency installed beside the package
    assert daemon_find.fingerprint(str(pkg), env) != added
    other_home = daemon_find.fingerprint(str(pkg), {"HOME": "/home/two"})
    assert other_home != daemon_find.fingerprint(str(pkg), env)


def test_an_installed_package_is_fingerprinted_by_its_site_packages(tmp_path: Path) -> None:
    """In site-packages only an installer changes the package, and it always changes the
    directory (a `.dist-info` added or removed): no walk of the package's files."""
    site = tmp_path / "lib" / "site-packages"
    pkg = site / "git_agentckpt"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("A = 1\n")
    env = {"HOME": "/home/one"}
    first = daemon_find.fingerprint(str(pkg), env)
    later = time.time() + 10
    os.utime(pkg / "a.py", (later, later))
    assert daemon_find.fingerprint(str(pkg), env) == first  # the files are not looked at
    (site / "git_agentckpt-0.2.0.dist-info").mkdir()  # an upgrade
    assert daemon_find.fingerprint(str(pkg), env) != first


def test_version_is_answered_before_click_is_imported() -> None:
    fast = subprocess.run([GIT_CKPT, "--version"], capture_output=True, text=True, check=True)
    from click.testing import CliRunner

    from git_agentckpt.cli.main import cli

    assert fast.stdout == CliRunner().invoke(cli, ["--version"]).output  # what click says
    probe = "import sys, runpy; sys.argv = ['git-ckpt', '--version']\n"
    probe += "try:\n    runpy.run_module('git_agentckpt', run_name='__main__')\n"
    probe += "except SystemExit:\n    pass\nprint('click' in sys.modules, file=sys.stderr)\n"
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert seen.stderr.strip() == "False"


def test_command_detection_and_the_switches() -> None:
    assert daemon_find.command_of(["-C", "repo", "check", "t1"]) == "check"
    assert daemon_find.command_of(["--version"]) is None
    assert daemon_find.command_of(["-C", "x"]) is None
    assert daemon_find.command_of(["-Cx", "trust"]) == "trust"
    assert daemon_find.command_of(["trust", "--list"]) == "trust"
    # the group's options as click reads them: clustered, last -C wins
    assert daemon_find.parse_group(["-qC", "x", "trust"]) == ("x", "trust", [])
    assert daemon_find.parse_group(["-qCx", "list", "-q"]) == ("x", "list", ["-q"])
    assert daemon_find.parse_group(["-C", "a", "-C", "b", "list"]) == ("b", "list", [])
    assert daemon_find.parse_group(["--quiet", "-hq"]) == (".", None, [])
    assert daemon_find.parse_group(["-x", "list"]) is None  # not an option of the group
    assert daemon_find.refusal(["-qC", ".", "trust"]) is not None
    assert daemon_find.refusal(["-Z", "list"]) is not None  # unsure: its own process
    assert daemon_find.refusal(["confirm", "t", "--by-human"]) is not None
    assert daemon_find.refusal(["confirm", "t", "--restatement", "f"]) is None
    assert daemon_find.starts_daemon(["-qC", ".", "create", "-t", "t"])
    for argv in (["list"], ["demo"], ["init"], ["create", "--help"], ["-h"], ["show", "t"]):
        assert not daemon_find.starts_daemon(argv), argv
    assert daemon_find.enabled({}) is True
    for var in ("GIT_CKPT_SERVER", "GIT_CKPT_DAEMON"):
        for word in ("off", "0", "NO", "false", "never"):
            assert daemon_find.enabled({var: word}) is False
    idle = daemon_find.idle_seconds
    assert idle({"GIT_CKPT_SERVER_IDLE": "soon"}) == daemon_find.DEFAULT_IDLE
    assert idle({"GIT_CKPT_SERVER_IDLE": "0"}) == 1.0
    assert idle({"GIT_CKPT_DAEMON_IDLE": "30", "GIT_CKPT_SERVER_IDLE": "60"}) == 30.0
    assert daemon_find.timeout_seconds({}) == 1.0
    assert daemon_find.timeout_seconds({"GIT_CKPT_DAEMON_TIMEOUT": "2.5"}) == 2.5


def test_requests_are_parsed_strictly() -> None:
    protocol = daemon_find.PROTOCOL
    fields = ["run", protocol, "fp", "/tmp", "18", "2", "git-ckpt", "list", "A=1", "B=x=y"]
    req = parse_request(b"\0".join(f.encode() for f in fields))
    assert (req.fingerprint, req.cwd, req.umask) == ("fp", "/tmp", 18)
    assert req.argv == ["git-ckpt", "list"]
    assert req.env == {"A": "1", "B": "x=y"}
    assert req.fds == []  # they come with "G"
    with pytest.raises(BadRequest, match="argv missing"):
        parse_request(b"\0".join(f.encode() for f in fields[:7]))
    with pytest.raises(BadRequest, match="malformed"):
        parse_request(b"run\0ckpt2\0fp\0/tmp\0nine")
    with pytest.raises(BadRequest, match=r"stale: .*\(protocol 'ckpt1'\)"):
        parse_request(b"run\0ckpt1\0fp\0/tmp\0nine")
    with pytest.raises(BadRequest, match="stale: this daemon runs another version"):
        parse_request(b"\0".join(f.encode() for f in fields), "another fingerprint")
    assert parse_request(b"\0".join(f.encode() for f in fields), "fp").argv[1] == "list"
    with pytest.raises(BadRequest, match="protocol mismatch"):
        parse_request(b"status\0ckpt1\0*")
    relative = ["run", daemon_find.PROTOCOL, "fp", "tmp", "18", "1", "git-ckpt"]
    with pytest.raises(BadRequest, match="not absolute"):
        parse_request(b"\0".join(f.encode() for f in relative))
    assert parse_request(b"status\0ckpt2\0*").kind == "status"
    assert exit_status(0) == 0
    assert exit_status(3 << 8) == 3
    assert exit_status(signal.SIGKILL) == 128 + signal.SIGKILL


def test_a_package_in_the_working_directory_is_not_what_the_daemon_runs(
    repo: Path, served: None, tmp_path: Path
) -> None:
    """`python -m` would import ./git_agentckpt (a source checkout, or a trap) first."""
    marker = tmp_path / "imported"
    fake = repo / "git_agentckpt"
    (fake / "cli").mkdir(parents=True)
    trap = f"open({str(marker)!r}, 'w').close()\n"
    (fake / "daemon").mkdir()
    for rel in ("__init__.py", "cli/__init__.py", "daemon/__init__.py", "daemon/server.py"):
        (fake / rel).write_text(trap)
    ok(repo, "init")
    ok(repo, "task", "start", "t1", "--goal", "g")
    found = running_status(repo)
    assert found["package"] == daemon_find.package_dir()
    ok(repo, "list")
    assert status(repo)["served"] == 1
    assert not marker.exists()


@pytest.mark.mode("once", reason="imports in a fresh interpreter; runs no git ckpt command")
def test_the_daemon_never_loads_the_mcp_sdk() -> None:
    """Every child the daemon forks copies what it imported: the MCP SDK (pydantic,
    starlette, anyio) doubled its memory (an idle daemon of a 10k-file tree: 89 MB RSS
    with it, ~45 without). `git ckpt mcp` runs in its own process."""
    probe = (
        "import sys; from git_agentckpt.daemon.child import preload; preload(); "
        "print(sorted(m for m in ('mcp', 'pydantic', 'anyio', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
