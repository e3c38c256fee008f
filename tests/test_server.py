"""The warm server (cli/server.py) behind the `git-ckpt` entry point (cli/launch.py).

Each test has its own HOME, so its own server (HOME is part of the socket's
name); the `served` fixture turns the server on and stops it afterwards.
Calls go through the installed `git-ckpt` script, as agents and hooks make them.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import git

from git_agentckpt.cli import launch
from git_agentckpt.cli.server import BadRequest, exit_status, parse_request

GIT_CKPT = os.path.join(os.path.dirname(sys.executable), "git-ckpt")


def run(
    cwd: Path,
    *args: str,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GIT_CKPT, *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=dict(os.environ if env is None else env),
        timeout=60,
    )


def ok(cwd: Path, *args: str, **kw: Any) -> str:
    proc = run(cwd, *args, **kw)
    assert proc.returncode == 0, f"git ckpt {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def log(repo: Path) -> list[dict[str, Any]]:
    """`git ckpt log t1 --json`: one event per line."""
    return [json.loads(line) for line in ok(repo, "log", "t1", "--json").splitlines()]


def status(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    out = subprocess.run(
        [GIT_CKPT, "server", "status", "--json"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ if env is None else env),
    ).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def wait_for(pred: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def running_status() -> dict[str, Any]:
    result: dict[str, Any] = wait_for(
        lambda: (s := status())["running"] and s, "the server to answer"
    )
    return result


def blocked_child() -> int:
    """The pid of the one call the server is running (waiting for its stdin)."""
    pids: list[int] = wait_for(lambda: status().get("calls"), "a running call")
    assert len(pids) == 1
    return pids[0]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0): read its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GIT_CKPT_SERVER", "auto")
    monkeypatch.setenv("GIT_CKPT_SERVER_IDLE", "120")
    yield
    # A call may have started one more server just now (they bind ~0.5 s after the
    # spawn): stop until no server process of this HOME is left.
    deadline = time.monotonic() + 20
    while True:
        stop = subprocess.run([GIT_CKPT, "server", "stop"], capture_output=True, text=True)
        assert stop.returncode == 0, stop.stderr
        if not server_pids() or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert server_pids() == []


def server_pids() -> list[int]:
    """Server processes of this test's HOME (it ends their fingerprint)."""
    home = os.environ["HOME"].encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = any(b"git_agentckpt.cli.server" in arg for arg in argv) and argv[-2:-1]
        if ours and argv[-2].endswith(b"|" + home) and not gone(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.fixture
def task_repo(repo: Path, served: None) -> Path:
    ok(repo, "init")  # inline: no server yet; it starts one in the background
    running_status()
    ok(repo, "task", "start", "t1", "--goal", "serve calls warm")
    return repo


def test_first_call_starts_the_server_and_later_calls_use_it(repo: Path, served: None) -> None:
    assert not status()["running"]
    ok(repo, "init")
    first = running_status()
    assert first["served"] == 0  # the call that started it ran in its own process
    ok(repo, "task", "start", "t1", "--goal", "serve calls warm")
    (repo / "src" / "app.py").write_text("print('changed')\n")
    ok(repo, "create", "--task", "t1", "-m", "after a change")
    after = status()
    assert after["pid"] == first["pid"]
    assert after["served"] == 2


def test_output_and_exit_status_match_a_call_without_the_server(task_repo: Path) -> None:
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
    before = status()["served"]
    for args in cases:
        a, b = run(task_repo, *args, env=inline), run(task_repo, *args)
        assert (b.returncode, b.stdout, b.stderr) == (a.returncode, a.stdout, a.stderr), args
    # every case with a command went through the server (`--version` has none)
    assert status()["served"] == before + len(cases) - 1


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
    before = status()["served"]
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
    assert status()["served"] == before + 1
    piped = ok(task_repo, "list", "--json")
    assert piped.startswith('[{"') and "\n  " not in piped


def test_the_call_reads_git_config_from_its_own_environment(
    repo: Path, served: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libgit2 read HOME/XDG_CONFIG_HOME when the server imported it; the child resets that."""
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")  # no [user]
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{who}_NAME", raising=False)
        monkeypatch.delenv(f"GIT_{who}_EMAIL", raising=False)
    server_xdg, client_xdg = tmp_path / "xdg-server", tmp_path / "xdg-client"
    (client_xdg / "git").mkdir(parents=True)
    (client_xdg / "git" / "config").write_text(
        "[user]\n\tname = Via Xdg\n\temail = xdg@example.com\n"
    )
    server_env = dict(os.environ, XDG_CONFIG_HOME=str(server_xdg))
    ok(repo, "server", "start", env=server_env)
    client_env = dict(os.environ, XDG_CONFIG_HOME=str(client_xdg))
    ok(repo, "init", env=client_env)
    ok(repo, "task", "start", "t1", "--goal", "who am I", env=client_env)
    assert status()["served"] == 2
    author = git(repo, "log", "-1", "--format=%an <%ae>", "refs/agent/checkpoints/t1")
    assert author == "Via Xdg <xdg@example.com>"


def _blocked_event(repo: Path) -> subprocess.Popen[str]:
    """`git ckpt event … --json -` waiting for its stdin: a call that is still running."""
    return subprocess.Popen(
        [GIT_CKPT, "event", "t1", "--type", "note", "--json", "-"],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _notes(repo: Path) -> list[dict[str, Any]]:
    return [e for e in log(repo) if e["type"] == "note"]


def test_ctrl_c_reaches_the_call(task_repo: Path) -> None:
    proc = _blocked_event(task_repo)
    child = blocked_child()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)  # stdin stays open: only the signal can end the call
    assert proc.stderr is not None and proc.stdin is not None
    err = proc.stderr.read()
    proc.stdin.close()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    wait_for(lambda: gone(child), "the call to end")
    assert _notes(task_repo) == []


def test_a_killed_client_takes_its_call_with_it(task_repo: Path) -> None:
    proc = _blocked_event(task_repo)
    child = blocked_child()
    proc.kill()  # SIGKILL: nothing can be forwarded, the server must notice
    proc.wait(timeout=30)
    wait_for(lambda: gone(child), "the orphaned call to be killed")
    assert proc.stdin is not None
    proc.stdin.close()
    assert _notes(task_repo) == []
    assert status()["calls"] == []


def test_a_call_killed_by_a_signal_exits_128_plus_the_signal(task_repo: Path) -> None:
    proc = _blocked_event(task_repo)
    os.kill(blocked_child(), signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGKILL


def test_a_server_killed_mid_call_is_reported(task_repo: Path) -> None:
    proc = _blocked_event(task_repo)
    child = blocked_child()
    os.kill(status()["pid"], signal.SIGKILL)
    _, err = proc.communicate(json.dumps({"n": 1}), timeout=30)
    assert proc.returncode == 70
    assert "server stopped before reporting" in err
    assert gone(child)
    assert [e["data"] for e in _notes(task_repo)] == [{"n": 1}]  # the call itself finished


def test_stop_lets_running_calls_finish(task_repo: Path) -> None:
    proc = _blocked_event(task_repo)
    blocked_child()
    stopper = subprocess.Popen(
        [GIT_CKPT, "server", "stop"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(lambda: status().get("stopping"), "the server to stop accepting")
    assert stopper.poll() is None  # still waiting for the call
    _, err = proc.communicate(json.dumps({"n": 2}), timeout=30)
    assert proc.returncode == 0, err
    stop_out, _ = stopper.communicate(timeout=30)
    assert stopper.returncode == 0
    assert stop_out.startswith("stopped: pid")
    assert [e["data"] for e in _notes(task_repo)] == [{"n": 2}]


def test_concurrent_calls_are_all_served(task_repo: Path) -> None:
    before = status()["served"]
    procs = [
        subprocess.Popen(
            [GIT_CKPT, "event", "t1", "--type", "note", "--json", json.dumps({"i": i})],
            cwd=task_repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(8)
    ]
    for p in procs:
        p.communicate(timeout=60)
        assert p.returncode == 0
    assert status()["served"] == before + 8
    assert sorted(e["data"]["i"] for e in _notes(task_repo)) == list(range(8))


def test_the_server_exits_when_idle(
    repo: Path, served: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CKPT_SERVER_IDLE", "1")
    ok(repo, "server", "start")
    pid = status()["pid"]
    wait_for(lambda: not status()["running"], "the idle server to exit")
    wait_for(lambda: gone(pid), "its process to end")


def test_off_runs_every_call_itself_and_starts_nothing(repo: Path, served: None) -> None:
    env = dict(os.environ, GIT_CKPT_SERVER="off")
    ok(repo, "init", env=env)
    ok(repo, "list", env=env)
    # A call spawns its server before it runs itself: had one been started, its
    # process would be there now (it lives until idle), bound or not.
    assert server_pids() == []
    assert not status()["running"]
    assert status(env)["enabled"] is False


def test_trust_and_server_commands_never_go_through_the_server(repo: Path, served: None) -> None:
    ok(repo, "server", "start")
    ok(repo, "init")
    before = status()["served"]
    assert "nothing to approve" in ok(repo, "trust")
    ok(repo, "trust", "--list")
    ok(repo, "server", "status")
    assert status()["served"] == before


def test_a_bad_request_is_refused_and_the_server_keeps_serving(repo: Path, served: None) -> None:
    ok(repo, "server", "start")
    addr = launch.address(launch.fingerprint())
    sock = launch.connect(addr, 5.0)
    assert sock is not None
    launch.send_request(sock, ["run", "ckpt0", "nope"])
    reply = launch.recv_reply(sock)
    sock.close()
    assert reply is not None and reply[0] == "R"
    ok(repo, "init")
    assert status()["served"] == 1


def test_another_user_is_never_served(repo: Path, served: None) -> None:
    ok(repo, "server", "start")
    addr = launch.address(launch.fingerprint())
    if os.getuid() == 0:  # as root (CI, this sandbox), become another user for real
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
                sock.connect(addr)
                # The server closes the connection as soon as it sees the peer's uid: the
                # request may be sent before that (then the read finds the end of stream,
                # or a reset) or after it (then the write itself fails with EPIPE).
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
        assert seen == "closed unanswered"
    # and a client never talks to a server that runs as somebody else
    assert launch.connect(addr, 5.0) is not None  # ours
    assert status()["served"] == 0


def test_fingerprint_follows_the_package_files_and_home(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("A = 1\n")
    (pkg / "sub" / "b.py").write_text("B = 1\n")
    env = {"HOME": "/home/one"}
    first = launch.fingerprint(str(pkg), env)
    assert launch.fingerprint(str(pkg), env) == first
    later = time.time() + 10
    os.utime(pkg / "sub" / "b.py", (later, later))
    touched = launch.fingerprint(str(pkg), env)
    assert touched != first
    (pkg / "c.py").write_text("C = 1\n")
    added = launch.fingerprint(str(pkg), env)
    assert added != touched
    os.utime(tmp_path, (later + 5, later + 5))  # a dependency installed beside the package
    assert launch.fingerprint(str(pkg), env) != added
    assert launch.fingerprint(str(pkg), {"HOME": "/home/two"}) != launch.fingerprint(str(pkg), env)
    assert launch.address(first) != launch.address(touched)
    assert launch.address(first).startswith(b"\0git-ckpt/%d/" % os.getuid())


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


def test_command_detection_and_the_switch() -> None:
    assert launch.command_of(["-C", "repo", "check", "t1"]) == "check"
    assert launch.command_of(["--version"]) is None
    assert launch.command_of(["-C", "x"]) is None
    assert launch.command_of(["trust", "--list"]) == "trust"
    assert {"trust", "fetch", "push", "server"} <= launch.INLINE_COMMANDS
    assert launch.enabled({}) is True
    for word in ("off", "0", "NO", "false", "never"):
        assert launch.enabled({"GIT_CKPT_SERVER": word}) is False
    assert launch.idle_seconds({"GIT_CKPT_SERVER_IDLE": "soon"}) == launch.DEFAULT_IDLE
    assert launch.idle_seconds({"GIT_CKPT_SERVER_IDLE": "0"}) == 1.0


def test_requests_are_parsed_strictly() -> None:
    fp = "ckpt1|x"
    fields = ["run", launch.PROTOCOL, fp, "/tmp", "18", "2", "git-ckpt", "list", "A=1", "B=x=y"]
    req = parse_request([5, 6, 7], b"\0".join(f.encode() for f in fields), fp)
    assert (req.cwd, req.umask, req.argv) == ("/tmp", 18, ["git-ckpt", "list"])
    assert req.env == {"A": "1", "B": "x=y"}
    with pytest.raises(BadRequest, match="fingerprint"):
        parse_request([5, 6, 7], b"\0".join(f.encode() for f in fields), "other")
    with pytest.raises(BadRequest, match="file descriptors"):
        parse_request([5], b"\0".join(f.encode() for f in fields), fp)
    with pytest.raises(BadRequest, match="malformed"):
        parse_request([5, 6, 7], b"run\0ckpt1\0ckpt1|x\0/tmp\0nine", fp)
    assert parse_request([], b"status\0ckpt1\0*", fp).kind == "status"
    assert exit_status(0) == 0
    assert exit_status(3 << 8) == 3
    assert exit_status(signal.SIGKILL) == 128 + signal.SIGKILL


def test_a_package_in_the_working_directory_is_not_what_the_server_runs(
    repo: Path, served: None, tmp_path: Path
) -> None:
    """`python -m` would import ./git_agentckpt (a source checkout, or a trap) first."""
    marker = tmp_path / "imported"
    fake = repo / "git_agentckpt"
    (fake / "cli").mkdir(parents=True)
    trap = f"open({str(marker)!r}, 'w').close()\n"
    for rel in ("__init__.py", "cli/__init__.py", "cli/server.py"):
        (fake / rel).write_text(trap)
    ok(repo, "init")
    found = running_status()
    assert found["package"] == launch.package_dir()
    ok(repo, "list")
    assert status()["served"] == 1
    assert not marker.exists()
