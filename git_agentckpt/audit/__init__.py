"""The audit trail checked and handed over: verification, exports for reviewers."""
