"""The engine: the timeline of slots, the ready runs, the workers; the only place that waits."""
