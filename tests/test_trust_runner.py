"""Trusted commands: approvals bound to exact argv, and a sealed, bounded runner."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_agentckpt.contracts.checks import CheckContext, CheckResult, run_check
from git_agentckpt.contracts.runner import (
    ENV_ALLOWLIST,
    CommandOutcome,
    command_check_result,
    run_command,
    scrubbed_env,
)
from git_agentckpt.contracts.schema import Check, parse_check
from git_agentckpt.contracts.trust import (
    TrustStore,
    default_trust_path,
    fingerprint,
)
from git_agentckpt.display import escape_control, escape_for_display
from git_agentckpt.errors import CorruptError, UnknownVersion, UsageError

REPO = "/home/u/project/.git"


def process_gone(pid: int, within: float = 30.0) -> bool:
    """True once `pid` is dead: gone, or a zombie waiting for its reaper (polled; the
    deadline only bounds a failure)."""
    end = time.monotonic() + within
    while True:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True
        state = next(line for line in status.splitlines() if line.startswith("State:"))
        if state.split()[1] in ("Z", "X"):
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.02)


def run_bounded(argv: list[str], cwd: Path, timeout: float) -> CommandOutcome:
    """`run_command` in a thread: a runner that hangs on a command's leftover child (an
    hour-long `sleep`) fails the test after a minute instead of hanging it."""
    outcome: list[CommandOutcome] = []
    worker = threading.Thread(
        target=lambda: outcome.append(run_command(argv, cwd=cwd, timeout=timeout)), daemon=True
    )
    worker.start()
    worker.join(60)
    if not outcome:
        pid_file = cwd / "child.pid"
        if pid_file.exists():  # do not leave the hour-long child behind
            os.kill(int(pid_file.read_text()), 9)
        raise AssertionError(f"run_command({argv!r}, timeout={timeout}) did not return")
    return outcome[0]


# ---- the runner ---------------------------------------------------------------------
# The commands leave a child that would run for an hour: it being gone when the runner
# returns proves the runner killed it (no clock is read).


def test_timeout_kills_the_command_and_its_child(tmp_path: Path) -> None:
    outcome = run_bounded(
        ["sh", "-c", "sleep 3600 & echo $! > child.pid; wait"], tmp_path, timeout=0.5
    )
    assert outcome.timed_out and outcome.returncode is None
    child = int((tmp_path / "child.pid").read_text())
    assert process_gone(child)
    result = command_check_result(outcome)
    assert result.status == "fail" and "timed out" in result.detail


def test_a_command_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    script = "trap '' TERM; sleep 3600 & echo $! > child.pid; while :; do sleep 0.05; done"
    outcome = run_bounded(["sh", "-c", script], tmp_path, timeout=0.3)
    assert outcome.timed_out
    assert process_gone(int((tmp_path / "child.pid").read_text()))


def test_leftover_background_children_are_killed_after_a_normal_exit(tmp_path: Path) -> None:
    # The child holds stdout open: a runner that waited for it would time out instead.
    outcome = run_bounded(
        ["sh", "-c", "sleep 3600 & echo $! > child.pid; echo done"], tmp_path, timeout=30
    )
    assert outcome.returncode == 0 and not outcome.timed_out and outcome.stdout == "done\n"
    assert process_gone(int((tmp_path / "child.pid").read_text()))


def test_stdin_is_dev_null(tmp_path: Path) -> None:
    outcome = run_command(["sh", "-c", "cat; readlink /proc/self/fd/0"], cwd=tmp_path, timeout=5)
    assert outcome.returncode == 0
    assert outcome.stdout == "/dev/null\n"


def test_runs_in_a_new_session_in_cwd(tmp_path: Path) -> None:
    code = "import os; print(os.getsid(0) == os.getpid(), os.getcwd())"
    outcome = run_command([sys.executable, "-c", code], cwd=tmp_path, timeout=10)
    assert outcome.stdout == f"True {tmp_path.resolve()}\n"


def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-aws")
    monkeypatch.setenv("GIT_DIR", "/somewhere/else")
    monkeypatch.setenv("TERM", "xterm-256color")
    outcome = run_command(["env"], cwd=tmp_path, timeout=5)
    env = dict(line.split("=", 1) for line in outcome.stdout.splitlines())
    assert "s3cr3t-aws" not in outcome.stdout and "AWS_SECRET_ACCESS_KEY" not in env
    assert "GIT_DIR" not in env and "XDG_CONFIG_HOME" not in env
    assert env["TERM"] == "dumb" and env["HOME"] == os.environ["HOME"]
    assert env["PATH"] == os.environ["PATH"]
    assert set(env) <= set(ENV_ALLOWLIST) | {"TERM", "NO_COLOR", "PAGER", "PWD", "SHLVL", "_"}


def test_scrubbed_env_is_built_from_the_allow_list_only() -> None:
    env = scrubbed_env({"PATH": "/bin", "LANG": "C.UTF-8", "OPENAI_API_KEY": "sk-1"}, {"X": "1"})
    assert env == {
        "PATH": "/bin",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PAGER": "cat",
        "X": "1",
    }
    assert scrubbed_env({})["PATH"] == os.defpath


def test_output_is_capped_without_buffering_everything(tmp_path: Path) -> None:
    script = "head -c 5000000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2"
    outcome = run_command(["sh", "-c", script], cwd=tmp_path, timeout=10, output_cap=1000)
    assert outcome.returncode == 0
    assert outcome.stdout.startswith("a" * 1000)
    assert outcome.stdout.endswith("[... 4999000 more bytes not kept]")
    assert len(outcome.stdout) < 1100 and len(outcome.stderr) < 1100
    assert "299000 more bytes" in outcome.stderr


def test_output_is_redacted(tmp_path: Path) -> None:
    outcome = run_command(
        ["sh", "-c", "echo token=hunter2; echo hunter2 >&2"],
        cwd=tmp_path,
        timeout=5,
        redact=lambda text: text.replace("hunter2", "[REDACTED]"),
    )
    assert outcome.stdout == "token=[REDACTED]\n" and outcome.stderr == "[REDACTED]\n"


def test_exit_status_and_signals_map_to_results(tmp_path: Path) -> None:
    ok = run_command(["true"], cwd=tmp_path, timeout=5)
    assert command_check_result(ok, ["true"]).status == "pass"
    failed = run_command(
        ["sh", "-c", "echo first >&2; echo 'last words' >&2; exit 3"], cwd=tmp_path, timeout=5
    )
    result = command_check_result(failed, ["sh"])
    assert failed.returncode == 3
    assert result.status == "fail" and result.detail.startswith("sh: exit 3 in ")
    assert result.detail.endswith(": last words")
    killed = run_command(["sh", "-c", "kill -KILL $$"], cwd=tmp_path, timeout=5)
    assert killed.returncode == -9
    assert "killed by SIGKILL" in command_check_result(killed).detail


def test_missing_program_is_an_error_not_an_exception(tmp_path: Path) -> None:
    outcome = run_command(["definitely-not-a-program-xyz"], cwd=tmp_path, timeout=5)
    assert outcome.returncode is None and outcome.error is not None
    assert command_check_result(outcome).status == "error"
    with pytest.raises(ValueError):
        run_command([], cwd=tmp_path, timeout=5)


def test_check_result_escapes_control_characters_in_output() -> None:
    outcome = CommandOutcome(1, False, "", "boom \x1b[31mred\x1b[0m", 0.1)
    detail = command_check_result(outcome).detail
    assert "\x1b" not in detail and "boom \\e[31mred\\e[0m" in detail


# ---- trust --------------------------------------------------------------------------


def test_store_lives_in_the_user_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = Path(os.environ["XDG_CONFIG_HOME"]) / "git-ckpt" / "trust"
    assert default_trust_path() == expected and TrustStore().path == expected
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")
    assert default_trust_path() == Path.home() / ".config" / "git-ckpt" / "trust"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert default_trust_path() == Path.home() / ".config" / "git-ckpt" / "trust"


def test_approve_is_trusted_revoke() -> None:
    store = TrustStore()
    argv = ["pytest", "-q", "tests/smoke"]
    assert not store.is_trusted(REPO, argv)
    store.approve(REPO, argv, note="smoke test")
    assert store.is_trusted(REPO, argv)
    assert store.is_trusted(REPO, tuple(argv))
    assert not store.is_trusted("/other/clone/.git", argv)
    [entry] = store.list(REPO)
    assert entry.argv == tuple(argv) and entry.note == "smoke test"
    assert entry.fingerprint == TrustStore.fingerprint(REPO, argv)
    store.approve(REPO, argv)  # idempotent
    assert len(store.list()) == 1
    assert store.revoke(REPO, argv)
    assert not store.is_trusted(REPO, argv)
    assert not store.revoke(REPO, argv)


def test_file_and_directory_are_private() -> None:
    store = TrustStore()
    store.approve(REPO, ["make", "check"])
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    doc = json.loads(store.path.read_text())
    assert doc["v"] == 1 and doc["approvals"][0]["argv"] == ["make", "check"]
    assert [p.name for p in store.path.parent.iterdir() if p.name.startswith(".trust.")] == []


def test_revoke_by_fingerprint_prefix_and_list_by_repo() -> None:
    store = TrustStore()
    store.approve(REPO, ["a"])
    store.approve(REPO, ["b"])
    store.approve("/elsewhere/.git", ["a"])
    assert {e.argv for e in store.list(REPO)} == {("a",), ("b",)}
    assert len(store.list()) == 3
    fp = fingerprint(REPO, ["b"])
    with pytest.raises(UsageError):
        store.revoke(REPO, fp[:4])
    assert not store.revoke("/elsewhere/.git", fp)
    assert store.revoke(REPO, fp[:10])
    assert {e.argv for e in store.list(REPO)} == {("a",)}
    assert store.is_trusted("/elsewhere/.git", ["a"])


def test_one_byte_change_needs_a_new_approval() -> None:
    store = TrustStore()
    argv = ["python", "-m", "pytest", "-q", "tests/smoke"]
    store.approve(REPO, argv)
    variants = [
        ["python", "-m", "pytest", "-q", "tests/smokE"],
        ["python", "-m", "pytest", "-q", "tests/smoke "],
        ["python", "-m", "pytest", "-q", "tests/smoke", ""],
        ["python", "-m", "pytest", "-q tests/smoke"],
        ["python", "-m", "pytest", "-q", "tests/smoke\u200b"],
    ]
    for variant in variants:
        assert fingerprint(REPO, variant) != fingerprint(REPO, argv)
        assert not store.is_trusted(REPO, variant)
    assert fingerprint(REPO + "x", argv) != fingerprint(REPO, argv)


@given(st.lists(st.text(max_size=8), min_size=1, max_size=4), st.data())
def test_every_single_character_change_changes_the_fingerprint(
    argv: list[str], data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(argv) - 1))
    word = argv[index]
    pos = data.draw(st.integers(0, len(word)))
    char = data.draw(st.characters())
    changed = [*argv]
    changed[index] = word[:pos] + char + word[pos + 1 :]
    if changed != argv:
        assert fingerprint(REPO, changed) != fingerprint(REPO, argv)


def test_unknown_version_fails_closed() -> None:
    store = TrustStore()
    store.approve(REPO, ["make"])
    doc = json.loads(store.path.read_text())
    doc["v"] = 2
    store.path.write_text(json.dumps(doc))
    with pytest.raises(UnknownVersion):
        store.is_trusted(REPO, ["make"])
    with pytest.raises(UnknownVersion):
        store.approve(REPO, ["other"])


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[]",
        '{"approvals": []}',
        '{"v": 1, "approvals": {}}',
        '{"v": 1, "approvals": [{"repo": "r", "argv": "make"}]}',
    ],
)
def test_malformed_store_is_an_error(content: str) -> None:
    store = TrustStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(content)
    with pytest.raises(CorruptError):
        store.is_trusted(REPO, ["make"])


def test_tampered_entry_is_refused() -> None:
    store = TrustStore()
    store.approve(REPO, ["echo", "hello"])
    doc = json.loads(store.path.read_text())
    doc["approvals"][0]["argv"] = ["rm", "-rf", "/"]
    store.path.write_text(json.dumps(doc))
    with pytest.raises(CorruptError, match="does not match its argv"):
        store.is_trusted(REPO, ["rm", "-rf", "/"])


def test_concurrent_approvals_are_all_kept() -> None:
    def approve(i: int) -> None:
        TrustStore().approve(REPO, ["job", str(i)])

    threads = [threading.Thread(target=approve, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {e.argv for e in TrustStore().list(REPO)} == {("job", str(i)) for i in range(12)}


def trusted_runner(store: TrustStore, cwd: Path) -> CheckContext:
    def runner(chk: Check) -> CheckResult:
        argv = [str(arg) for arg in chk.params["argv"]]  # type: ignore[attr-defined]
        if not store.is_trusted(REPO, argv):
            return CheckResult("untrusted", escape_for_display(argv))
        outcome = run_command(argv, cwd=cwd, timeout=float(chk.params["timeout"]))  # type: ignore[arg-type]
        return command_check_result(outcome, argv)

    return CheckContext(cwd, command_runner=runner)


def test_trusted_command_runs_and_one_byte_change_loses_trust(tmp_path: Path) -> None:
    store = TrustStore()
    ctx = trusted_runner(store, tmp_path)
    check = parse_check({"kind": "command", "argv": ["touch", "made-by-check"], "timeout": 5})
    assert run_check(check, ctx).status == "untrusted"
    assert not (tmp_path / "made-by-check").exists()
    store.approve(REPO, ["touch", "made-by-check"])
    assert run_check(check, ctx).status == "pass"
    assert (tmp_path / "made-by-check").exists()
    changed = parse_check({"kind": "command", "argv": ["touch", "made-by-checK"], "timeout": 5})
    assert run_check(changed, ctx).status == "untrusted"
    assert not (tmp_path / "made-by-checK").exists()


# ---- display ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["pytest", "-q", "tests/smoke"], "pytest -q tests/smoke"),
        (["echo", "two words"], "echo 'two words'"),
        (["echo", ""], "echo ''"),
        (["echo", "it's"], "echo 'it'\"'\"'s'"),
        (["echo", "\x1b[2J\x1b[Hclean"], "echo $'\\e[2J\\e[Hclean'"),
        (["echo", "line1\nline2"], "echo $'line1\\nline2'"),
        (["printf", "a\x00b"], "printf $'a\\x00b'"),
        (["cat", "safe\u202etxt.exe"], "cat $'safe\\u202etxt.exe'"),
        (["cat", "\u2066x\u2069"], "cat $'\\u2066x\\u2069'"),
        (["ls", "zero\u200bwidth"], "ls $'zero\\u200bwidth'"),
        (["echo", "it's\tme\\"], "echo $'it\\'s\\tme\\\\'"),
        (["echo", "caf\u00e9"], "echo 'caf\u00e9'"),
        (["echo", "c1\x85"], "echo $'c1\\u0085'"),
        (["cat", "raw\udcffbyte"], "cat $'raw\\xffbyte'"),
    ],
)
def test_escape_for_display(argv: list[str], shown: str) -> None:
    assert escape_for_display(argv) == shown


@given(st.text())
def test_escape_control_leaves_nothing_hidden(text: str) -> None:
    escaped = escape_control(text)
    assert "\n" not in escaped and "\r" not in escaped and "\x1b" not in escaped
    assert not any(0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in escaped)
    assert all(c.isprintable() for c in escaped)


ARG_CHARS = st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(ARG_CHARS, max_size=6), min_size=1, max_size=3))
def test_display_is_exactly_what_bash_would_run(argv: list[str]) -> None:
    shown = escape_for_display(argv)
    proc = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {shown}"],
        capture_output=True,
        check=True,
        env={"LC_ALL": "C.UTF-8", "PATH": os.environ["PATH"]},
    )
    assert proc.stdout.split(b"\0")[:-1] == [os.fsencode(arg) for arg in argv]
