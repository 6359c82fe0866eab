"""The proxy process's server: ``apache.rocketmq.v2.MessagingService`` on grpc.aio (HTTP/2, plaintext or
TLS with tls.server.mode),
each RPC handed to its service, and the asyncio loop shaped as the supervisor's roles expect
(``run()``, ``stopping``, ``watch_stop_fd``).

Every RPC goes through one guard: the caller must name itself (``x-mq-client-id``); a refusal
(``ProxyError``) is answered in the response's status; anything unexpected is answered
INTERNAL_SERVER_ERROR and logged (rate-limited), and the proxy serves on. An RPC of
``service.proto`` RocketBox does not serve (PullMessage and the offset RPCs, which Apache's proxy
does not serve either) is refused as Apache's grpc-java stub
refuses what its proxy does not override: gRPC UNIMPLEMENTED, "Method <service>/<name> is
unimplemented" (``refuse_unserved_rpcs``), never grpcio's NotImplementedError and its traceback.
Bounds: RPCs in flight (``max_concurrent_rpcs``: every open stream counts; beyond
it gRPC refuses with RESOURCE_EXHAUSTED), request size (``max_request_bytes``), clients remembered
(clients.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
import traceback

import grpc

from rocketbox.cluster.config import TLS_DISABLED, TLS_ENFORCING
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.proxy.brokers import BrokerGateway
from rocketbox.cluster.proxy.calls import call_of
from rocketbox.cluster.proxy.client_service import ClientService, StreamEnd
from rocketbox.cluster.proxy.clients import ClientRegistry
from rocketbox.cluster.proxy.consumer_service import ConsumerService
from rocketbox.cluster.proxy.lite_service import LiteService
from rocketbox.cluster.proxy.producer_service import ProducerService
from rocketbox.cluster.proxy.protos import Code, service, service_grpc
from rocketbox.cluster.proxy.routes import RouteService
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import ProxyError, status
from rocketbox.cluster.proxy.transactions import TransactionRelay

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

HOUSEKEEPING_S = 5.0
# Idle lite topics are looked for every 6 housekeeping rounds (30 s; their idle times are minutes).
LITE_EXPIRY_ROUNDS = 6
# gRPC's own loggers: it logs each request it cannot even decode with a traceback.
GRPC_LOGGERS = ("grpc._cython.cygrpc", "grpc.aio._server", "grpc._server")


class RateLimitedRecords(logging.Filter):
    """At most ``burst`` records of a logger per ``interval_s``; the next one let through says how
    many were held back (a flood of junk must not become a flood of log lines)."""

    def __init__(self, burst: int = 10, interval_s: float = 10.0):
        super().__init__()
        self.burst, self.interval_s = burst, interval_s
        self._window_start = float("-inf")
        self._written = self.held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self._window_start >= self.interval_s:
            self._window_start, self._written = now, 0
        if self._written >= self.burst:
            self.held += 1
            return False
        self._written += 1
        if self.held:
            record.msg = f"{record.msg} ({self.held} more like this held back)"
            self.held = 0
        return True


def unserved_rpc(full_name: str):
    """The handler of an RPC the servicer does not serve: grpc-java's ``asyncUnimplementedUnaryCall``
    answer (what Apache's proxy gives for an RPC it does not override), logged rate-limited."""
    service_name, _, name = full_name.rpartition(".")
    path = f"{service_name}/{name}"

    async def refuse(self, request, context):
        self.refused += 1
        _limited.warning(f"unserved:{name}", "%s refused: RocketBox does not serve it", name)
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"Method {path} is unimplemented")
    refuse.__name__ = name
    return refuse


def refuse_unserved_rpcs(servicer_class):
    """Gives every RPC of MessagingService that ``servicer_class`` leaves to grpcio's generated base
    (whose method raises NotImplementedError: a traceback in the log) the ``unserved_rpc`` answer;
    an RPC a later change serves is simply defined on the class."""
    base = service_grpc.MessagingServiceServicer
    for method in service.DESCRIPTOR.services_by_name["MessagingService"].methods:
        if getattr(servicer_class, method.name) is getattr(base, method.name):
            setattr(servicer_class, method.name, unserved_rpc(method.full_name))
    return servicer_class


@refuse_unserved_rpcs
class MessagingService(service_grpc.MessagingServiceServicer):
    def __init__(self, settings: ProxySettings, loop: asyncio.AbstractEventLoop):
        self.settings = settings
        self.gateway = BrokerGateway(settings)
        self.registry = ClientRegistry(settings.max_clients, settings.client_expiry_ms)
        self.transactions = TransactionRelay(settings, self.gateway, self.registry, loop)
        self.lite = LiteService(settings, self.gateway, self.registry)
        self.clients = ClientService(settings, self.gateway, self.registry, on_client_left=self.lite.client_left)
        self.routes = RouteService(settings, self.gateway)
        self.producers = ProducerService(settings, self.gateway, self.registry, self.transactions,
                                         note_lite_send=self.lite.subscriptions.note_send)
        self.consumers = ConsumerService(settings, self.gateway, self.registry, self.lite)
        # Access control (proxy/access.py): every RPC's authorization header, when the cluster has an ACL file.
        # Its modules (the ACL model, hmac, ~17 ms of the proxy's start) load only with an ACL file.
        self.access = None
        if settings.acl_file:
            from rocketbox.cluster.proxy.access import ProxyAccess
            self.access = ProxyAccess(settings.acl_file, settings.signed_time_skew_s)
        self.refused = self.failed = 0

    async def _unary(self, name: str, handler, request, context, response_type):
        try:
            call = call_of(context)
            if self.access is not None:
                self.access.check(context, name, request=request)
            return await handler(call, request)
        except ProxyError as exc:
            return self._refusal(name, exc, response_type)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed += 1
            _limited.warning(f"failed:{name}", "%s failed: %s", name, traceback.format_exc(limit=8))
            return response_type(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))

    def _refusal(self, name: str, exc: ProxyError, response_type):
        self.refused += 1
        _limited.warning(f"refused:{name}", "%s refused (%s): %s", name, Code.Name(exc.code), exc.message)
        return response_type(status=status(exc.code, exc.message))

    async def QueryRoute(self, request, context):
        return await self._unary("QueryRoute", self.routes.query_route, request, context,
                                 service.QueryRouteResponse)

    async def QueryAssignment(self, request, context):
        return await self._unary("QueryAssignment", self.routes.query_assignment, request, context,
                                 service.QueryAssignmentResponse)

    async def Heartbeat(self, request, context):
        return await self._unary("Heartbeat", self.clients.heartbeat, request, context, service.HeartbeatResponse)

    async def NotifyClientTermination(self, request, context):
        return await self._unary("NotifyClientTermination", self.clients.notify_client_termination, request,
                                 context, service.NotifyClientTerminationResponse)

    async def SendMessage(self, request, context):
        return await self._unary("SendMessage", self.producers.send_message, request, context,
                                 service.SendMessageResponse)

    async def send_message_batch(self, requests: list, contexts: list) -> list:
        return await self._batch("SendMessage", self.producers.send_batch, requests, contexts,
                                 service.SendMessageResponse)

    async def ack_message_batch(self, requests: list, contexts: list) -> list:
        return await self._batch("AckMessage", self.consumers.ack_batch, requests, contexts,
                                 service.AckMessageResponse)

    async def _batch(self, name: str, handler, requests: list, contexts: list, response_type) -> list:
        """A read's calls of one RPC (the native door, ``grpc_batch_calls``): each call guarded as
        ``_unary`` guards it (its caller, its access check, its refusal in its own response), the
        calls that pass handled together (``handler``: producer_batch.py, ack_batches.py); a response
        for each, in order."""
        responses: list = [None] * len(requests)
        passed, where = [], []
        for index, (request, context) in enumerate(zip(requests, contexts)):
            try:
                call = call_of(context)
                if self.access is not None:
                    self.access.check(context, name, request=request)
            except ProxyError as exc:
                responses[index] = self._refusal(name, exc, response_type)
                continue
            passed.append((call, request))
            where.append(index)
        if passed:
            try:
                results = await handler(passed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failed += 1
                _limited.warning(f"failed:{name}", "%s failed: %s", name, traceback.format_exc(limit=8))
                results = [response_type(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))
                           ] * len(passed)
            for index, result in zip(where, results):
                responses[index] = self._refusal(name, result, response_type) if isinstance(result, ProxyError) \
                    else result
        return responses

    def batch_handlers(self) -> dict:
        """RPC name -> the handler of a read's calls of it together (native_door.py), as the settings allow."""
        if not self.settings.grpc_batch_calls:
            return {}
        return {"SendMessage": self.send_message_batch, "AckMessage": self.ack_message_batch}

    def stream_handlers(self) -> dict:
        """RPC name -> the native door's handler of a server-streaming RPC whose responses may come as
        runs of bytes (native_door.py), as the settings allow (the batching's switch turns it off too)."""
        if not self.settings.grpc_batch_calls:
            return {}
        return {"ReceiveMessage": functools.partial(self.ReceiveMessage, runs=True)}

    async def RecallMessage(self, request, context):
        return await self._unary("RecallMessage", self.producers.recall_message, request, context,
                                 service.RecallMessageResponse)

    async def EndTransaction(self, request, context):
        return await self._unary("EndTransaction", self.transactions.end_transaction, request, context,
                                 service.EndTransactionResponse)

    async def AckMessage(self, request, context):
        return await self._unary("AckMessage", self.consumers.ack, request, context, service.AckMessageResponse)

    async def ChangeInvisibleDuration(self, request, context):
        return await self._unary("ChangeInvisibleDuration", self.consumers.change_invisible_duration, request,
                                 context, service.ChangeInvisibleDurationResponse)

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        return await self._unary("ForwardMessageToDeadLetterQueue", self.consumers.forward_to_dead_letter_queue,
                                 request, context, service.ForwardMessageToDeadLetterQueueResponse)

    async def SyncLiteSubscription(self, request, context):
        return await self._unary("SyncLiteSubscription", self.lite.sync_lite_subscription, request, context,
                                 service.SyncLiteSubscriptionResponse)

    async def ReceiveMessage(self, request, context, runs: bool = False):
        """``runs`` (the native door, ``stream_handlers``): a receive's messages come as one run of
        serialized responses (``ConsumerService.receive``), framed by one C call."""
        try:
            call = call_of(context)
            if self.access is not None:
                self.access.check(context, "ReceiveMessage", request=request)
        except ProxyError as exc:
            yield service.ReceiveMessageResponse(status=status(exc.code, exc.message))
            return
        try:
            async for response in self.consumers.receive(call, request, runs=runs):
                yield response
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed += 1
            _limited.warning("failed:ReceiveMessage", "ReceiveMessage failed: %s", traceback.format_exc(limit=8))
            yield service.ReceiveMessageResponse(status=status(Code.INTERNAL_SERVER_ERROR,
                                                                f"{type(exc).__name__}: {exc}"))

    async def Telemetry(self, request_iterator, context):
        try:
            call = call_of(context)
            if self.access is not None:
                self.access.check(context, "Telemetry")
                request_iterator = self.access.checked_commands(context, request_iterator)
            async for command in self.clients.telemetry(call, request_iterator):
                yield command
        except (ProxyError, StreamEnd) as exc:
            self.refused += 1
            code = getattr(exc, "code", None)
            await context.abort(_ABORT_STATUS.get(code, grpc.StatusCode.INVALID_ARGUMENT),
                                getattr(exc, "message", None) or str(exc))

    # ------------------------------------------------------------ background

    async def housekeeping_forever(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(HOUSEKEEPING_S)
            for client_id in self.registry.expire():
                self.lite.client_left(client_id)
            rounds += 1
            if rounds % LITE_EXPIRY_ROUNDS == 0:
                try:
                    await self.lite.expire()
                except Exception:   # the next round tries again; the loop must not die
                    _limited.warning("lite-expire", "lite topic expiry failed: %s", traceback.format_exc(limit=4))


# How a refused Telemetry stream ends (the unary RPCs answer a status in their response instead).
_ABORT_STATUS = {Code.TOO_MANY_REQUESTS: grpc.StatusCode.RESOURCE_EXHAUSTED,
                 Code.UNAUTHORIZED: grpc.StatusCode.UNAUTHENTICATED, Code.FORBIDDEN: grpc.StatusCode.PERMISSION_DENIED}


def server_options(settings: ProxySettings) -> list[tuple[str, int]]:
    return [("grpc.max_receive_message_length", settings.max_request_bytes),
            ("grpc.max_send_message_length", settings.max_request_bytes),
            # Clients ping idle connections (the 5.1.2 client does not, but others may): allow it.
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.so_reuseport", 0)]


def server_credentials(settings: ProxySettings) -> grpc.ServerCredentials:
    """The proxy's TLS certificate and key (tls.server.certPath/keyPath); ValueError with the reason."""
    try:
        with open(settings.tls_server_key_path, "rb") as key, open(settings.tls_server_cert_path, "rb") as cert:
            return grpc.ssl_server_credentials([(key.read(), cert.read())])
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"the proxy's TLS certificate or key: {exc}") from None


class ProxyServer:
    """The grpc.aio server and its loop, for ``procs/proxy.py`` (and tests that run it in process)."""

    def __init__(self, settings: ProxySettings):
        settings.validate()
        self.settings = settings
        for name in GRPC_LOGGERS:
            logging.getLogger(name).addFilter(RateLimitedRecords())
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)   # grpc.aio binds its server to the current loop
        self.stopping = False
        self._stop = asyncio.Event()
        self.service = MessagingService(settings, self.loop)
        self.native = settings.grpc_front == "native" and settings.tls_server_mode == TLS_DISABLED
        if self.native:
            from rocketbox.cluster.proxy.native_door import NativeDoor   # opt-in: its HTTP/2 helper loads for it alone
            self.server = NativeDoor(settings, self.service, self.loop)
        else:
            if settings.grpc_front == "native":
                log.info("grpc_front=native serves plaintext only: with TLS the proxy serves on grpc.aio")
            self.server = grpc.aio.server(options=server_options(settings),
                                          maximum_concurrent_rpcs=settings.max_concurrent_rpcs)
            service_grpc.add_MessagingServiceServicer_to_server(self.service, self.server)
        self._tasks: list[asyncio.Task] = []

    def start(self) -> str:
        """Bind and serve; the address. OSError when the port is taken."""
        if self.native:
            self.server.start()
        else:
            if self.settings.tls_server_mode == TLS_DISABLED:
                bound = self.server.add_insecure_port(self.settings.address)
            else:
                # grpcio serves a port either plain or TLS: permissive serves TLS here, as enforcing.
                if self.settings.tls_server_mode != TLS_ENFORCING:
                    log.info("tls.server.mode=%s: the gRPC proxy serves TLS only (one port is plain or TLS)",
                             self.settings.tls_server_mode)
                bound = self.server.add_secure_port(self.settings.address, server_credentials(self.settings))
            if bound == 0:
                raise OSError(f"cannot listen on {self.settings.address}: Address already in use")
            self.loop.run_until_complete(self.server.start())
        self._tasks = [self.loop.create_task(self.service.transactions.heartbeat_forever()),
                       self.loop.create_task(self.service.consumers.renewals.forever()),
                       self.loop.create_task(self.service.housekeeping_forever())]
        if self.service.access is not None:
            self._tasks.append(self.loop.create_task(self.service.access.watch_forever()))
        return self.settings.address

    def watch_stop_fd(self, fd: int) -> None:
        def drain() -> None:
            try:
                os.read(fd, 4096)
            except (BlockingIOError, InterruptedError):
                pass
            if self.stopping:
                self._stop.set()
        self.loop.add_reader(fd, drain)

    def run(self) -> None:
        async def until_stopped() -> None:
            while not self.stopping:
                try:
                    await asyncio.wait_for(self._stop.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass
        self.loop.run_until_complete(until_stopped())

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        try:
            self.loop.run_until_complete(self.server.stop(grace=1.0))
        finally:
            self.service.gateway.close()
            self.loop.close()
