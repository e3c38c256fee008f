"""The audit trail: checks, exports and views of a task's record (one module per topic)."""
