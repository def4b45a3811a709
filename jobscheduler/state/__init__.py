"""The state store: what ran, what runs, and the history of runs."""
