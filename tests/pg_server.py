"""A throwaway PostgreSQL server for the tests and benchmarks: a real one, never a mock.

`start()` runs Debian's ``initdb`` and ``pg_ctl`` (``/usr/lib/postgresql/*/bin`` or on PATH)
in a temporary directory as the unprivileged user ``postgres`` when run as root (PostgreSQL
refuses root), listening on 127.0.0.1 on a free port (logins with the password `PASSWORD`)
with its unix socket in that directory.
``fsync=off`` by default (the tests need speed, not durability); the benchmarks ask for it on.
`stop()` stops the server and deletes the directory. Missing binaries are an error saying how
to get them (``make test`` installs Debian's ``postgresql``).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PgServer", "find_bindir", "start"]

USER = "postgres"
# The superuser's password: TCP logins need it (scram-sha-256), so a wrong one is refused as
# a real server refuses it; the unix socket in the directory trusts the local user.
PASSWORD = "pg-test-secret"


def find_bindir() -> Path:
    """The directory of ``initdb`` and ``pg_ctl``; a RuntimeError if there is none."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if found:
        return Path(found[0]).parent
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    raise RuntimeError(
        "PostgreSQL's initdb and pg_ctl are not installed (looked in /usr/lib/postgresql/*/bin "
        "and on PATH): `make test` installs them (apt-get install -y postgresql)"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", USER, "--", *argv]
    return ["setpriv", "--reuid", USER, "--regid", USER, "--init-groups", *argv]


class PgServer:
    """A running throwaway server (see the module's docstring)."""

    def __init__(self, bindir: Path, root: Path, port: int) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.port = port
        self.options = ""  # the server's `postgres` options, for `resume`
        self._schemas = 0

    def url(self, database: str = "postgres", *, user: str = USER, password: str = PASSWORD) -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://{user}{secret}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> list[tuple[object, ...]]:
        """Run `sql` as the superuser (autocommit); the rows it returns, if any."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(sql.encode())
            return list(cur.fetchall()) if cur.description else []

    def fresh_schema_url(self) -> str:
        """The URL of a new, empty schema (the search path of the URL's connections)."""
        self._schemas += 1
        name = f"s{os.getpid()}_{self._schemas}"
        self.execute(f"CREATE SCHEMA {name}")
        return f"{self.url()}?options=-csearch_path%3D{name}"

    def halt(self) -> None:
        """Stop the server at once (``pg_ctl stop -m immediate``: a crash, as far as its
        clients can tell), keeping its data for `resume`."""
        subprocess.run(
            _as_user(
                [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]
            ),
            capture_output=True,
            timeout=60,
        )

    def resume(self) -> None:
        """Start the server `halt` stopped again, on the same port and data."""
        _pg_ctl_start(self)

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)


def start(*, fsync: bool = False) -> PgServer:
    """Start a throwaway server (see the module's docstring)."""
    bindir = find_bindir()
    root = Path(tempfile.mkdtemp(prefix="jobscheduler-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, USER, USER)
    os.chmod(root, 0o755)
    pwfile = root / "pwfile"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(pwfile, USER, USER)
    try:
        subprocess.run(
            _as_user(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(root / "data"),
                    "-U",
                    USER,
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        # The port was free when picked, but another process (a parallel test worker, another
        # server starting) may bind it first: then the server starts on another free port.
        for attempt in range(1, 4):
            server = PgServer(bindir, root, _free_port())
            server.options = (
                f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200"
                + ("" if fsync else " -c fsync=off -c full_page_writes=off")
            )
            try:
                _pg_ctl_start(server)
                return server
            except subprocess.CalledProcessError:
                if attempt == 3 or "Address already in use" not in _log_end(root):
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")
    except subprocess.CalledProcessError as exc:
        detail = _log_end(root)
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(
            f"could not start PostgreSQL ({exc.cmd[0]}): {exc.stderr!r} {detail}"
        ) from None


def _log_end(root: Path) -> str:
    """The end of the server's log ('' before it wrote one)."""
    log = root / "server.log"
    return log.read_text(errors="replace")[-2000:] if log.exists() else ""


def _pg_ctl_start(server: PgServer) -> None:
    subprocess.run(
        _as_user(
            [
                str(server.bindir / "pg_ctl"),
                "-D",
                str(server.data),
                "-o",
                server.options,
                "-l",
                str(server.root / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
        timeout=90,
    )
