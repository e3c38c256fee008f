"""What the daemon does once, at start, so that no forked child does it again (click's side).

`warm_cli` loads every command's module, asks the type checks every call asks, and
parses every command's options until the interpreter has specialised click's code;
each child inherits the result (`daemon/child.preload`).
"""

from __future__ import annotations

import collections.abc
import enum
import types

import click

from git_agentckpt.cli.main import cli, load_all_commands


def warm_cli() -> None:
    load_all_commands()
    warm_type_checks()
    warm_parsing()


WARM_ROUNDS = 12  # Python 3.11 specialises a code object's bytecode after ~8 runs


def warm_parsing() -> None:
    """Parse every command's options (no arguments, nothing run) until the interpreter has
    specialised click's parsing code: each child would otherwise start from generic
    bytecode and specialise it again, writing to pages it shares with the daemon
    (~0.5 ms of every call). Nothing is read but the commands' declarations."""
    for _ in range(WARM_ROUNDS):
        ctx = cli.make_context("git ckpt", ["-C", "/", "--quiet"], resilient_parsing=True)
        with ctx:
            for name in cli.list_commands(ctx):
                command = cli.get_command(ctx, name)
                if command is not None:
                    command.make_context(name, [], parent=ctx, resilient_parsing=True)


def warm_type_checks() -> None:
    """`isinstance(x, Mapping)` for an `x` that is not one walks every registered
    subclass of `Mapping` the first time a class is asked (the libraries preloaded add
    dozens), then caches the answer in the process that asked. A child's answers die
    with it: ~1 ms of each resume went there. So the daemon asks once, for the classes
    every call checks, and each child inherits the answers."""
    abcs = [getattr(collections.abc, name) for name in collections.abc.__all__]
    abcs.append(click.ParamType)
    classes = [dict, list, tuple, str, bytes, bytearray, int, float, bool, type(None)]
    classes += [set, frozenset, type, enum.EnumType, types.GeneratorType]
    for kind in abcs:
        for cls in classes:
            issubclass(cls, kind)
