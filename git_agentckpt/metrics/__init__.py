"""Recovery quality, measured (`git ckpt metrics`): per resume and per task, from the event
log and the recovery reports (compute.py; the windows: timeline.py; the figures:
figures.py and resumes.py; the `recovery.metrics` events: recording.py). Returns data;
never prints. Import the modules themselves: a step start loads only recording.py."""
