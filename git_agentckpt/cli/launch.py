"""`git-ckpt`'s entry point: hand the call to this work tree's daemon, or run it here.

Python start-up plus the modules a command needs (click, pygit2, yaml, ours)
cost 150-250 ms before any work, and agents call `git ckpt` after every turn.
A per-worktree daemon (`daemon/server.py`) keeps those modules imported and forks
one child per call. The child receives this process's stdin, stdout and stderr
(the file descriptors themselves, over a unix socket), its argv, working
directory, umask and whole environment, so it behaves as the call would have
here: same output, same terminal checks, same exit status.

The daemon is found through a socket in the repository's private directory,
`<git dir>/agent/daemon.sock` (the per-worktree git dir: each linked worktree
has its own), like git's `fsmonitor--daemon`. The git dir is found here
without pygit2, walking up from the working directory (and `-C`) for `.git`
the way git does; with GIT_DIR, GIT_WORK_TREE, GIT_COMMON_DIR,
GIT_CEILING_DIRECTORIES or GIT_DISCOVERY_ACROSS_FILESYSTEM set, outside a
work tree, or when anything is unclear, the call simply runs here.

The daemon serves a call only when the caller is its twin (same user,
namespaces, root, cgroup, resource limits, privileges: `daemon/peer.py`) and the
command needs no person or terminal (`daemon/find.refusal` here, then click's own
parsing in the daemon: `cli/routing.py`); otherwise it answers "not served:
<reason>" and the call runs here (GIT_CKPT_DEBUG shows the reason). A daemon that
does not answer within GIT_CKPT_DAEMON_TIMEOUT seconds (1) is given up on: the
call runs here. Ctrl-C and SIGTERM end this process at any point.

This module runs before anything else is imported, so it uses only what the
interpreter has already loaded (`os`, `sys`, `time`) and the C modules `_socket`
and `_signal`; `typing` alone would cost ~10 ms, `socket` ~4 ms, `re` (and the
`enum` it brings) ~6 ms. So the `git-ckpt` executable is a plain script
(`cli/git-ckpt`), not a console-scripts wrapper, which imports `re`.

When no daemon answers, the call runs here, and a call that writes a task's trail
(`daemon/find.starts_daemon`: not a read, not `demo`, `init` or help) in a work
tree this user owns starts a daemon in the background for the next calls.
`GIT_CKPT_DAEMON=off` (or the older `GIT_CKPT_SERVER=off`) turns all of this off;
`git ckpt daemon status|stop|list` manage it. Linux only (SO_PEERCRED, /proc);
elsewhere every call runs here.

The wire protocol is described in `daemon/client.py`.
"""

from __future__ import annotations

import os
import sys

from git_agentckpt.daemon.client import Interrupted, run_remote, spawn_daemon
from git_agentckpt.daemon.find import (
    daemon_held,
    discover,
    enabled,
    fingerprint,
    owned_by_caller,
    refusal,
    start_dir,
    starts_daemon,
)


def _debug(why: str) -> None:
    if os.environ.get("GIT_CKPT_DEBUG"):
        os.write(2, f"git ckpt: daemon: {why}; running in this process\n".encode())


def _exit(status: int) -> None:
    """End a call the daemon ran: nothing of ours is buffered (its output went to our
    fds from the child), so skip the interpreter's teardown (~1.8 ms of every call)."""
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 (no contextlib here: the module doc)
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status & 0xFF)  # as sys.exit would (-1: 255)


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["--version"]:  # what click prints, without importing click (~40 ms)
        from git_agentckpt import __version__

        sys.stdout.write(f"git-ckpt {__version__}\n")
        sys.exit(0)
    found = None
    if enabled(os.environ) and refusal(argv) is None:
        found = discover(start_dir(argv), os.environ)
    if found is not None:
        worktree, git_dir = found
        fp = fingerprint()
        try:
            status, why = run_remote(git_dir, fp, argv)
        except Interrupted as exc:  # a signal while the connection closed
            sys.exit(128 + exc.signum)
        if status is not None:
            _exit(status)
        wanted = why == "none" and starts_daemon(argv) and not daemon_held(git_dir)
        if (why.startswith("stale") or wanted) and owned_by_caller(worktree, git_dir):
            spawn_daemon(fp, worktree, git_dir)  # imports on the other core while this runs
        if why != "none":
            _debug(why)
    from git_agentckpt.cli.main import main as cli_main

    cli_main()
