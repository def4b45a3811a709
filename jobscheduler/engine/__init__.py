"""The engine: the timeline of slots, the ready queue, the workers; the only place that waits."""
