"""The NameServer's KV config (RocketMQ's KVConfigManager): namespaces of key -> value strings.

mqadmin updateKvConfig / deleteKvConfig and updateOrderConf (namespace ``ORDER_TOPIC_CONFIG``, a
topic's ``brokerName:queueNums;...`` that routes carry as ``orderTopicConf`` when the NameServer's
``orderMessageEnable`` is on) go through PUT_KV_CONFIG (100), GET_KV_CONFIG (101),
DELETE_KV_CONFIG (102) and GET_KVLIST_BY_NAMESPACE (219). Each NameServer keeps its own table, as
RocketMQ's do (the tools write to every NameServer), in ``<data dir>/kvConfig.json``: RocketMQ's
file, ``{"configTable":{namespace:{key:value}}}``, so either can read the other's. Rewritten
whole and atomically after every change, as RocketMQ does; a NameServer without a data dir keeps
it in memory only.

Bounds (a request may not grow the table without limit): names up to 255 characters, values up
to 64 KiB, at most 10,000 items in all; beyond them the request is refused with the reason.
"""

from __future__ import annotations

import json
import logging
import os

from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals, to_json_bytes
from rocketbox.cluster.shm.durable import atomic_write
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)

FILE_NAME = "kvConfig.json"
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
NAME_CHARS_MAX = 255
VALUE_BYTES_MAX = 64 * 1024
ITEMS_MAX = 10_000


# ---------------------------------------------------------------- the file (pure)

def encode_kv_file(table: dict[str, dict[str, str]]) -> bytes:
    """RocketMQ's KVConfigSerializeWrapper as it writes it: compact JSON."""
    return json.dumps({"configTable": table}, separators=(",", ":"), ensure_ascii=False).encode()


def decode_kv_file(data: bytes) -> dict[str, dict[str, str]]:
    """The table of a kvConfig.json; ValueError when it is not one."""
    raw = json.loads(data or b"{}")
    table = raw.get("configTable") if isinstance(raw, dict) else None
    if table is None:
        return {}
    if not isinstance(table, dict) or not all(isinstance(kv, dict) for kv in table.values()):
        raise ValueError("configTable must map each namespace to an object of key -> value")
    return {str(ns): {str(k): "" if v is None else str(v) for k, v in kv.items()} for ns, kv in table.items()}


# ---------------------------------------------------------------- the table

class KvConfig:
    """The table, persisted at ``path`` ("" keeps it in memory)."""

    def __init__(self, path: str = ""):
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        if path and os.path.exists(path):
            try:
                with open(path, "rb") as f:
                    self.table = decode_kv_file(f.read())
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                # RocketMQ logs and starts empty too; the file is kept for whoever wants to mend it.
                log.error("KV config %s not loaded, starting empty: %s", path, exc)

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        return self.table.get(namespace)

    def put(self, namespace: str, key: str, value: str) -> None:
        for kind, name in (("namespace", namespace), ("key", key)):
            if not name or len(name) > NAME_CHARS_MAX:
                raise ProtocolError(f"a KV config {kind} must have 1 to {NAME_CHARS_MAX} characters")
        if len(value.encode()) > VALUE_BYTES_MAX:
            raise ProtocolError(f"a KV config value may have at most {VALUE_BYTES_MAX} bytes")
        if self.get(namespace, key) is None and sum(map(len, self.table.values())) >= ITEMS_MAX:
            raise ProtocolError(f"the KV config holds {ITEMS_MAX} items already: delete some first")
        self.table.setdefault(namespace, {})[key] = value
        log.info("KV config %s: %s=%s", namespace, key, value)
        self.persist()

    def delete(self, namespace: str, key: str) -> None:
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            log.info("KV config %s: %s deleted", namespace, key)
            self.persist()

    def persist(self) -> None:
        if self.path:
            atomic_write(self.path, encode_kv_file(self.table))


# ---------------------------------------------------------------- the requests

class KvConfigRequests:
    """PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE, RocketMQ's answers."""

    def __init__(self, kv: KvConfig):
        self.kv = kv

    @answers_refusals
    def on_put(self, request: Command, reply=None) -> Command:
        namespace, key = request.fields.get("namespace"), request.fields.get("key")
        if namespace is None or key is None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark="namespace or key is null")
        self.kv.put(namespace, key, request.fields.get("value", ""))
        return request.response(ResponseCode.SUCCESS)

    def on_get(self, request: Command, reply=None) -> Command:
        namespace, key = request.fields.get("namespace"), request.fields.get("key")
        value = self.kv.get(namespace, key) if namespace is not None and key is not None else None
        if value is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND,
                                    remark=f"No config item, Namespace: {namespace} Key: {key}")
        return request.response(ResponseCode.SUCCESS, {"value": value})

    def on_delete(self, request: Command, reply=None) -> Command:
        namespace, key = request.fields.get("namespace"), request.fields.get("key")
        if namespace is not None and key is not None:
            self.kv.delete(namespace, key)
        return request.response(ResponseCode.SUCCESS)

    def on_list(self, request: Command, reply=None) -> Command:
        """RocketMQ's KVTable of one namespace."""
        namespace = request.fields.get("namespace")
        kv = self.kv.namespace(namespace) if namespace is not None else None
        if kv is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {namespace}")
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"table": kv}))
