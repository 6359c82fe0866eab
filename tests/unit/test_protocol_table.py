"""Every request code has exactly one serving process, and that process has exactly one handler."""

from __future__ import annotations

import inspect

from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.config import NamesrvConfig
from rocketbox.cluster.namesrv import NamesrvService
from rocketbox.cluster.refusals import BROKER_REFUSALS
from rocketbox.cluster.protocol import BROKER, CLIENT, NAMESRV, SERVED_BY, RequestCode, SEND_V2_SHORT_NAMES, send_fields_short


def _broker_handler_codes() -> set[int]:
    # The broker's table is built in __init__; read it from the source of truth without a store.
    source = inspect.getsource(BrokerService.__init__)
    assert "**refusal_handlers(BROKER_REFUSALS)" in source   # the codes refused with a reason (refusals.py)
    return {code for code in RequestCode if f"RequestCode.{code.name}:" in source} | set(BROKER_REFUSALS)


def test_every_code_is_served_by_exactly_one_process_with_one_handler():
    namesrv_codes = set(NamesrvService(NamesrvConfig()).handlers)
    broker_codes = _broker_handler_codes()
    assert not namesrv_codes & broker_codes
    for code in RequestCode:
        server = SERVED_BY.get(code)
        assert server in (BROKER, NAMESRV, CLIENT), f"{code.name} has no serving process"
        assert (code in broker_codes) == (server == BROKER), code.name
        assert (code in namesrv_codes) == (server == NAMESRV), code.name


def test_send_v2_short_names_map_both_ways():
    long = {"producerGroup": "G", "topic": "T", "queueId": "1", "properties": "p"}
    short = send_fields_short(long)
    assert short == {"a": "G", "b": "T", "e": "1", "i": "p"}
    assert {SEND_V2_SHORT_NAMES[k]: v for k, v in short.items()} == long


def test_client_served_codes_have_a_client_handler():
    import inspect as _inspect

    from rocketbox.cluster.client import consumer, transaction
    source = _inspect.getsource(consumer) + _inspect.getsource(transaction)
    for code, server in SERVED_BY.items():
        if server == CLIENT:
            assert f"RequestCode.{code.name}" in source, code.name
