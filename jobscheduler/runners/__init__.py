"""Runners: how one run of a job is carried out (OS commands, Python classes), never raising."""
