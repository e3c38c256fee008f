"""`git ckpt mcp`: serve the task store to an agent as an MCP server over stdio.

The `mcp` SDK is imported here, when the command runs, never at start-up: the
other commands do not pay for it.
"""

from __future__ import annotations

import click

from git_agentckpt.cli.common import root_path
from git_agentckpt.cli.main import cli


@cli.command()
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve tools, a prompt and resources to an agent over MCP (stdio) until it hangs up."""
    from git_agentckpt.cli.mcp_server import serve

    serve(root_path(ctx))
