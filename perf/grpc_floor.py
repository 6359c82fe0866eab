"""The floor under any Python gRPC proxy on this machine: a bare ``grpc.aio`` MessagingService that
answers QueryRoute (every queue on itself), Telemetry (the client's settings back, a body limit
filled), Heartbeat and SendMessage (OK, the client's id echoed) and stores nothing. The gRPC perf
scenario sends through it beside the real proxy: what the real proxy costs above it is ours
(validation, the broker round trip); what it costs itself is grpcio's and protobuf's per call.

    python grpc_floor.py PORT [aio|threaded]   (prints "ready" once serving; runs until killed)

``threaded``: the same servicer on grpcio's synchronous server (a thread pool of 16 handlers) instead of
``grpc.aio``, the other server grpcio offers (perf/RESULTS.md, "The gRPC door at full speed").

Runs with ``.venv-rocketmq5/bin/python`` (the published protocol modules); standard library,
grpcio and those modules only.
"""

from __future__ import annotations

import asyncio
import sys


def servicer(port: int, threaded: bool):
    from rocketmq.grpc_protocol import definition_pb2 as pb, service_pb2 as service, service_pb2_grpc

    ok = pb.Status(code=pb.Code.OK, message="OK")
    endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)])
    broker = pb.Broker(name="floor", id=0, endpoints=endpoints)

    def route(request):
        queues = [pb.MessageQueue(topic=request.topic, id=i, permission=pb.READ_WRITE, broker=broker,
                                  accept_message_types=[pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION])
                  for i in range(4)]
        return service.QueryRouteResponse(status=ok, message_queues=queues)

    def sent(request):
        entries = [service.SendResultEntry(status=ok, message_id=m.system_properties.message_id, offset=0)
                   for m in request.messages]
        return service.SendMessageResponse(status=ok, entries=entries)

    def settings_answer(command):
        """The client's settings back, a body limit filled (None: not a settings command)."""
        if not command.HasField("settings"):
            return None
        settings = pb.Settings()
        settings.CopyFrom(command.settings)
        if settings.HasField("publishing"):
            settings.publishing.max_body_size = 4 * 1024 * 1024
            settings.publishing.validate_message_type = True
        return service.TelemetryCommand(status=ok, settings=settings)

    class Floor(service_pb2_grpc.MessagingServiceServicer):
        async def QueryRoute(self, request, context):
            return route(request)

        async def Heartbeat(self, request, context):
            return service.HeartbeatResponse(status=ok)

        async def SendMessage(self, request, context):
            return sent(request)

        async def Telemetry(self, request_iterator, context):
            async for command in request_iterator:
                answer = settings_answer(command)
                if answer is not None:
                    yield answer

        async def NotifyClientTermination(self, request, context):
            return service.NotifyClientTerminationResponse(status=ok)

    class ThreadedFloor(service_pb2_grpc.MessagingServiceServicer):
        """The same answers from plain functions (the synchronous server calls them on its pool)."""

        def QueryRoute(self, request, context):
            return route(request)

        def Heartbeat(self, request, context):
            return service.HeartbeatResponse(status=ok)

        def SendMessage(self, request, context):
            return sent(request)

        def Telemetry(self, request_iterator, context):
            for command in request_iterator:
                answer = settings_answer(command)
                if answer is not None:
                    yield answer

        def NotifyClientTermination(self, request, context):
            return service.NotifyClientTerminationResponse(status=ok)

    return ThreadedFloor() if threaded else Floor()


def _ready() -> None:
    sys.stdout.write("ready\n")
    sys.stdout.flush()


async def serve_aio(port: int) -> None:
    import grpc
    from rocketmq.grpc_protocol import service_pb2_grpc
    server = grpc.aio.server()
    service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer(port, threaded=False), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    _ready()
    await server.wait_for_termination()


def serve_threaded(port: int) -> None:
    from concurrent.futures import ThreadPoolExecutor
    import grpc
    from rocketmq.grpc_protocol import service_pb2_grpc
    server = grpc.server(ThreadPoolExecutor(max_workers=16), maximum_concurrent_rpcs=4096)
    service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer(port, threaded=True), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    _ready()
    server.wait_for_termination()


if __name__ == "__main__":
    if (sys.argv[2] if len(sys.argv) > 2 else "aio") == "threaded":
        serve_threaded(int(sys.argv[1]))
    else:
        asyncio.run(serve_aio(int(sys.argv[1])))
