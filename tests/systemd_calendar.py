"""Asking the real ``systemd-analyze calendar`` (systemd 252 on these machines) for the
elapses of many expressions at once, and our own `calendar_eval` for the same.

One ``systemd-analyze`` call takes any number of expressions: each valid one gets a block
("Original form: …", "Normalized form: …", then one line per elapse, "(in UTC): …" when the
zone is not UTC); a refused one gets a line on standard error and no block.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime

from jobscheduler.triggers.calendar_eval import next_elapse
from jobscheduler.triggers.calendar_parse import parse_calendar
from jobscheduler.triggers.calendar_spec import USEC_PER_SEC, CalendarError
from jobscheduler.triggers.zones import resolve_zone

SYSTEMD_ANALYZE = shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze"

_REFUSED = re.compile(r"^Failed to parse calendar specification '(.*)': ", re.MULTILINE)
_STUCK = re.compile(r"^Failed to determine next elapse for '(.*)': ", re.MULTILINE)
STUCK = "(no elapse: systemd's safety valve)"
_NORMALIZED = re.compile(r"^\s*Normalized form: (.*)$")
_ELAPSE = re.compile(r"^\s*(?:Next elapse|Iter\. #\d+): \w+ (\S+ \S+) (\S+)$")
_IN_UTC = re.compile(r"^\s*\(in UTC\): \w+ (\S+ \S+) UTC$")


@dataclass
class Answer:
    """What one side says of one expression: refused, or its normalised form and elapses
    (whole seconds since the epoch: systemd prints no fractions)."""

    refused: bool
    normalized: str | None = None
    elapses: tuple[int, ...] = ()


def _seconds(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp())


def systemd(expressions: list[str], zone: str, base: int, iterations: int) -> dict[str, Answer]:
    """systemd's answers, with ``TZ`` set to `zone` and the base time `base` (epoch s)."""
    result = subprocess.run(
        [
            SYSTEMD_ANALYZE,
            "calendar",
            f"--iterations={iterations}",
            f"--base-time=@{base}",
            "--",
            *expressions,
        ],
        env={**os.environ, "TZ": f":{zone}", "LANG": "C", "LC_ALL": "C", "SYSTEMD_COLORS": "0"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # A block per accepted expression, in order, blank lines between; "Original form" only
    # when it differs from the normalised one. Refusals: one line each on standard error.
    refused = set(_REFUSED.findall(result.stderr))
    # Accepted, but its search ran into systemd's safety valve (1,000 steps): no block; our
    # search gives up the same way, with no elapse (its normalised form is not shown).
    stuck = set(_STUCK.findall(result.stderr))
    accepted = [e for e in expressions if e not in refused and e not in stuck]
    blocks = [b for b in result.stdout.split("\n\n") if "Normalized form:" in b]
    if len(blocks) != len(accepted):
        raise AssertionError(f"systemd-analyze: {len(blocks)} blocks for {len(accepted)}: {result}")
    answers = {e: Answer(refused=True) for e in refused}
    answers.update((e, Answer(refused=False, normalized=STUCK)) for e in stuck)
    for expression, block in zip(accepted, blocks, strict=True):
        answer = answers[expression] = Answer(refused=False)
        local: list[int] = []
        utc: list[int] = []
        for line in block.splitlines():
            if match := _NORMALIZED.match(line):
                answer.normalized = match.group(1)
            elif match := _IN_UTC.match(line):
                utc.append(_seconds(match.group(1)))
            elif (match := _ELAPSE.match(line)) and match.group(2) == "UTC":
                local.append(_seconds(match.group(1)))
        answer.elapses = tuple(utc if utc else local)
    return answers


def ours(expression: str, zone: str, base: int, iterations: int) -> Answer:
    """Our answer, iterated as systemd-analyze iterates (each from the one before)."""
    try:
        spec = parse_calendar(expression, zone)
    except CalendarError:
        return Answer(refused=True)
    elapses: list[int] = []
    t = base * USEC_PER_SEC
    for _ in range(iterations):
        found = next_elapse(spec, resolve_zone(zone), t)
        if found is None:
            break
        elapses.append(found // USEC_PER_SEC)
        t = found
    return Answer(refused=False, normalized=str(spec), elapses=tuple(elapses))
