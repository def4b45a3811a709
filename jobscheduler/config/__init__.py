"""The YAML configuration file: reading, writing, and the store the `Scheduler` writes through.

The format is described in docs/config.md. The pieces:

- `parse_config` / `load_config`: text or file to a checked `Catalog`, every problem reported
  at once with its file, line, job or group, and key (`config_load`, on the safe node reader
  of `config_yaml`);
- `dump_config`: a `Catalog` as stable YAML (`config_dump`);
- `DefinitionStore` (`base`): the store protocol the scheduler codes against; `MemoryStore`
  (`memory`) and `FileStore`: atomic, locked, merging writes that keep a hand-written file's
  comments (`store`, `splice`); `ConfigStore(path)` makes the right one (None: memory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_module

if TYPE_CHECKING:
    from ..model.templatereader import read_template_file
    from .base import DefinitionStore
    from .dump import dump_config
    from .load import load_config, parse_config
    from .memory import MemoryStore
    from .store import ConfigStore, FileStore
    from .yamlnodes import MAX_BYTES, MAX_DEPTH, MAX_NODES

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "ConfigStore",
    "DefinitionStore",
    "FileStore",
    "MemoryStore",
    "dump_config",
    "load_config",
    "parse_config",
    "read_template_file",
]

# Where each public name lives: imported when first used (`lazy_module`).
_WHERE = {
    "ConfigStore": ".store",
    "DefinitionStore": ".base",
    "FileStore": ".store",
    "MAX_BYTES": ".yamlnodes",
    "MAX_DEPTH": ".yamlnodes",
    "MAX_NODES": ".yamlnodes",
    "MemoryStore": ".memory",
    "dump_config": ".dump",
    "load_config": ".load",
    "parse_config": ".load",
    "read_template_file": "..model.templatereader",
}
__getattr__, __dir__ = lazy_module(__name__, globals(), _WHERE)
