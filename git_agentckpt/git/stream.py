"""Run git and read its output as it comes (progress of long work), else as `run_git`.

`run_git_streaming` gives back the same `CompletedProcess` as `run_git(check=False)`
(all of stdout and stderr, for the same error handling afterwards), and meanwhile
calls `on_stdout_line` with each complete line of stdout and `on_stderr` with each
piece of stderr as git writes it (git's progress meters end their pieces with `\\r`).
"""

from __future__ import annotations

import os
import selectors
import subprocess
from collections.abc import Callable, Mapping, Sequence

from git_agentckpt.git.run import popen_git


def run_git_streaming(
    args: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    on_stdout_line: Callable[[bytes], None] | None = None,
    on_stderr: Callable[[bytes], None] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    proc = popen_git(args, cwd, env)
    assert proc.stdout is not None and proc.stderr is not None
    out: list[bytes] = []
    err: list[bytes] = []
    partial = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        open_streams = 2
        while open_streams:
            for key, _ in sel.select():
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                if key.data == "err":
                    err.append(chunk)
                    if on_stderr is not None:
                        on_stderr(chunk)
                    continue
                out.append(chunk)
                if on_stdout_line is not None:
                    *lines, partial = (partial + chunk).split(b"\n")
                    for line in lines:
                        on_stdout_line(line)
    if partial and on_stdout_line is not None:
        on_stdout_line(partial)
    proc.stdout.close()
    proc.stderr.close()
    code = proc.wait()
    return subprocess.CompletedProcess(["git", *args], code, b"".join(out), b"".join(err))
