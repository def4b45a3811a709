"""The OpenAPI 3.1 description of the JSON API (served at ``/api/openapi.json``)."""

from __future__ import annotations

from typing import Any

__all__ = ["openapi"]

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string"}},
}
_NULL_TEXT = {"type": ["string", "null"]}
_RECORD_REQUIRED = ["run_id", "job", "trigger", "attempt", "node", "state", "started"]
_RECORD_PROPERTIES: dict[str, Any] = {
    "run_id": {"type": "string"},
    "job": {"type": "string"},
    "slot": {"type": ["string", "null"], "format": "date-time"},
    "trigger": {"type": "string"},
    "attempt": {"type": "integer"},
    "node": {"type": "string"},
    "state": {
        "enum": [
            "running",
            "succeeded",
            "failed",
            "not_started",
            "skipped",
            "missed",
            "abandoned",
        ]
    },
    "started": {"type": "string", "format": "date-time"},
    "ended": {"type": ["string", "null"], "format": "date-time"},
    "duration": {"type": ["number", "null"], "description": "seconds; null unless it ran"},
    "exit_code": {"type": ["integer", "null"]},
    "reason": _NULL_TEXT,
    "output_tail": {"type": "string"},
}
_RECORD = {"type": "object", "required": _RECORD_REQUIRED, "properties": _RECORD_PROPERTIES}
_RUN: dict[str, Any] = {
    "type": "object",
    "required": [*_RECORD_REQUIRED, "output"],
    "properties": {**_RECORD_PROPERTIES, "output": {"type": "string"}},
}
_QUEUED = {
    "type": "object",
    "required": ["id", "job", "priority", "submitted", "state"],
    "properties": {
        "id": {"type": "integer"},
        "job": {"type": "string"},
        "args": {"type": ["object", "null"]},
        "priority": {"type": "integer"},
        "host": _NULL_TEXT,
        "submitted": {"type": "string", "format": "date-time"},
        "state": {"enum": ["pending", "running", "succeeded", "failed", "not_started"]},
        "run_id": _NULL_TEXT,
        "node": _NULL_TEXT,
    },
}
_JOB: dict[str, Any] = {
    "type": "object",
    "required": ["name", "schedule", "enabled"],
    "properties": {
        "name": {"type": "string"},
        "schedule": {"type": "string"},
        "enabled": {"type": "boolean"},
        "next_run": {"type": ["string", "null"], "format": "date-time"},
        "last": {"type": ["object", "null"]},
    },
}

_WAITING = {
    "type": "object",
    "description": "a run waiting for its busy job: the job's waiting slot (trigger "
    "schedule, overlap queue or replace) or a rerun after a node loss waiting for room",
    "required": ["job", "run_id", "trigger", "node", "since", "waited", "busy_on", "reason"],
    "properties": {
        "job": {"type": "string"},
        "slot": {"type": ["string", "null"], "format": "date-time"},
        "run_id": {"type": "string"},
        "trigger": {"enum": ["schedule", "rerun"]},
        "attempt": {"type": "integer"},
        "node": {"type": "string"},
        "since": {"type": "string", "format": "date-time"},
        "waited": {"type": "number", "description": "seconds"},
        "busy_on": {"type": "array", "items": {"type": "string"}},
        "reason": {"type": "string"},
        "awaiting_takeover": {"type": "boolean"},
    },
}
_LIVE_RUN: dict[str, Any] = {
    "type": "object",
    "required": [*_RECORD_REQUIRED, "elapsed", "awaiting_takeover"],
    "properties": {
        **_RECORD_PROPERTIES,
        "elapsed": {"type": "number"},
        "awaiting_takeover": {"type": "boolean"},
    },
}
_JOB_LIVE = {
    "type": "object",
    "required": [*_JOB["required"], "running", "waiting"],
    "properties": {
        **_JOB["properties"],
        "paused": {"type": ["object", "null"]},
        "running": {"type": "array", "items": _LIVE_RUN},
        "waiting": {"type": "array", "items": _WAITING},
    },
}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    reasons = {
        400: "bad input (a query value, malformed JSON, unknown fields)",
        401: "the token is missing",
        403: "wrong token, or actions are off (no token configured)",
        404: "unknown job or run id, or action",
        409: "the job is paused",
        413: "the body is too large",
        429: "the queue is full",
    }
    return {str(code): _json(_ERROR, reasons[code]) for code in codes}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def _get(summary: str, schema: dict[str, Any], *params: dict[str, Any]) -> dict[str, Any]:
    return {
        "get": {
            "summary": summary,
            "parameters": list(params),
            "security": [{"token": []}],
            "responses": {"200": _json(schema), **_errors(400, 401)},
        }
    }


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _get_named(summary: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
    """A GET of one thing named by path parameter `name`: 404 when there is none."""
    return {
        "get": {
            "summary": summary,
            "parameters": [_path(name)],
            "security": [{"token": []}],
            "responses": {"200": _json(schema), **_errors(401, 404)},
        }
    }


def openapi() -> dict[str, Any]:
    """The description, as a JSON-ready dict."""
    action_answer = {"type": "object"}
    submit_body = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "args": {"type": ["object", "null"]},
            "priority": {"type": ["integer", "null"], "minimum": -1000000, "maximum": 1000000},
        },
    }
    pause_body = {
        "type": "object",
        "additionalProperties": False,
        "description": "pause: a note, and how long (a duration with its unit: 30m, 2h)",
        "properties": {
            "note": {"type": ["string", "null"]},
            "for": {"type": ["string", "null"], "examples": ["2h"]},
        },
    }
    backfill_body = {
        "type": "object",
        "additionalProperties": False,
        "required": ["from", "to"],
        "description": "times in ISO 8601; without a zone, in the job's timezone",
        "properties": {
            "from": {"type": "string", "examples": ["2026-01-01T00:00:00+00:00"]},
            "to": {"type": "string", "examples": ["2026-01-02T00:00:00+00:00"]},
            "reprocess": {"enum": ["missing", "failed", "all"]},
            "dry_run": {"type": "boolean"},
            "max_parallel": {"type": "integer", "minimum": 1},
            "yes": {"type": "boolean", "description": "confirm a range of more than a year"},
        },
    }
    backfill_slot = {
        "type": "object",
        "required": ["slot", "action", "attempt"],
        "properties": {
            "slot": {"type": "string", "format": "date-time"},
            "action": {"enum": ["run", "skip"]},
            "attempt": {"type": "integer"},
            "reason": _NULL_TEXT,
            "state": _NULL_TEXT,
            "run_id": _NULL_TEXT,
            "run_reason": _NULL_TEXT,
        },
    }
    backfill_answer = {
        "type": "object",
        "required": ["job", "dry_run", "slots"],
        "properties": {
            "job": {"type": "string"},
            "dry_run": {"type": "boolean"},
            "slots": {"type": "array", "items": backfill_slot},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "jobscheduler", "version": "1"},
        "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/api/status": _get(
                "nodes, running runs, runs waiting for their busy jobs, next runs, failures, queue",
                {
                    "type": "object",
                    "properties": {
                        "running": {"type": "array", "items": _LIVE_RUN},
                        "waiting": {"type": "array", "items": _WAITING},
                    },
                },
            ),
            "/api/nodes": _get(
                "the nodes (lost ones marked) and how their definitions compare",
                {
                    "type": "object",
                    "required": ["node", "nodes", "definitions"],
                    "properties": {
                        "node": {"type": "string"},
                        "nodes": {"type": "array", "items": {"type": "object"}},
                        "definitions": {"type": "object"},
                    },
                },
            ),
            "/api/jobs": _get(
                "the jobs, a page at a time",
                {
                    "type": "object",
                    "required": ["jobs", "total", "page"],
                    "properties": {
                        "jobs": {"type": "array", "items": _JOB},
                        "total": {"type": "integer"},
                        "page": {"type": "integer"},
                    },
                },
                _query("page", {"type": "integer", "minimum": 1, "maximum": 1000000}, "page"),
                _query("q", {"type": "string"}, "names containing this"),
            ),
            "/api/jobs/{name}": _get_named(
                "a job as /api/jobs lists it, with its running runs and the runs waiting for it",
                _JOB_LIVE,
                "name",
            ),
            "/api/history": _get(
                "run records, newest first",
                {"type": "array", "items": _RECORD},
                _query("job", {"type": "string"}, "one job's runs"),
                _query("limit", {"type": "integer", "minimum": 0, "maximum": 10000}, "at most"),
            ),
            "/api/queue": _get(
                "queue rows, newest first",
                {"type": "array", "items": _QUEUED},
                _query(
                    "state",
                    {"enum": ["pending", "running", "succeeded", "failed", "not_started"]},
                    "only rows in this state",
                ),
                _query("limit", {"type": "integer", "minimum": 0, "maximum": 10000}, "at most"),
            ),
            "/api/runs/{run_id}": _get_named(
                "one run's record, its output (output_tail) included", _RUN, "run_id"
            ),
            "/api/runs/{run_id}/output": {
                "get": {
                    "summary": "a run's output: text, or with follow=1 Server-Sent Events "
                    "(event output: {append} or {output}; event end: {state}) until it ends",
                    "parameters": [
                        _path("run_id"),
                        _query("follow", {"enum": ["0", "1"]}, "stream until the run ends"),
                    ],
                    "security": [{"token": []}],
                    "responses": {
                        "200": {
                            "description": "the output",
                            "content": {
                                "text/plain": {"schema": {"type": "string"}},
                                "text/event-stream": {"schema": {"type": "string"}},
                            },
                        },
                        **_errors(400, 401, 404),
                    },
                }
            },
            "/api/jobs/{name}/backfill": {
                "post": {
                    "summary": "run the job's slots in [from, to] again (trigger backfill); "
                    "a dry run lists them and runs nothing",
                    "parameters": [_path("name")],
                    "security": [{"token": []}],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": backfill_body}},
                    },
                    "responses": {
                        "200": _json(backfill_answer, "a dry run, or nothing to run"),
                        "202": _json(backfill_answer, "the runs go on in the daemon"),
                        **_errors(400, 401, 403, 404, 409, 413),
                    },
                }
            },
            "/api/jobs/{name}/{action}": {
                "post": {
                    "summary": "run now, pause, resume, kill (every run) or submit a job",
                    "parameters": [
                        _path("name"),
                        {
                            "name": "action",
                            "in": "path",
                            "required": True,
                            "schema": {"enum": ["run", "pause", "resume", "kill", "submit"]},
                        },
                    ],
                    "security": [{"token": []}],
                    "requestBody": {
                        "required": False,
                        "content": {
                            "application/json": {"schema": {"oneOf": [submit_body, pause_body]}}
                        },
                    },
                    "responses": {
                        "200": _json(action_answer),
                        "201": _json(
                            {
                                "type": "object",
                                "required": ["queue_id"],
                                "properties": {"queue_id": {"type": "integer"}},
                            },
                            "submitted: the queue row's id",
                        ),
                        **_errors(400, 401, 403, 404, 409, 413, 429),
                    },
                }
            },
            "/api/runs/{run_id}/kill": {
                "post": {
                    "summary": "stop one run, on whichever node runs it",
                    "parameters": [_path("run_id")],
                    "security": [{"token": []}],
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["requested"],
                                "properties": {"requested": {"type": "integer"}},
                            }
                        ),
                        **_errors(400, 401, 403, 404, 413),
                    },
                }
            },
        },
    }
