"""Every request code has exactly one serving process, and that process has exactly one handler."""

from __future__ import annotations

from rocketbox.cluster.broker.request_table import BROKER_HANDLERS, handler_of
from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.config import NamesrvConfig
from rocketbox.cluster.namesrv import NamesrvService
from rocketbox.cluster.refusals import BROKER_REFUSALS
from rocketbox.cluster.protocol import BROKER, CLIENT, NAMESRV, SERVED_BY, RequestCode, SEND_V2_SHORT_NAMES, send_fields_short


def _broker_handler_codes() -> set[int]:
    # The broker's table is data (request_table.py): read without a store; refused codes in refusals.py.
    return set(BROKER_HANDLERS) | set(BROKER_REFUSALS)


def test_broker_codes_are_served_or_refused_never_both():
    assert not set(BROKER_HANDLERS) & set(BROKER_REFUSALS)
    assert all(isinstance(code, RequestCode) for code in [*BROKER_HANDLERS, *BROKER_REFUSALS])
    # A handler is named by an attribute path on the service: a processor's method or the service's own.
    for code, path in BROKER_HANDLERS.items():
        assert all(part.isidentifier() for part in path.split(".")) and path.split(".")[-1].startswith("on_"), \
            (code.name, path)


def test_the_broker_dispatch_is_built_from_the_table(tmp_path):
    """Every name in the table resolves to a handler on a real service, which serves exactly the
    table's codes and the refused ones."""
    from rocketbox.cluster.broker.boot import boot
    from rocketbox.cluster.config import BrokerConfig
    from tests.store_harness import tiny_config
    service = BrokerService(boot(BrokerConfig(store=tiny_config(tmp_path / "store"))))
    try:
        assert set(service.handlers) == _broker_handler_codes()
        for code, path in BROKER_HANDLERS.items():
            assert callable(handler_of(service, path)), code.name
    finally:
        service.shutdown()


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
