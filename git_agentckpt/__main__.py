"""`python -m git_agentckpt …` is `git ckpt …` (the hook shims fall back to it)."""

from git_agentckpt.cli.main import main

main()
