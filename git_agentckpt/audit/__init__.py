"""The audit trail: checked end to end (`git ckpt verify`), handed over as plain files
(`git ckpt export`, `git ckpt verify --dir`) and shown to people (`git ckpt timeline`)."""
