"""The run policies: overlap, retry, pause after failures, hosts, catch-up."""
