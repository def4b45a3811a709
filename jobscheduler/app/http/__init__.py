"""The HTTP surface: status page, JSON API, metrics (the extra ``jobscheduler[http]``)."""
