"""The audit trail checked end to end (`git ckpt verify`)."""
