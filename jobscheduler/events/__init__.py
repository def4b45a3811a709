"""Events: handlers, dependences, e-mail alerts and the audit line."""
