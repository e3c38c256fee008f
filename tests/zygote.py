"""Daemons for the tests of the `daemon` mode, forked from a process that imported the
package once (tests/modes.py).

A daemon's start is ~0.6 s of imports (`daemon/child.preload`), and each test of the
`daemon` mode has daemons of its own: started the way a user's are, the imports alone
would double the suite. So this helper process, started once per test process, does
the imports and then forks one daemon per request: the child takes the test's
environment and runs the daemon's own code from the lock on (`daemon/server.run`:
claim, bind, register, plug-ins, serve), exactly what a daemon started by `git-ckpt`
runs after its imports. How a daemon is spawned, started and stopped by `git-ckpt`
itself is tested with real spawns (tests/test_daemon*.py).

Protocol on its stdin/stdout, one JSON document a line: `{"fp", "git_dir",
"worktree", "env"}` answers the daemon's pid; `{"stop": true}` ends every daemon it
forked (SIGTERM, then SIGKILL after 10 s) and answers their count.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


class Zygote:
    """The test process's side."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def _started(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            code = f"import sys; sys.path.insert(0, {HERE!r}); import zygote; zygote.main()"
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            )
        return self.proc

    def _ask(self, doc: dict[str, Any]) -> int:
        proc = self._started()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(doc) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise AssertionError("the daemon zygote ended")
        return int(line)

    def daemon(self, fp: str, git_dir: str, worktree: str) -> int:
        return self._ask(
            {"fp": fp, "git_dir": git_dir, "worktree": worktree, "env": dict(os.environ)}
        )

    def stop_all(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return 0
        return self._ask({"stop": True})


# -- the helper process --------------------------------------------------------------


def _be_daemon(doc: dict[str, Any]) -> None:
    """In the forked child: the test's environment, no file of ours, then the daemon."""
    code = 70
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)
        os.environ.clear()
        os.environ.update(doc["env"])
        time.tzset()
        os.chdir("/")
        from git_agentckpt.daemon import server

        code = server.run(doc["fp"], doc["git_dir"], doc["worktree"])
    finally:
        os._exit(code)


def _stop(children: set[int]) -> int:
    for pid in children:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    left = set(children)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            if os.waitpid(pid, os.WNOHANG)[0]:
                left.discard(pid)
        if left:
            time.sleep(0.005)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    count = len(children)
    children.clear()
    return count


def main() -> None:
    from git_agentckpt.daemon.child import preload

    preload()
    children: set[int] = set()
    for line in sys.stdin:
        doc = json.loads(line)
        for pid in list(children):
            if os.waitpid(pid, os.WNOHANG)[0]:
                children.discard(pid)
        if doc.get("stop"):
            answer = _stop(children)
        else:
            sys.stdout.flush()
            answer = os.fork()
            if answer == 0:
                _be_daemon(doc)
            children.add(answer)
        sys.stdout.write(f"{answer}\n")
        sys.stdout.flush()
