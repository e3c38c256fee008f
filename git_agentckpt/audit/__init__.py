"""The audit trail's checks (issue 14): one module per topic."""
