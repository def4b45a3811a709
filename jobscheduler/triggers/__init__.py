"""Triggers: when a job's slots fall. Pure: ``next_after(t)`` depends on the definition and `t`."""
