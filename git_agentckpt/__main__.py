"""`python -m git_agentckpt …` is `git ckpt …` (the hook shims fall back to it)."""

from git_agentckpt.cli.launch import main

main()
