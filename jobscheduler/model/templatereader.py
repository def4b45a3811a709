"""Reading alert templates: the one reader for the file, the API and the alerts.

A ``messages:`` entry names its body as inline text (``template``), a file
(``template_file``), or neither (the ``email:`` section's default template). The file reader
(`jobscheduler.config`), the checks of a definition added through the API, and the e-mail
handlers all get their compiled template from one `TemplateReader`, so they agree on what a
name means (``~`` is the home directory, a relative name is relative to the configuration
file's folder) and a template is read and compiled once, when its definition is read.

A `TemplateReader` remembers what it read until `refresh` (the store calls it when it reads
the file again: `reload`, `start` after `stop`), so an edit of a template file takes effect
then, like an edit of the configuration file. It keeps at most `MAX_REMEMBERED` templates;
past that it forgets them all and reads again on demand.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .jobparts import Message
from .templateerror import TemplateError

if TYPE_CHECKING:
    import jinja2

    from .emailconfig import EmailConfiguration

__all__ = [
    "MAX_TEMPLATE_BYTES",
    "AlertTemplate",
    "TemplateError",
    "TemplateReader",
    "compiled_template",
    "read_template_file",
]

MAX_TEMPLATE_BYTES = 1024 * 1024
MAX_REMEMBERED = 4096
DEFAULT_TEMPLATE_NAME = "email default_template"


@functools.lru_cache(maxsize=2048)
def compiled_template(source: str, name: str) -> jinja2.Template:
    """`compile_template`, remembered: identical templates share one compiled object.
    Jinja2 is imported here, by the first template compiled, not with the reader: a command
    that reads a file without templates (``jobscheduler validate``) never loads it."""
    from .templates import compile_template

    return compile_template(source, name)


def read_template_file(name: str, base_dir: Path) -> tuple[Path, str]:
    """Read a template file named in the configuration: ``~`` is expanded, then a relative
    name is relative to `base_dir` (the configuration file's directory). Returns the path and
    the text; raises ValueError saying why it cannot be used (missing, not a file, unreadable,
    over 1 MiB, not UTF-8)."""
    path = Path(name).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    try:
        if not path.is_file():
            raise ValueError(f"template file {str(path)!r} does not exist or is not a file")
        with path.open("rb") as fh:
            data = fh.read(MAX_TEMPLATE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read template file {str(path)!r}: {exc.strerror}") from None
    if len(data) > MAX_TEMPLATE_BYTES:
        raise ValueError(f"template file {str(path)!r} is larger than 1 MiB")
    try:
        return path, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"template file {str(path)!r} is not UTF-8 text: {exc.reason}") from None


@dataclass(frozen=True, slots=True)
class AlertTemplate:
    """A compiled alert template, and where it came from.

    `file` is the template file's path (None for inline text or the default template);
    `source` is its text.
    """

    template: jinja2.Template
    source: str
    file: str | None = None


class TemplateReader:
    """Reads and compiles the templates of ``messages:`` for one definition store.

    `base_dir` is where relative template files are looked up. Thread-safe. Failures are not
    remembered: a template file created later is found on the next call.
    """

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self._lock = threading.Lock()
        self._files: dict[str, AlertTemplate] = {}

    def file(self, name: str) -> AlertTemplate:
        """The template file `name`, read and compiled the first time it is asked for.

        Raises ValueError (it cannot be read) or `TemplateError` (it does not compile; the
        message names the file and the line)."""
        with self._lock:
            known = self._files.get(name)
        if known is not None:
            return known
        path, source = read_template_file(name, self.base_dir)
        loaded = AlertTemplate(compiled_template(source, str(path)), source, str(path))
        with self._lock:
            if len(self._files) >= MAX_REMEMBERED:
                self._files.clear()
            self._files[name] = loaded
        return loaded

    @staticmethod
    def inline(source: str, name: str) -> AlertTemplate:
        """Inline template text; `name` (its key) names it in a `TemplateError`."""
        return AlertTemplate(compiled_template(source, name), source)

    def message(self, message: Message, key: str) -> AlertTemplate | None:
        """The template of one alert (`key` is its ``messages.<event>``): its inline text or
        its file; None when it uses the default template (see `default`). Raises as `file`."""
        if message.template is not None:
            return self.inline(message.template, f"{key}.template")
        if message.template_file is not None:
            return self.file(message.template_file)
        return None

    @staticmethod
    def default(email: EmailConfiguration | None) -> AlertTemplate:
        """The default template of `email` (the built-in one when None: the field's default,
        read from the class, whose module a file without `email:` does not otherwise need)."""
        if email is None:
            from .emailconfig import EmailConfiguration

            source = EmailConfiguration.default_template
        else:
            source = email.default_template
        return AlertTemplate(compiled_template(source, DEFAULT_TEMPLATE_NAME), source)

    def refresh(self) -> None:
        """Forget every template file read: the next use reads it again."""
        with self._lock:
            self._files.clear()
