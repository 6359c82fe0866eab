"""Settings changed while a broker runs (mqadmin updateBrokerConfig), kept in its store so every
process of the group, and every later boot, runs with them: ``config/brokerConfig.json``, field
path -> value (``store.file_reserved_time_ms``: 3600000). The broker writes it and then bumps
``control.config_version``; a worker that uses such a setting re-reads the file when that moves."""

from __future__ import annotations

import dataclasses

from rocketbox.cluster.json_files import read_json, write_json
from rocketbox.cluster.shm import paths

FILE_NAME = "brokerConfig"


def read_live(store_dir: str) -> dict:
    return read_json(paths.config_path(store_dir, FILE_NAME), {}) or {}


def write_live(store_dir: str, values: dict) -> None:
    write_json(paths.config_path(store_dir, FILE_NAME), values)


def with_values(cfg, values: dict):
    """A copy of ``cfg`` (a BrokerConfig, or a StoreConfig for ``store.`` paths only) with ``values``."""
    store_values = {path[len("store."):]: v for path, v in values.items() if path.startswith("store.")}
    if not hasattr(cfg, "store"):
        return dataclasses.replace(cfg, **store_values)
    own = {path: v for path, v in values.items() if not path.startswith("store.")}
    return dataclasses.replace(cfg, store=dataclasses.replace(cfg.store, **store_values), **own)
