"""The configuration file as the store of definitions: safe writes, shared by processes.

Every change (`add_jobs`, `modify_job`, `remove_job`, `add_group`, `modify_group`,
`remove_group`, `set_email`) is one read-modify-write of the file:

1. take an exclusive ``flock`` on ``<config>.lock`` (processes and threads queue up; a lock
   held by a crashed process is released by the kernel);
2. remove temporary files left by a writer that crashed;
3. read the file; if it differs (SHA-256) from what this store last read or wrote, someone
   edited it: parse it (a broken file is refused: nothing is written until it is fixed) and
   refuse with `ConflictError` when a job or group this change touches was changed there too;
4. apply the change on top of the file's current content and check it;
5. edit the text in place, keeping untouched definitions and comments verbatim
   (`config_splice`), verify that the new text reads back as the new catalog (else write the
   whole file anew, and say so in the log);
6. write a temporary file in the same directory, flush, fsync, give it the old file's mode,
   ``os.replace`` it over the file, fsync the directory.

A reader therefore sees the old file or the new one, never a mix, whenever a process dies.
`FileStore` is the file's `DefinitionStore` (`config.base`); ``ConfigStore(path)`` makes one,
or, for ``path=None``, a `MemoryStore` (memory only, the same checks).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, overload

from ..errors import ConfigFileError, ConflictError, InvalidJobError, Problem
from ..model.catalog import Catalog
from ..model.emailconfig import EmailConfiguration
from ..model.job import Job
from ..model.templatereader import TemplateReader
from .checks import check_definitions
from .dump import dump_config, email_entries, group_entries, job_entries, same_entries
from .filelock import exclusive
from .load import Document, parse_document, read_config_text
from .memory import MemoryStore
from .reader import JobCache
from .splice import splice
from .writes import CatalogWrites

__all__ = ["ConfigStore", "FileStore", "same_catalog"]

_log = logging.getLogger("jobscheduler.config")


def _how_changed(before: object, now: object) -> str:
    if before is None:
        return "was added to the file by someone else"
    if now is None:
        return "was removed from the file"
    return "was changed in the file"


def _same_email(a: EmailConfiguration | None, b: EmailConfiguration | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (
        email_entries(a) == email_entries(b) and a.default_template == b.default_template
    )


def same_catalog(a: Catalog, b: Catalog) -> bool:
    """Whether `a` and `b` define the same jobs and groups, in the same order, and email."""
    return (
        list(a.jobs) == list(b.jobs)
        and list(a.groups) == list(b.groups)
        and all(same_entries(a.jobs[n], b.jobs[n], job_entries) for n in a.jobs)
        and all(same_entries(a.groups[n], b.groups[n], group_entries) for n in a.groups)
        and _same_email(a.email, b.email)
    )


def _umask() -> int:
    """The process umask, read without changing it (os.umask would, for every thread)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot open a directory
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@overload
def ConfigStore(path: None) -> MemoryStore: ...


@overload
def ConfigStore(path: str | os.PathLike[str]) -> FileStore: ...


def ConfigStore(path: str | os.PathLike[str] | None) -> MemoryStore | FileStore:
    """The definitions store for `path`: a `FileStore` of that YAML file, or, for None, a
    `MemoryStore` (memory only, the same checks)."""
    return MemoryStore() if path is None else FileStore(path)


class FileStore(CatalogWrites):
    """Definitions kept in a YAML file: the file's `DefinitionStore`.

    `read()` loads the file; `catalog` is the catalog last read or written. Each change returns
    the new catalog, which includes edits other processes or people made to the file since it
    was last read (when they do not touch the same job or group; `merged` then says so). A
    missing file is an empty catalog; the first change creates it.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path: Path = Path(path)
        self.base_dir: Path = self.path.absolute().parent
        """Where relative template files are looked up: the file's directory."""
        self.templates = TemplateReader(self.base_dir)
        self.merged = False
        """Whether the last write brought in edits made to the file since it was read."""
        self._mutex = threading.RLock()
        self._catalog = Catalog()
        self._doc: Document | None = None
        self._digest: bytes | None = None
        self._stat: tuple[int, int, int] | None = None
        self._cache: JobCache = {}
        self._locked_target: Path | None = None  # the resolved file, while its lock is held

    @property
    def lock_path(self) -> Path:
        """The sidecar file locked by every write: ``<config>.lock`` beside the file the path
        resolves to (through symbolic links), whatever path reaches it."""
        return Path(f"{os.path.realpath(self.path)}.lock")

    @property
    def catalog(self) -> Catalog:
        """The catalog last read or written."""
        return self._catalog

    # -- reading -------------------------------------------------------------------------

    def read(self) -> Catalog:
        """(Re)load the file and remember it. A missing file is an empty catalog.

        A broken file raises `ConfigFileError` and leaves `catalog` as it was. Template files
        are read again too (a new reader: the old one stays with the old catalog on error).
        """
        with self._mutex:
            text = self._read_text()
            templates, self.templates = self.templates, TemplateReader(self.base_dir)
            fresh: JobCache = {}  # every job read again, and remembered for the next write
            try:
                doc = None if text is None else self._parse(text, cache=fresh)
            except BaseException:
                self.templates = templates
                raise
            self._cache = fresh
            self._remember(text, doc)
            return self._catalog

    def changed_on_disk(self) -> bool:
        """Whether the file differs from what this store last read or wrote."""
        with self._mutex:
            if self._file_stat() == self._stat and self._stat is not None:
                return False
            text = self._read_text()
            return self._hash(text) != self._digest

    # -- changes -------------------------------------------------------------------------

    def add_jobs(self, jobs: Iterable[Job]) -> Catalog:
        """Add `jobs` with one write (they may depend on each other)."""
        batch = list(jobs)
        names = [job.name for job in batch if isinstance(job, Job)]
        return self._update(lambda c: c.add_jobs(batch), jobs=names)

    def _update(
        self,
        change: Callable[[Catalog], Catalog],
        *,
        jobs: Iterable[str] = (),
        groups: Iterable[str] = (),
        email: bool = False,
    ) -> Catalog:
        jobs, groups = list(jobs), list(groups)
        with self._mutex:
            self.merged = False  # until a write succeeds with edits made elsewhere
            with exclusive(self.path) as self._locked_target:
                self._remove_stale_temp_files()
                text = self._read_text()
                doc = self._doc
                base = self._catalog
                merged = False
                if self._hash(text) != self._digest or (text is not None and doc is None):
                    doc = None if text is None else self._parse(text, edited=True)
                    base = Catalog() if doc is None else doc.catalog
                    self._refuse_conflicts(base, doc, jobs, groups, email)
                    merged = True
                new = change(base)
                check_definitions(new, jobs, groups, email, self.templates)
                new_text, new_doc = self._render(doc, new)
                if new_text != text:
                    self._write(new_text)
                self._remember(new_text, new_doc)
                self.merged = merged
                return self._catalog

    def _refuse_conflicts(
        self,
        disk: Catalog,
        doc: Document | None,
        jobs: list[str],
        groups: list[str],
        email: bool,
    ) -> None:
        mine = self._catalog
        problems: list[Problem] = []
        kinds: list[tuple[str, list[str], Mapping[str, Any], Mapping[str, Any], Any]] = [
            ("job", jobs, mine.jobs, disk.jobs, job_entries),
            ("group", groups, mine.groups, disk.groups, group_entries),
        ]
        for kind, names, before_map, now_map, entries in kinds:
            for name in names:
                before, now = before_map.get(name), now_map.get(name)
                if not same_entries(before, now, entries):
                    problems.append(self._conflict(kind, name, _how_changed(before, now), doc))
        if email and not _same_email(mine.email, disk.email):
            problems.append(
                Problem(
                    "the email section was changed in the file since this process last read "
                    "it; reload() to see that version, then apply the change again",
                    str(self.path),
                    None if doc is None else doc.email_line,
                    key="email",
                )
            )
        if problems:
            raise ConflictError(problems)

    def _conflict(self, kind: str, name: str, what: str, doc: Document | None) -> Problem:
        """The problem of a job or group (`kind`) that `what` in the file."""
        line = None
        if doc is not None:
            lines = doc.job_lines if kind == "job" else doc.group_lines
            line = lines.get(name, {}).get("")
        return Problem(
            f"{what} since this process last read it; reload() to see that "
            "version, then apply the change again",
            str(self.path),
            line,
            job=name if kind == "job" else None,
            group=name if kind == "group" else None,
        )

    def _render(self, doc: Document | None, new: Catalog) -> tuple[str, Document]:
        """The text to write for `new`, checked by reading it back."""
        if doc is not None:
            try:
                text = splice(doc, new)
            except Exception:  # a bug there must not block writes: rewrite the file instead
                _log.exception("could not edit %s in place", self.path)
                text = None
            if text is not None:
                try:
                    spliced = self._parse(text)
                except ConfigFileError:
                    spliced = None
                if spliced is not None and same_catalog(spliced.catalog, new):
                    return text, spliced
            _log.warning("%s: rewriting the whole file (its comments are not kept)", self.path)
        text = dump_config(new)
        written = self._parse(text)
        if not same_catalog(written.catalog, new):
            raise InvalidJobError(
                Problem("the definitions cannot be written to the file faithfully", str(self.path))
            )
        return text, written

    # -- files ---------------------------------------------------------------------------

    def _parse(self, text: str, *, edited: bool = False, cache: JobCache | None = None) -> Document:
        """Parse `text`, reusing the jobs whose text did not change since the last parse
        (`cache`: the store's own unless given)."""
        try:
            return parse_document(
                text,
                filename=str(self.path),
                base_dir=self.base_dir,
                cache=self._cache if cache is None else cache,
                templates=self.templates,
            )
        except ConfigFileError as exc:
            if not edited:
                raise
            note = Problem(
                "the file was edited and has errors: nothing is written to it until they are fixed",
                str(self.path),
            )
            raise ConfigFileError([note, *exc.problems]) from None

    def _read_text(self) -> str | None:
        try:
            return read_config_text(self.path)
        except FileNotFoundError:
            return None

    def _file_stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    @staticmethod
    def _hash(text: str | None) -> bytes | None:
        return (
            None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        )

    def _remember(self, text: str | None, doc: Document | None) -> None:
        self._doc = doc
        self._catalog = Catalog() if doc is None else doc.catalog
        self._digest = self._hash(text)
        self._stat = self._file_stat()

    def _target(self) -> Path:
        """The file the lock is held on: the path resolved when the lock was taken (a
        symbolic link is written through, not over)."""
        return self._locked_target or Path(os.path.realpath(self.path))

    def _remove_stale_temp_files(self) -> None:
        """Temporary files of writers that died (only a lock holder creates them)."""
        target = self._target()
        pattern = re.compile(rf"^\.{re.escape(target.name)}\.tmp-[A-Za-z0-9_]+$")
        with contextlib.suppress(OSError):
            for entry in os.scandir(target.parent):
                if pattern.match(entry.name):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                        _log.info("removed %s, left by a writer that died", entry.path)

    def _write(self, text: str) -> None:
        target = self._target()
        try:
            try:
                old = os.stat(target)
            except FileNotFoundError:
                old = None
            fd, temp = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(text.encode("utf-8"))
                    fh.flush()
                    if old is None:
                        os.fchmod(fh.fileno(), 0o666 & ~_umask())
                    else:
                        os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))
                        if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                            with contextlib.suppress(OSError):
                                os.fchown(fh.fileno(), old.st_uid, old.st_gid)
                    os.fsync(fh.fileno())
                os.replace(temp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
            _fsync_dir(target.parent)
        except OSError as exc:
            raise ConfigFileError(
                Problem(
                    f"cannot write the file ({exc.strerror or exc}); it was left as it was",
                    str(self.path),
                )
            ) from None
