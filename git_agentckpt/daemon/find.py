"""Where a call's daemon is, and whether a call may go to it at all (no pygit2, no click).

Imported by `git-ckpt` before anything else (`cli/launch.py`): only `os` and `sys`
here. `discover` finds the per-worktree git dir the way git does; `refusal` is the
client's quick look at the arguments (the group's options as click reads them,
combined short flags included): a call it is unsure of runs in its own process, and
the daemon decides again with click itself (`cli/routing.py`), whatever the client
said; `starts_daemon` says which calls start one when none runs; `fingerprint` says
which installation a daemon must be to serve a call, and the environment variables
that switch and tune the daemon are read here.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # no `import typing` here (see cli/launch.py)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

MODE_VARS = ("GIT_CKPT_DAEMON", "GIT_CKPT_SERVER")  # auto (default) | off; either turns it off
MODE_VAR = MODE_VARS[0]
IDLE_VARS = ("GIT_CKPT_DAEMON_IDLE", "GIT_CKPT_SERVER_IDLE")  # seconds idle before exiting
TIMEOUT_VAR = "GIT_CKPT_DAEMON_TIMEOUT"  # seconds a client waits for the daemon to accept
DEFAULT_IDLE = 300.0
DEFAULT_TIMEOUT = 1.0
OFF_WORDS = frozenset({"0", "off", "no", "false", "never"})
# Set: git finds the repository differently (or the call says where it is): run here.
UNCLEAR_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)
PROTOCOL = "ckpt2"  # of the requests between `git-ckpt` and its daemon (cli/launch.py)
AGENT_DIR = "agent"  # in the per-worktree git dir
SOCKET_NAME = "daemon.sock"
LOCK_NAME = "daemon.lock"  # held (flock) by the daemon for its whole life
SUN_PATH_MAX = 108  # bytes of a unix socket path, with its NUL
# Commands never run by the daemon (`cli/routing.py` says why for each): they need a
# person or the terminal, may have git ask for credentials, manage the daemon itself,
# or serve an agent for a whole session. The client also keeps any call naming one of
# these words or options in its own process: a false alarm costs only speed.
INLINE_COMMANDS = frozenset({"trust", "fetch", "push", "server", "daemon", "mcp"})
INLINE_OPTIONS = frozenset({"--by-human", "--rebaseline"})
# Calls that start a daemon when none runs: the ones that write a task's trail (an agent
# makes them after every turn). Reading commands, `init`, `demo`, help and the like use a
# daemon that runs, but start none.
STARTING_COMMANDS = frozenset(
    {"create", "event", "task", "step", "resume", "restore", "tick", "check", "hook", "confirm"}
)
HELP_OPTIONS = frozenset({"-h", "--help"})


def supported() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")


def enabled(env: Mapping[str, str]) -> bool:
    return supported() and not any(
        env.get(var, "auto").strip().lower() in OFF_WORDS for var in MODE_VARS
    )


def _seconds(env: Mapping[str, str], names: Sequence[str], default: float, least: float) -> float:
    for name in names:
        value = env.get(name, "")
        if value:
            try:
                return max(least, float(value))
            except ValueError:
                return default
    return default


def idle_seconds(env: Mapping[str, str]) -> float:
    return _seconds(env, IDLE_VARS, DEFAULT_IDLE, 1.0)


def timeout_seconds(env: Mapping[str, str]) -> float:
    """How long a client waits for the daemon to accept its call (the daemon: twice that)."""
    return _seconds(env, (TIMEOUT_VAR,), DEFAULT_TIMEOUT, 0.05)


# -- which command, which repository --------------------------------------------------------


def parse_group(argv: Sequence[str]) -> tuple[str, str | None, list[str]] | None:
    """(the `-C` path, the subcommand or None, the arguments after it), reading the
    group's options as click does (`-C PATH`, `-CPATH`, `-q`, `--quiet`, clustered
    `-qC PATH`; the last `-C` wins); None for anything else before the subcommand."""
    path = "."
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--quiet":
            continue
        if arg in HELP_OPTIONS or arg == "--version":
            return path, None, []
        if not arg.startswith("-") or arg == "-":
            return path, arg, list(argv[i:])
        if arg.startswith("--") or len(arg) < 2:
            return None
        letters = arg[1:]
        while letters:
            flag, letters = letters[0], letters[1:]
            if flag == "q":
                continue
            if flag == "h":
                return path, None, []
            if flag != "C":
                return None
            if letters:
                path, letters = letters, ""
            elif i < len(argv):
                path, i = argv[i], i + 1
            else:
                return None
    return path, None, []


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv` (after the group's options), or None."""
    parsed = parse_group(argv)
    return None if parsed is None else parsed[1]


def refusal(argv: Sequence[str]) -> str | None:
    """Why the client keeps `argv` in its own process (the daemon checks again), or None."""
    parsed = parse_group(argv)
    if parsed is None:
        return "options the client does not read"
    _path, command, rest = parsed
    if command is None:
        return "no command"
    if command in INLINE_COMMANDS:
        return f"`{command}` runs in its own process"
    if any(a in INLINE_OPTIONS or a.split("=", 1)[0] in INLINE_OPTIONS for a in rest):
        return "an option that needs a person at the terminal"
    return None


def starts_daemon(argv: Sequence[str]) -> bool:
    """Whether this call, when no daemon runs, starts one (see STARTING_COMMANDS)."""
    parsed = parse_group(argv)
    if parsed is None or parsed[1] not in STARTING_COMMANDS:
        return False
    return not any(a in HELP_OPTIONS for a in parsed[2])


def _is_git_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "HEAD")) and (
        os.path.isdir(os.path.join(path, "objects"))
        or os.path.isfile(os.path.join(path, "commondir"))
    )


def _from_dotgit(top: str, dotgit: str, mode: int) -> tuple[str, str] | None:
    if mode & 0o170000 == 0o040000:  # a directory: the repository itself
        return (top, dotgit) if _is_git_dir(dotgit) else None
    try:  # a `gitdir: PATH` file: a linked worktree or a submodule
        with open(dotgit, "rb") as fh:
            text = fh.read(4096)
    except OSError:
        return None
    if not text.startswith(b"gitdir: "):
        return None
    target = os.fsdecode(text[8:].strip())
    git_dir = os.path.realpath(os.path.join(top, target))
    return (top, git_dir) if target and _is_git_dir(git_dir) else None


def discover(start: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(work tree, per-worktree git dir) of the repository holding `start`, or None.

    Found the way git finds it (the nearest `.git` directory or `gitdir:` file
    upwards, not across a file-system boundary), with a few `stat` calls and
    no pygit2. None, so the call runs in its own process, whenever git would
    be told otherwise by the environment, `start` is not in a work tree, or
    anything is unclear.
    """
    if any(var in env for var in UNCLEAR_VARS):
        return None
    try:
        here = os.path.realpath(start)
        device = os.stat(here).st_dev
    except (OSError, ValueError):
        return None
    while True:
        dotgit = os.path.join(here, ".git")
        try:
            st = os.stat(dotgit)
        except FileNotFoundError:
            st = None
        except (OSError, ValueError):
            return None
        if st is not None:
            return _from_dotgit(here, dotgit, st.st_mode)
        if _is_git_dir(here):
            return None  # inside a git dir or a bare repository: no work tree
        parent = os.path.dirname(here)
        if parent == here:
            return None
        try:
            if os.stat(parent).st_dev != device:
                return None  # git stops at a file-system boundary
        except OSError:
            return None
        here = parent


def start_dir(argv: Sequence[str]) -> str:
    """Where the call runs: the working directory, moved by `-C` (the last one, as click
    keeps it)."""
    parsed = parse_group(argv)
    return os.path.join(os.getcwd(), parsed[0] if parsed is not None else ".")


def owned_by_caller(worktree: str, git_dir: str) -> bool:
    """Whether this user owns the work tree and its git dir: git refuses a repository of
    another owner (`safe.directory`), and no daemon is started for one."""
    try:
        uid = os.getuid()
        return os.stat(worktree).st_uid == uid and os.stat(git_dir).st_uid == uid
    except OSError:
        return False


def agent_dir(git_dir: str) -> str:
    return os.path.join(git_dir, AGENT_DIR)


def socket_path(git_dir: str) -> str:
    return os.path.join(agent_dir(git_dir), SOCKET_NAME)


def daemon_held(git_dir: str) -> bool:
    """Whether a daemon (running or starting) holds the lock of `git_dir`."""
    import fcntl

    try:
        fd = os.open(os.path.join(agent_dir(git_dir), LOCK_NAME), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def package_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # daemon/ -> the package


INSTALLED_IN = ("site-packages", "dist-packages")  # a package put there by an installer


def fingerprint(pkg: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """What a daemon must share with its clients: interpreter, package files, HOME.

    The package part is the mtime of the directory holding it: in site-packages any
    install, upgrade or removal there changes it (the installer adds or removes a
    `.dist-info` directory), so an installed package needs nothing more. A package
    anywhere else (a source checkout, an editable install) is edited in place: there
    the newest mtime and the number of its `.py` files count too (~180 `stat` calls,
    ~0.7 ms of every call). Editing or upgrading the package or a dependency gives a
    new fingerprint, so the daemon refuses the call as stale and is replaced. HOME is
    part of it too.
    """
    from git_agentckpt import __version__

    pkg = pkg or package_dir()
    env = os.environ if env is None else env
    newest, count = 0, 0
    installed = os.path.basename(os.path.dirname(pkg)) in INSTALLED_IN
    stack = [] if installed else [pkg]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    newest = max(newest, entry.stat().st_mtime_ns)
                    count += 1
    # the venv, not only the interpreter behind it (python and python3 name the same one)
    exe = f"{os.path.realpath(sys.executable)}|{sys.prefix}"
    try:  # installing or removing any package in the venv changes its site-packages
        site = os.stat(os.path.dirname(pkg)).st_mtime_ns
    except OSError:
        site = 0
    home = env.get("HOME", "")
    return f"{PROTOCOL}|{__version__}|{exe}|{pkg}|{count}|{newest}|{site}|{home}"
