"""The NameServer's admin requests beyond routes (mqadmin's namesrv verbs and a few of its reads).

| code | verb | answer |
| --- | --- | --- |
| GET_NAMESRV_CONFIG 319 | getNamesrvConfig | every setting as Java properties text: RocketBox's under their keys, Apache's others at their defaults (``rocketmq_defaults``) |
| UPDATE_NAMESRV_CONFIG 318 | updateNamesrvConfig | ``key=value`` lines of LIVE_KEYS, kept in ``<data dir>/namesrv.properties`` for later boots; RocketMQ's black list refused NO_PERMISSION, other keys refused with the live ones named |
| WIPE_WRITE_PERM_OF_BROKER 205, ADD_WRITE_PERM_OF_BROKER 327 | wipeWritePerm, addWritePerm | the broker's routes lose the write bit (kept through its later registrations) or get read and write back; ``wipeTopicCount`` / ``addTopicCount`` |
| GET_TOPICS_BY_CLUSTER 224 | (topicList -c) | TopicList of the cluster's brokers' topics |
| GET_SYSTEM_TOPIC_LIST_FROM_NS 304 | | TopicList: cluster and broker names, and a broker's address |
| GET_UNIT_TOPIC_LIST 311, GET_HAS_UNIT_SUB_TOPIC_LIST 312, GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST 313 | | TopicList by the unit bits of topicSysFlag |
| QUERY_DATA_VERSION 322 | | whether a broker's registered topic table is current (``changed``), the DataVersion held |
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

from rocketbox.cluster.config_file import NAMESRV_TABLE, read_settings, settings_text
from rocketbox.cluster.protocol import (ProtocolError, RequestCode, ResponseCode, answers_refusals, field_str,
                                        to_json_bytes)
from rocketbox.cluster.rocketmq_defaults import NAMESRV_BLACK_LIST, apache_namesrv_keys
from rocketbox.cluster.rocketmq_keys import parse_properties, properties_text
from rocketbox.cluster.shm.durable import atomic_write
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)

CONFIG_FILE_NAME = "namesrv.properties"
# What updateNamesrvConfig may change while the NameServer runs: settings read where they are used.
LIVE_KEYS = frozenset({"orderMessageEnable", "brokerExpiryMs"})
# TopicSysFlag's unit bits.
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2


def config_store_path(cfg) -> str:
    return os.path.join(cfg.data_dir, CONFIG_FILE_NAME) if cfg.data_dir else ""


def apply_stored_config(cfg):
    """``cfg`` with the live settings an earlier updateNamesrvConfig kept (unchanged without any)."""
    path = config_store_path(cfg)
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except (FileNotFoundError, NotADirectoryError):
        return cfg
    except OSError as exc:
        log.warning("%s not read: %s", path, exc)
        return cfg
    try:
        values = read_settings({k: v for k, v in props.items() if k in LIVE_KEYS}, NAMESRV_TABLE).values
        updated = dataclasses.replace(cfg, **values)
        updated.validate()
    except ValueError as exc:
        log.warning("%s ignored: %s", path, exc)
        return cfg
    return updated


def _topic_list(topics, broker_addr: str | None = None) -> bytes:
    body = {"topicList": sorted(topics)}
    if broker_addr is not None:
        body["brokerAddr"] = broker_addr
    return to_json_bytes(body)


class NamesrvAdmin:
    """The handlers; ``service`` is the NamesrvService (its ``cfg``, route ``table`` and ``kv`` path)."""

    def __init__(self, service):
        self.service = service

    @property
    def table(self):
        return self.service.table

    def handlers(self) -> dict:
        R = RequestCode
        return {
            R.GET_NAMESRV_CONFIG: self.on_get_config, R.UPDATE_NAMESRV_CONFIG: self.on_update_config,
            R.WIPE_WRITE_PERM_OF_BROKER: self.on_wipe_write_perm, R.ADD_WRITE_PERM_OF_BROKER: self.on_add_write_perm,
            R.GET_TOPICS_BY_CLUSTER: self.on_topics_by_cluster, R.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.on_system_topics,
            R.GET_UNIT_TOPIC_LIST: self._unit_list(lambda flag: flag & FLAG_UNIT),
            R.GET_HAS_UNIT_SUB_TOPIC_LIST: self._unit_list(lambda flag: flag & FLAG_UNIT_SUB),
            R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._unit_list(lambda flag: not flag & FLAG_UNIT and flag & FLAG_UNIT_SUB),
            R.QUERY_DATA_VERSION: self.on_query_data_version,
        }

    # ------------------------------------------------------------ configuration

    def settings(self) -> dict[str, str]:
        cfg = self.service.cfg
        return {**apache_namesrv_keys(self.service.kv.path, config_store_path(cfg)), **settings_text(cfg, NAMESRV_TABLE)}

    def on_get_config(self, request: Command, reply=None) -> Command:
        return request.response(ResponseCode.SUCCESS, body=properties_text(self.settings()).encode())

    @answers_refusals
    def on_update_config(self, request: Command, reply=None) -> Command:
        props = parse_properties(request.body.decode("utf-8", "replace"))
        if set(props) & NAMESRV_BLACK_LIST:   # RocketMQ's answer and wording
            return request.response(ResponseCode.NO_PERMISSION, remark="Can not update config in black list.")
        fixed = sorted(set(props) - LIVE_KEYS)
        if fixed:
            raise ProtocolError(f"{', '.join(fixed)} cannot change while the NameServer runs (set it in "
                                f"namesrv.conf and restart); live: {', '.join(sorted(LIVE_KEYS))}")
        try:
            values = read_settings(props, NAMESRV_TABLE).values
            updated = dataclasses.replace(self.service.cfg, **values)
            updated.validate()
        except ValueError as exc:
            raise ProtocolError(f"updateNamesrvConfig refused: {exc}") from None
        self.service.cfg = updated
        path = config_store_path(updated)
        if path:
            live = {key: value for key, value in settings_text(updated, NAMESRV_TABLE).items() if key in LIVE_KEYS}
            atomic_write(path, properties_text(live).encode())
        log.info("updateNamesrvConfig: %s", ", ".join(f"{k}={v}" for k, v in sorted(props.items())))
        return request.response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------ write permission

    def _set_write_perm(self, request: Command, writable: bool, count_field: str) -> Command:
        broker_name = field_str(request, "brokerName")
        count = self.table.set_write_perm(broker_name, writable)
        log.info("%s write permission of broker %s: %d topics", "added" if writable else "wiped", broker_name, count)
        return request.response(ResponseCode.SUCCESS, {count_field: str(count)})

    @answers_refusals
    def on_wipe_write_perm(self, request: Command, reply=None) -> Command:
        return self._set_write_perm(request, False, "wipeTopicCount")

    @answers_refusals
    def on_add_write_perm(self, request: Command, reply=None) -> Command:
        return self._set_write_perm(request, True, "addTopicCount")

    # ------------------------------------------------------------ topic lists

    def on_topics_by_cluster(self, request: Command, reply=None) -> Command:
        names = self.table.cluster_brokers(request.fields.get("cluster", ""))
        topics = {topic for topic, per_broker in self.table.topics.items() if names & set(per_broker)}
        return request.response(ResponseCode.SUCCESS, body=_topic_list(topics))

    def on_system_topics(self, request: Command, reply=None) -> Command:
        """RocketMQ's answer: every cluster's name and its brokers' names (topics a broker keeps for
        itself carry them), and one broker's address."""
        names, address = set(), None
        for broker in self.table.brokers.values():
            names.update((broker.cluster_name, broker.broker_name))
            address = address or broker.address_for(request.door)
        return request.response(ResponseCode.SUCCESS, body=_topic_list(names, address))

    def _unit_list(self, wanted):
        def handler(request: Command, reply=None) -> Command:
            topics = {topic for topic, per_broker in self.table.topics.items()
                      if per_broker and wanted(next(iter(per_broker.values())).get("topicSysFlag", 0))}
            return request.response(ResponseCode.SUCCESS, body=_topic_list(topics))
        return handler

    # ------------------------------------------------------------ a broker's data version

    @answers_refusals
    def on_query_data_version(self, request: Command, reply=None) -> Command:
        address = field_str(request, "brokerAddr")
        try:
            asked = json.loads(request.body or b"null")
        except ValueError:
            raise ProtocolError("the body is not a DataVersion") from None
        except RecursionError:   # json's decoder recurses per nesting level
            raise ProtocolError("the body nests too deep") from None
        broker = self.table.brokers.get(address)
        held = broker.data_version if broker is not None else None
        changed = held is None or held != asked
        if broker is not None and not changed:   # RocketMQ counts a current broker's query as a heartbeat
            broker.last_heartbeat_ms = self.service.clock_ms()
        body = to_json_bytes(held) if held is not None else b""
        return request.response(ResponseCode.SUCCESS, {"changed": "true" if changed else "false"}, body)
