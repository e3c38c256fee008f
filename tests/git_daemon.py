"""A `git daemon` on 127.0.0.1 for tests: pushes over git:// reach a repository's hooks
the way they do on a real server (receive-pack's stderr goes to the daemon, not to the
client: only what receive-pack sends on the sideband reaches the pushing client)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def git_daemon(base: Path) -> Iterator[tuple[str, Path]]:
    """Serve the repositories under `base` (receive-pack enabled) and yield the base URL
    `git://127.0.0.1:PORT` and the daemon's log file; stopped (by its pid) on the way out."""
    log = base / "git-daemon.log"
    for _ in range(5):  # a port taken between the probe and the daemon's bind: try another
        port = _free_port()
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    "git",
                    "daemon",
                    "--listen=127.0.0.1",
                    f"--port={port}",
                    f"--base-path={base}",
                    "--export-all",
                    "--enable=receive-pack",
                    "--reuseaddr",
                    "--informative-errors",
                    str(base),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while proc.poll() is None and not _accepting(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None and _accepting(port):
            break
        proc.kill()
        proc.wait()
    else:
        raise RuntimeError(f"git daemon did not start: {log.read_text()}")
    try:
        yield f"git://127.0.0.1:{port}", log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
