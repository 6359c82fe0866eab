"""Small helpers for tests of the store (tiny sizes, messages, a whole-store harness).

Test support only; production code never imports it.
"""

from __future__ import annotations


from rocketbox.cluster.config import StoreConfig
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message.properties import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, encode_properties
from rocketbox.cluster.shm import durable
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.flush import FlushService
from rocketbox.cluster.shm.paths import control_path
from rocketbox.cluster.shm.reput import ReputService
from rocketbox.cluster.shm.store import MessageStore, MessageToStore

BORN_HOST = pack_host("10.0.0.7", 40001)
STORE_HOST = pack_host("10.0.0.1", 10911)


def tiny_config(store_dir: str, **overrides) -> StoreConfig:
    """64 KiB CommitLog segments, 64-entry ConsumeQueue files, 64 slots / 256 index entries."""
    values = dict(store_dir=str(store_dir), commitlog_file_size_bytes=64 * 1024,
                  consumequeue_entries_per_file=64, index_slot_count=64, index_entry_count_max=256,
                  message_size_bytes_max=32 * 1024, disk_free_bytes_min=0, preheat_enabled=False)
    values.update(overrides)
    return StoreConfig(**values)


def message(body: bytes = b"hello", *, tags: str | None = None, keys: str | None = None,
            uniq: str | None = None, sys_flag: int = 0, born_ms: int = 1_700_000_000_000,
            flag: int = 0, **extra_props: str) -> MessageToStore:
    props = {}
    if tags is not None:
        props[PROPERTY_TAGS] = tags
    if keys is not None:
        props[PROPERTY_KEYS] = keys
    if uniq is not None:
        props[PROPERTY_UNIQ_KEY] = uniq
    props.update(extra_props)
    return MessageToStore(body=body, flag=flag, properties=encode_properties(props),
                          sys_flag=sys_flag, born_timestamp_ms=born_ms, born_host=BORN_HOST)


class Harness:
    """A broker store plus flush and reput services in one process, as the workers would run."""

    def __init__(self, cfg: StoreConfig):
        self.cfg = cfg
        durable.makedirs(cfg.store_dir)
        self.control = ControlBlock(control_path(cfg.store_dir))
        self.store = MessageStore(cfg, self.control, store_host=STORE_HOST)
        self.report = self.store.recover()
        self.reput = ReputService(cfg, self.control)
        self.flush = FlushService(cfg, self.control)

    def dispatch_all(self) -> None:
        self.store.write_queue_entries()   # the broker's, after its appends
        if self.reput.durable_reads:   # sync flush: only flushed records are readable and indexed
            self.flush.step()
        while self.reput.step(1000).count:
            pass

    def close(self, *, clean: bool = False) -> None:
        """Stop; ``clean=False`` is a crash as far as recovery can tell (abort stays)."""
        if clean:
            self.store.mark_clean_shutdown()
        self.reput.close()
        self.flush.close()
        self.store.close()
        self.control.close()
