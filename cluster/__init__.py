"""RocketBox: Apache RocketMQ's architecture as a multi-process cluster in a box.

Public names (the client library):

    Producer, PushConsumer, PullConsumer, Admin      clients (cluster.client.*)
    MessageSelector                                  a subscription: by tag or by SQL92
    Message, MessageExt, MessageQueue, SendResult    values
    SendStatus, ConsumeStatus, PullStatus            outcomes
    ConsumeOrderlyStatus, hash_selector              ordered messages (client/orderly.py, selectors.py)
    ClientConfig                                     a client's settings; ClientConfig.for_account(NAME, acl_file=)
    ClientError and subclasses                       errors (cluster.errors; AccessDenied: access control)

Map of the package:

    clock.py            the one replaceable clock (SYSTEM_CLOCK; ManualClock for tests)
    config.py           every setting (frozen dataclasses, unit-suffixed names)
    wire_format.py      the bytes of one RPC command (RocketMQ's binary header)
    protocol.py         request/response codes, header fields, who serves what, MessageQueue
    filter/             subscription expressions: tags, SQL92 (parser and evaluator)
    zmq_transport.py    ZeroMQ event loop, RPC server and client
    namesrv.py          the NameServer's route table and handlers
    broker/             the broker's handlers: send, pull, filtering a pull, offsets,
                        clients, topics, ha (master/slave replication), slave_sync (configs, offsets)
    shm/                the store: byte formats, paths, mapped files, CommitLog, ConsumeQueue,
                        IndexFile, control block, checkpoint, recovery, services
    _native/            the cffi C helper (msync, mlock, preheat, CRC, batch encode)
    supervision/        the supervisor: its table, children, start gate, exit policy, run state
    procs/              one thin entry point per process role (supervisor.py: the supervisor's)
    client/             routes, producer, consumers (offset stores, rebalance, pull and
                        consume services), admin
    topology.py         what `cluster up` starts;  cli/  the `cluster` command
"""

# Where each public name lives. Resolved on first use (PEP 562): every process of a cluster imports
# this package, and the broker, flush or NameServer has no use for the client library, whose
# import cost each of them ~0.15 s of CPU at every start.
_PUBLIC_NAMES = {
    "rocketbox.cluster.client.admin": ("Admin",),
    "rocketbox.cluster.client.broker_api": ("PullResult", "PullStatus"),
    "rocketbox.cluster.client.consumer": ("ConsumeStatus", "PullConsumer", "PushConsumer"),
    "rocketbox.cluster.client.message": ("Message", "MessageExt", "MessageQueue", "SendResult", "SendStatus"),
    "rocketbox.cluster.client.message_selector": ("MessageSelector",),
    "rocketbox.cluster.client.orderly": ("ConsumeOrderlyStatus",),
    "rocketbox.cluster.client.producer": ("Producer",),
    "rocketbox.cluster.client.selectors": ("hash_selector",),
    "rocketbox.cluster.config": ("ClientConfig",),
    "rocketbox.cluster.errors": ("AccessDenied", "BrokerError", "BrokerUnreachable", "ClientClosed", "ClientError",
                                 "MessageInvalid", "NoRouteError", "RequestTimeout"),
}
_MODULE_OF = {name: module for module, names in _PUBLIC_NAMES.items() for name in names}


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULE_OF])


__all__ = ["Admin", "Producer", "PushConsumer", "PullConsumer", "MessageSelector", "Message", "MessageExt",
           "MessageQueue", "SendResult", "SendStatus", "ConsumeStatus", "ConsumeOrderlyStatus", "hash_selector",
           "PullResult", "PullStatus", "ClientError",
           "BrokerError", "BrokerUnreachable", "ClientClosed", "MessageInvalid", "NoRouteError", "RequestTimeout"]
