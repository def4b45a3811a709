"""The model: events, jobs and their parts, groups, executions, the catalog of definitions."""
