"""Recovery quality, measured (`git ckpt metrics`): per resume and per task, from the event
log and the recovery reports (compute.py; the windows: timeline.py; the figures:
figures.py and resumes.py). Returns data; never prints."""

from git_agentckpt.metrics.compute import (
    DEFAULT_WINDOW,
    METRICS_EVENT,
    metrics,
    record_due,
    task_metrics,
)

__all__ = ["DEFAULT_WINDOW", "METRICS_EVENT", "metrics", "record_due", "task_metrics"]
