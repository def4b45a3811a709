"""One case of the cluster benchmark (bench/cluster.py), run in its own fresh process.

A case starts its node processes (`bench._cluster_node`) on a new database of the shared
PostgreSQL server, waits for the first slot ``t0``, samples CPU, kills a node with SIGKILL
halfway when the case asks, samples again at the end of the slots, lets the nodes finish
and stop, then reads what every node recorded and measures:

- ``runs_per_s``: runs that started within the slots' window [t0, t0 + slots) over its length;
- ``late_p50_ms`` / ``late_p99_ms`` / ``late_max_ms``: start minus slot of every run;
- ``duplicates``: runs of a (job, slot) beyond its first, across all nodes (the killed one's
  runs included: they happened);
- ``missed``: (job, slot) pairs of the window that no node started before the nodes stopped
  (``grace`` seconds after the last slot), ``missed_after_kill`` those from the kill on,
  ``missed_next_ran`` those whose job's next slot ran (merged into a later run by a node
  that was behind: jobscheduler coalesces a slot into its job's run still queued,
  APScheduler 4 with ``coalesce`` latest);
- ``node_cpu_s``: CPU time (user + system) of the node processes over the window (the
  killed node's up to its kill), from ``/proc`` through psutil;
- ``db_cpu_s``: CPU time of the PostgreSQL server over the window: every process under the
  postmaster plus the postmaster's reaped children (backends that ended count too);
- ``store_states`` (jobscheduler on PostgreSQL): its store's runs by state after the nodes
  stopped (``running`` ones: claimed by the killed node, never finished);
- the limits cases (``run_s``: each run lasts that long, more than the interval):
  ``overlapping``, runs that started while a run of their job had not ended (from the runs'
  own start and end); ``skipped``, the slots the store recorded ``skipped``; ``missed`` then
  counts the slots neither run nor recorded skipped.

The idle case runs one node of each system, each on its own database, with 1,000 daily jobs
due tomorrow, and counts each database's transactions (``pg_stat_database``: ``xact_commit``
+ ``xact_rollback``) over a window after a settling time, read from another database so the
reading is not counted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import _cluster_jobs

REPO = Path(__file__).resolve().parent.parent
NODE = str(REPO / "bench" / "_cluster_node.py")

Case = dict[str, Any]


def _pg(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql.encode())
        return list(cur.fetchall()) if cur.description else []


def _database(server_url: str, name: str) -> str:
    """A new empty database `name` on the server; its URL."""
    _pg(server_url, f"CREATE DATABASE {name}")
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{name}"


def _env(src: str | None) -> dict[str, str] | None:
    """The environment of a jobscheduler process importing the package from `src` (another
    commit's ``jobscheduler/``, ``--extra-src``) instead of this tree's."""
    if not src:
        return None
    return {**os.environ, "BENCH_JOBSCHEDULER_SRC": src}


def _js_store(src: str | None, url: str, code: str) -> str:
    """Run `code` (``store`` is a PostgresStateStore on `url`) in a process importing
    jobscheduler from `src` (or this tree); what it prints. A process of its own: another
    commit's store may have a newer schema, which this tree's store refuses to open."""
    program = (
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "from bench._cluster_node import use_src\nuse_src()\n"
        "from jobscheduler.state.postgres import PostgresStateStore\n"
        f"store = PostgresStateStore({url!r})\ntry:\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "finally:\n    store.close()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, env=_env(src), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"jobscheduler's store on {url}: {proc.stderr[-3000:]}")
    return proc.stdout


def _python(case: Case) -> str:
    return str(case["aps_python"]) if case["system"] == "apscheduler4" else sys.executable


def _cpu(pid: int) -> float:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return float(t.user + t.system)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return float("nan")


def db_cpu(postmaster: int) -> float:
    """CPU seconds of the server so far: the postmaster with its reaped children, plus every
    live process under it."""
    import psutil

    main = psutil.Process(postmaster)
    t = main.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in main.children(recursive=True):
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.NoSuchProcess:
            pass  # ended between the listing and the reading: counted in children_* next time
    return float(total)


class Nodes:
    """The node processes of a case, each reporting ``ready`` on its stdout."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.ready: list[threading.Event] = []
        self.errors: list[str] = []
        self.packages: set[str] = set()  # where each jobscheduler node imported it from

    def start(
        self, python: str, cfg: dict[str, Any], src: str | None = None
    ) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [python, NODE, json.dumps(cfg)],
            cwd=REPO,
            env=_env(src),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready = threading.Event()
        self.procs.append(proc)
        self.ready.append(ready)
        threading.Thread(target=self._read, args=(proc, ready), daemon=True).start()
        return proc

    def _read(self, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        for line in proc.stdout:
            if line.startswith("ready"):
                if line.split(maxsplit=1)[1:]:
                    self.packages.add(line.split(maxsplit=1)[1].strip())
                ready.set()
        err = proc.stderr.read()
        if err.strip():
            self.errors.append(err[-2000:])

    def wait_ready(self, deadline: float) -> bool:
        return all(r.wait(max(0.0, deadline - time.time())) for r in self.ready)

    def wait(self, timeout: float) -> list[int | None]:
        codes: list[int | None] = []
        end = time.time() + timeout
        for proc in self.procs:
            try:
                codes.append(proc.wait(max(0.1, end - time.time())))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append(None)
        return codes


def _setup_aps(case: Case, url: str, t0: float, slots: int, daily: bool) -> None:
    cfg = {
        "system": "apscheduler4",
        "role": "setup",
        "name": "setup",
        "url": url,
        "jobs": case["jobs"],
        "t0": t0,
        "slots": slots,
        "daily": daily,
        "until": 0,
        "out": None,
    }
    proc = subprocess.run(
        [_python(case), NODE, json.dumps(cfg)], cwd=REPO, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"APScheduler 4 setup failed: {proc.stderr[-3000:]}")


def _sleep_until(when: float) -> None:
    while (left := when - time.time()) > 0:
        time.sleep(min(left, 0.5))


def run_slots(case: Case) -> dict[str, Any]:
    """A case of `jobs` jobs every second for `slots` seconds on `nodes` nodes."""
    system, nodes, slots = case["system"], case["nodes"], case["slots"]
    url = None
    if case["store"] == "postgres":
        url = _database(case["pg"], f"c{os.getpid()}_{time.time_ns() % 10**9}")
        if system == "jobscheduler":  # the schema once, before the nodes race to open it
            _js_store(case.get("src"), url, "pass")
    setup_s = 0.0
    t0 = float(int(time.time()) + case["lead"])
    if system == "apscheduler4":
        t0 += case["setup_lead"]
        started = time.time()
        _setup_aps(case, str(url), t0, slots, False)
        setup_s = time.time() - started
    end = t0 + slots
    until = end + case["grace"]
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
        if case["store"] == "sqlite":  # a file of the case's own; its CPU is the nodes'
            url = f"sqlite:///{tmp}/state.db"
        group = Nodes()
        outs = []
        for n in range(nodes):
            out = f"{tmp}/n{n}.txt"
            outs.append(out)
            cfg = {
                "system": system,
                "role": "node",
                "name": f"n{n}",
                "url": url,
                "jobs": case["jobs"],
                "t0": t0,
                "slots": slots,
                "until": until,
                "out": out,
                "run_s": case.get("run_s"),
                "limit": case.get("limit", False),
            }
            group.start(_python(case), cfg, case.get("src"))
        all_ready = group.wait_ready(t0 - 0.2)
        ready_margin = t0 - time.time()
        pids = [p.pid for p in group.procs]
        _sleep_until(t0)
        cpu0 = [_cpu(pid) for pid in pids]
        db0 = db_cpu(case["postmaster"])
        cpu1 = [float("nan")] * nodes
        kill_at = None
        if case.get("kill"):
            kill_at = t0 + slots // 2 + 0.01  # 10 ms into a slot's burst: claims in flight
            _sleep_until(kill_at)
            victim = nodes - 1
            cpu1[victim] = _cpu(pids[victim])
            os.kill(pids[victim], signal.SIGKILL)
        _sleep_until(end)
        for n, pid in enumerate(pids):
            if cpu1[n] != cpu1[n]:  # NaN: not killed, read it now
                cpu1[n] = _cpu(pid)
        db1 = db_cpu(case["postmaster"])
        codes = group.wait(case["grace"] + 60)
        spans = [_read_spans(out) for out in outs] if case.get("run_s") else None
        runs = (
            [_read(out) for out in outs]
            if spans is None
            else [[(key, slot, started) for key, slot, started, _ in node] for node in spans]
        )
    measure = measure_runs(runs, case["jobs"], t0, slots, kill_at)
    if system == "jobscheduler" and case["store"] == "postgres":
        measure["store_states"] = _store_states(case.get("src"), url, case["jobs"] * slots)
    if spans is not None:
        # The limits cases: runs of one job at once, from the runs' own start and end; the
        # slots the store recorded skipped; missed: neither run nor recorded skipped.
        measure["overlapping"] = overlapping_runs([r for node in spans for r in node])
        skipped = measure.get("store_states", {}).get("skipped", 0)
        measure["skipped"] = skipped
        measure["missed"] = max(0, measure["missed"] - skipped)
    measure.update(
        node_cpu_s=sum(b - a for a, b in zip(cpu0, cpu1, strict=True)),
        db_cpu_s=(db1 - db0) if case["store"] == "postgres" else 0.0,
        window_s=float(slots),
        setup_s=setup_s,
        ready_margin_s=ready_margin,
        all_ready=all_ready,
        exit_codes=codes,
        node_errors=group.errors[:2],
        packages=sorted(group.packages),
    )
    measure["node_cpu_pct"] = 100.0 * measure["node_cpu_s"] / slots
    measure["db_cpu_pct"] = 100.0 * measure["db_cpu_s"] / slots
    runs_total = max(1, measure["runs"])
    measure["cpu_us_per_run"] = (measure["node_cpu_s"] + measure["db_cpu_s"]) / runs_total * 1e6
    return measure


def _store_states(src: str | None, url: str, expected: int) -> dict[str, int]:
    """How many runs jobscheduler's store holds in each state once the nodes stopped (a run
    left ``running`` was claimed by a node that died before finishing it; ``abandoned``: a
    live node took it over)."""
    code = (
        "import collections, json\n"
        f"records = store.history(limit={2 * expected + 1000})\n"
        "print(json.dumps(collections.Counter(str(r.state) for r in records)))"
    )
    counts: dict[str, int] = json.loads(_js_store(src, url, code).splitlines()[-1])
    return counts


def _read(path: str) -> list[tuple[int, int, int]]:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [r for r in (_cluster_jobs.parse_line(line) for line in text.splitlines()) if r]


def _read_spans(path: str) -> list[tuple[int, int, int, int]]:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [r for r in (_cluster_jobs.parse_span(line) for line in text.splitlines()) if r]


def overlapping_runs(spans: list[tuple[int, int, int, int]]) -> int:
    """Runs that started while another run of their job (started before them) had not
    ended, from every node's (key, slot_us, started_us, ended_us)."""
    by_job: dict[int, list[tuple[int, int]]] = {}
    for key, _slot, started, ended in spans:
        by_job.setdefault(key, []).append((started, ended))
    count = 0
    for runs in by_job.values():
        runs.sort()
        latest_end = None
        for started, ended in runs:
            if latest_end is not None and started < latest_end:
                count += 1
            latest_end = ended if latest_end is None else max(latest_end, ended)
    return count


def measure_runs(
    runs: list[list[tuple[int, int, int]]],
    jobs: int,
    t0: float,
    slots: int,
    kill_at: float | None = None,
) -> dict[str, Any]:
    """The figures of the module's docstring from each node's (key, slot_us, started_us)."""
    from bench._common import percentile

    first_us = round(t0 * 1_000_000)
    end_us = first_us + slots * 1_000_000
    seen: set[tuple[int, int]] = set()
    late: list[float] = []
    total = in_window = outside = 0
    for node_runs in runs:
        for key, slot, started in node_runs:
            if not (first_us <= slot < end_us and 0 <= key < jobs):
                outside += 1  # not a slot of the window (none expected)
                continue
            total += 1
            seen.add((key, slot))
            late.append((started - slot) / 1000.0)
            if started < end_us:
                in_window += 1
    expected = jobs * slots
    measure: dict[str, Any] = {
        "runs": total,
        "runs_per_s": in_window / slots,
        "unique": len(seen),
        "duplicates": total - len(seen),
        "missed": expected - len(seen),
        "outside": outside,
        "late_p50_ms": percentile(late, 50),
        "late_p99_ms": percentile(late, 99),
        "late_max_ms": max(late) if late else float("nan"),
        "runs_by_node": [len(r) for r in runs],
        # Missed slots whose job's next slot ran: merged into a later run while behind.
        "missed_next_ran": sum(
            1
            for slot in range(first_us, end_us - 1_000_000, 1_000_000)
            for key in range(jobs)
            if (key, slot) not in seen and (key, slot + 1_000_000) in seen
        ),
    }
    if kill_at is not None:
        # The slots from the one the kill fell in.
        after = range(first_us + int(kill_at - t0) * 1_000_000, end_us, 1_000_000)
        measure["missed_after_kill"] = sum(
            1 for slot in after for key in range(jobs) if (key, slot) not in seen
        )
    return measure


def _xacts(server_url: str, names: list[str]) -> dict[str, int]:
    rows = _pg(
        server_url,
        "SELECT pg_stat_clear_snapshot(), datname, xact_commit + xact_rollback "
        "FROM pg_stat_database WHERE datname IN (" + ", ".join(f"'{n}'" for n in names) + ")",
    )
    return {str(r[1]): int(r[2]) for r in rows}


def run_idle(case: Case) -> dict[str, Any]:
    """One idle node of each system, each on its own database: transactions per second."""
    systems = ["jobscheduler"] + (["apscheduler4"] if case.get("aps_python") else [])
    src = case.get("src")
    names = {s: f"idle_{s}_{os.getpid()}_{time.time_ns() % 10**9}" for s in systems}
    urls = {s: _database(case["pg"], names[s]) for s in systems}
    _js_store(src, urls["jobscheduler"], "pass")
    tomorrow = float(int(time.time()) + 86_400)
    if "apscheduler4" in urls:
        _setup_aps({**case, "system": "apscheduler4"}, urls["apscheduler4"], tomorrow, 2, True)
    settle, window = case["settle"], case["window"]
    group = Nodes()
    for s in systems:
        cfg = {
            "system": s,
            "role": "node",
            "name": "idle",
            "url": urls[s],
            "jobs": case["jobs"],
            "t0": tomorrow,
            "slots": 2,
            "daily": True,
            "until": time.time() + 30 + settle + window,
            "out": None,
        }
        if s == "jobscheduler":
            group.start(sys.executable, cfg, src)
        else:
            group.start(case["aps_python"], cfg)
    group.wait_ready(time.time() + 30)
    time.sleep(settle)
    pids = [p.pid for p in group.procs]
    x0 = _xacts(case["pg"], list(names.values()))
    c0 = [_cpu(pid) for pid in pids]
    time.sleep(window)
    x1 = _xacts(case["pg"], list(names.values()))
    c1 = [_cpu(pid) for pid in pids]
    for proc in group.procs:
        proc.send_signal(signal.SIGKILL)  # nothing to wait for: idle nodes record nothing
    group.wait(30)
    out: dict[str, Any] = {"window_s": window, "node_errors": group.errors[:2]}
    for n, s in enumerate(systems):
        out[f"{s}_queries_per_s"] = (x1[names[s]] - x0[names[s]]) / window
        out[f"{s}_cpu_pct"] = 100.0 * (c1[n] - c0[n]) / window
    return out


def run_case(case: Case) -> dict[str, Any]:
    return run_idle(case) if case["kind"] == "idle" else run_slots_once_ready(case)


def run_slots_once_ready(case: Case, tries: int = 3) -> dict[str, Any]:
    """`run_slots`, again with a lead 4 times longer when a node was not ready before the
    first slot (on a loaded machine starting a node can take longer than the lead: such a
    run measures the start-up, not the cluster); at most `tries` runs, the last one kept."""
    lead = case["lead"]
    for _ in range(tries - 1):
        measure = run_slots({**case, "lead": lead})
        if measure["all_ready"]:
            return measure
        lead *= 4
    return run_slots({**case, "lead": lead})
