"""The audit trail checked end to end (`git ckpt verify`) and handed over as plain files
(`git ckpt export`, `git ckpt verify --dir`)."""
