"""This process as a node of the state store: heartbeats, leases, claims, the queue."""
