"""The conditions a replayed run runs under: the recorded clock (frozen, moved to each
event's time), the recorded faults raised again, the recorded order of concurrent calls, and
a wall-clock limit on the run."""
