"""Progress meters on stderr, in git's style, only when stderr is a terminal.

The real `git ckpt` runs as a subprocess with its stderr on a pseudo-terminal (stdout
piped), and GIT_CKPT_PROGRESS_DELAY=0 so that the meters show at once.
"""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import BIN_DIR, ckpt, ckpt_json, write


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = BIN_DIR + os.pathsep + env.get("PATH", "")
    env["GIT_CKPT_PROGRESS_DELAY"] = "0"
    env.update(extra or {})
    return env


def on_terminal(
    repo: Path, *args: str, extra: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Run `git ckpt args…` with stderr on a pty: (exit status, stdout, what the pty got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["git", "ckpt", *args],
        cwd=repo,
        env=_env(extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    got = bytearray()
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every holder of the terminal's other side is gone
            break
        if not data:
            break
        got += data
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.stdout.close()
    code = proc.wait()
    return code, out, got.decode("utf-8", "replace").replace("\r\n", "\n")


def piped(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "ckpt", *args], cwd=repo, env=_env(), capture_output=True, text=True
    )


def many_files(repo: Path, n: int, tag: str) -> None:
    for i in range(n):
        write(repo / "data" / f"d{i % 7}" / f"f{i}.txt", f"{tag} {i}\n")


@pytest.mark.mode(
    "inline", reason="the full scan's meter: through the daemon a snapshot reads the changes"
)
def test_a_full_checkpoint_counts_the_files_it_takes(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    many_files(repo, 300, "v1")
    code, _, err = on_terminal(repo, "create", "-t", "t", "-m", "many")
    assert code == 0, err
    assert "Snapshotting files: " in err
    done = re.findall(r"Snapshotting files: (\d+), done\.\n", err)
    assert done and int(done[-1]) >= 300, err
    # the meter rewrites its line in place, as git's does
    assert "\r" in err.split("done.")[0]


def test_restore_resume_show_progress_and_end_with_done(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    many_files(repo, 40, "v1")
    first = ckpt_json(repo, "create", "-t", "t", "-m", "v1")
    many_files(repo, 40, "v2")
    code, _, err = on_terminal(repo, "restore", str(first["id"]))
    assert code == 0, err
    assert re.search(r"Restoring files: 100% \((\d+)/\1\), done\.\n", err), err
    assert (repo / "data" / "d0" / "f0.txt").read_text() == "v1 0\n"
    write(repo / "src" / "app.py", "print('drift')\n")
    code, _, err = on_terminal(repo, "resume", "t", "--restore")
    assert code == 0, err
    assert "Resuming: 100% (5/5), done.\n" in err, err
    assert "Restoring files: 100% (1/1), done.\n" in err, err


def test_push_and_fetch_show_gits_own_meters(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    ckpt(repo, "task", "start", "t", "--goal", "g")
    many_files(repo, 30, "v1")
    ckpt(repo, "create", "-t", "t")
    code, _, err = on_terminal(repo, "push", "origin")
    assert code == 0, err
    assert re.search(r"Writing objects: 100% \(\d+/\d+\)", err), err
    assert "error" not in err.lower()
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-local", str(remote), str(clone))
    code, _, err = on_terminal(clone, "fetch", "origin")
    assert code == 0, err
    assert re.search(r"(Receiving|Unpacking) objects: 100% \(\d+/\d+\)", err), err


@pytest.mark.parametrize(
    "how",
    ["piped", "json", "quiet", "env"],
)
def test_nothing_when_piped_json_or_quiet(repo: Path, how: str) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    many_files(repo, 100, "v1")
    if how == "piped":
        proc = piped(repo, "create", "-t", "t")
        assert proc.returncode == 0 and proc.stderr == ""
        return
    args = {"json": ("create", "-t", "t", "--json"), "quiet": ("--quiet", "create", "-t", "t")}
    extra = {"GIT_CKPT_NO_PROGRESS": "1"} if how == "env" else None
    code, out, err = on_terminal(repo, *args.get(how, ("create", "-t", "t")), extra=extra)
    assert code == 0, err
    assert err == ""
    assert out  # the command's own output is still there


def test_the_meter_format_is_gits(monkeypatch: pytest.MonkeyPatch) -> None:
    from git_agentckpt import progress

    monkeypatch.setenv("GIT_CKPT_PROGRESS_DELAY", "0")
    buf = io.StringIO()
    monkeypatch.setattr("sys.stderr", buf)
    progress.configure(True)
    try:
        with progress.Progress("Snapshotting files", 20000) as meter:
            meter.update(9000)
            meter.update(20000)
        with progress.Progress("Counting", None) as meter:
            meter.update(7)
        with progress.Progress("Quiet work", 3):
            pass  # never updated: nothing at all
    finally:
        progress.configure(False)
    text = buf.getvalue()
    assert text.startswith("Snapshotting files:  45% (9000/20000)\r")
    assert "Snapshotting files: 100% (20000/20000), done.\n" in text
    assert text.endswith("Counting: 7\rCounting: 7, done.\n")
    assert "Quiet work" not in text


def test_off_unless_the_cli_turned_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A library caller (the API) never gets progress on its stderr."""
    from git_agentckpt import progress

    monkeypatch.setenv("GIT_CKPT_PROGRESS_DELAY", "0")
    buf = io.StringIO()
    monkeypatch.setattr("sys.stderr", buf)
    with progress.Progress("Snapshotting files", 10) as meter:
        meter.update(5)
    assert buf.getvalue() == ""
