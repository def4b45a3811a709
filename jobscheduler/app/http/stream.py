"""``GET /api/runs/ID/output?follow=1``: a run's output as Server-Sent Events until it ends.

The output reaches the store at most once a second while a run goes on (from whichever node
runs it), so the stream reads the store's record a few times a second and sends what changed:
``event: output`` with ``{"append": TEXT}`` when the output grew, or ``{"output": TEXT}`` when
it was replaced (the kept tail moved on); then ``event: end`` with ``{"state": …}`` once the
run is final. It stops when the client goes or the server closes.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from ...state.base import StateStore
from ...state.records import RunRecord

__all__ = ["POLL", "follow_output", "output_events"]

POLL = 0.25  # seconds between two reads of the record


def _event(name: str, data: dict[str, object]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


async def output_events(
    store: StateStore,
    first: RunRecord,
    *,
    gone: threading.Event,
    request: Request | None = None,
) -> AsyncIterator[str]:
    """The events of run `first`'s output, from `first` on, until the run is final, `gone`
    is set (the server closes) or the client leaves."""
    sent = first.output_tail
    yield _event("output", {"output": sent})
    record: RunRecord | None = first
    while record is not None and not record.state.finished and not gone.is_set():
        await asyncio.sleep(POLL)
        if request is not None and await request.is_disconnected():
            return
        record = await asyncio.to_thread(store.run, first.run_id)
        if record is None:  # pruned meanwhile
            break
        output = record.output_tail
        if output != sent:
            if output.startswith(sent):
                yield _event("output", {"append": output[len(sent) :]})
            else:
                yield _event("output", {"output": output})
            sent = output
    yield _event("end", {"state": None if record is None else str(record.state)})


def follow_output(
    store: StateStore, record: RunRecord, request: Request, gone: threading.Event
) -> StreamingResponse:
    """The streaming response of `record`'s output (see the module's description)."""
    return StreamingResponse(
        output_events(store, record, gone=gone, request=request),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
