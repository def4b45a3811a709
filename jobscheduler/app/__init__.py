"""The application: the command line and the daemon."""
