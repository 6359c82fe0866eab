"""RocketBox: Apache RocketMQ's architecture as a multi-process cluster in a box.

Public names (the client library):

    Producer, PushConsumer, PullConsumer, Admin      clients (cluster.client.*)
    MessageSelector                                  a subscription: by tag or by SQL92
    Message, MessageExt, MessageQueue, SendResult    values
    SendStatus, ConsumeStatus, PullStatus            outcomes
    ConsumeOrderlyStatus, hash_selector              ordered messages (client/orderly.py, selectors.py)
    ClientError and subclasses                       errors (cluster.errors)

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

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.client.broker_api import PullResult, PullStatus
from rocketbox.cluster.client.consumer import ConsumeStatus, PullConsumer, PushConsumer
from rocketbox.cluster.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from rocketbox.cluster.client.message_selector import MessageSelector
from rocketbox.cluster.client.orderly import ConsumeOrderlyStatus
from rocketbox.cluster.client.producer import Producer
from rocketbox.cluster.client.selectors import hash_selector
from rocketbox.cluster.errors import (BrokerError, BrokerUnreachable, ClientClosed, ClientError, MessageInvalid, NoRouteError,
                            RequestTimeout)

__all__ = ["Admin", "Producer", "PushConsumer", "PullConsumer", "MessageSelector", "Message", "MessageExt",
           "MessageQueue", "SendResult", "SendStatus", "ConsumeStatus", "ConsumeOrderlyStatus", "hash_selector",
           "PullResult", "PullStatus", "ClientError",
           "BrokerError", "BrokerUnreachable", "ClientClosed", "MessageInvalid", "NoRouteError", "RequestTimeout"]
