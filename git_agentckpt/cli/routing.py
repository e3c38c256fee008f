"""Which calls the daemon may run, decided on the arguments as click itself parses them.

The daemon asks `refusal` for every call before it forks anything; what the client
thought (`daemon/find.refusal`, a quick look) does not count. The arguments are
parsed by the CLI's own click group and commands (`make_context(...,
resilient_parsing=True)`: nothing runs, no callback fires), so combined short flags
(`-qC .`), options after the arguments and every other spelling click accepts are
read exactly as the call would read them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import click

from git_agentckpt.cli.main import cli
from git_agentckpt.daemon.find import discover

# why each command (or option) runs in the caller's own process
OWN_PROCESS = {
    "trust": "`trust` needs a person at the terminal",
    "fetch": "`fetch` may have git ask for credentials at the terminal",
    "push": "`push` may have git ask for credentials at the terminal",
    "daemon": "`daemon` manages the daemon itself",
    "server": "`server` manages the daemon itself",
    "mcp": "`mcp` is a long-running server: it runs in its own process",
}
PERSON_OPTIONS = {
    "confirm": ("by_human", "`confirm --by-human` needs a person at the terminal"),
    "check": ("rebaseline", "`check --rebaseline` needs a person at the terminal"),
}


def _rest(ctx: click.Context) -> list[str]:
    # click 8.2-8.x keep the subcommand apart (`protected_args`, deprecated); 9 merges it
    return [*getattr(ctx, "_protected_args", []), *ctx.args]


def refusal(argv: Sequence[str], cwd: str, env: Mapping[str, str], git_dir: str) -> str | None:
    """Why the daemon of `git_dir` must not run `argv` (from `cwd`, with `env`), or None."""
    try:
        with cli.make_context("git ckpt", list(argv), resilient_parsing=True) as ctx:
            start = os.path.join(cwd, str(ctx.params.get("repo_path") or "."))
            rest = _rest(ctx)
            if not rest:
                return None  # help or the version: nothing of a repository
            name, command, args = cli.resolve_command(ctx, rest)
            if name in OWN_PROCESS:
                return OWN_PROCESS[name]
            if name in PERSON_OPTIONS and command is not None:
                param, why = PERSON_OPTIONS[name]
                with command.make_context(name, args, parent=ctx, resilient_parsing=True) as sub:
                    if sub.params.get(param):
                        return why
    except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        return "the arguments do not parse (the call reports why)"
    found = discover(start, env)
    if found is None or os.path.realpath(found[1]) != os.path.realpath(git_dir):
        return "the call is for another repository than this daemon's"
    return None
