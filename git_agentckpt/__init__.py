"""git-agentckpt: interruptible, resumable and auditable agent tasks, stored in git.

`git_agentckpt.open(path)` returns a `Checkpointer`, the facade that the CLI,
the MCP server and Python users call.
"""

from __future__ import annotations

# Not `from typing import TYPE_CHECKING`: `git-ckpt` imports this package before it
# knows whether a warm server will run the call (cli/launch.py), and typing costs ~10 ms.
TYPE_CHECKING = False
__version__ = "0.1.0"

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer


def open(path: str = ".") -> Checkpointer:
    """Open the repository that contains `path` (the working tree, not bare)."""
    from git_agentckpt.api import Checkpointer

    return Checkpointer.open(path)


__all__ = ["__version__", "open"]
