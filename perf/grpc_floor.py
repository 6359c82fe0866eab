"""The floor under any Python gRPC proxy on this machine: a bare ``grpc.aio`` MessagingService that
answers QueryRoute (every queue on itself), Telemetry (the client's settings back, a body limit
filled), Heartbeat and SendMessage (OK, the client's id echoed) and stores nothing. The gRPC perf
scenario sends through it beside the real proxy: what the real proxy costs above it is ours
(validation, the broker round trip); what it costs itself is grpcio's and protobuf's per call.

    python grpc_floor.py PORT      (prints "ready" once serving; runs until killed)

Runs with ``.venv-rocketmq5/bin/python`` (the published protocol modules); standard library,
grpcio and those modules only.
"""

from __future__ import annotations

import asyncio
import sys


async def serve(port: int) -> None:
    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as pb, service_pb2 as service, service_pb2_grpc

    ok = pb.Status(code=pb.Code.OK, message="OK")
    endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)])
    broker = pb.Broker(name="floor", id=0, endpoints=endpoints)

    class Floor(service_pb2_grpc.MessagingServiceServicer):
        async def QueryRoute(self, request, context):
            queues = [pb.MessageQueue(topic=request.topic, id=i, permission=pb.READ_WRITE, broker=broker,
                                      accept_message_types=[pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION])
                      for i in range(4)]
            return service.QueryRouteResponse(status=ok, message_queues=queues)

        async def Heartbeat(self, request, context):
            return service.HeartbeatResponse(status=ok)

        async def SendMessage(self, request, context):
            entries = [service.SendResultEntry(status=ok, message_id=m.system_properties.message_id, offset=0)
                       for m in request.messages]
            return service.SendMessageResponse(status=ok, entries=entries)

        async def Telemetry(self, request_iterator, context):
            async for command in request_iterator:
                if command.HasField("settings"):
                    settings = pb.Settings()
                    settings.CopyFrom(command.settings)
                    if settings.HasField("publishing"):
                        settings.publishing.max_body_size = 4 * 1024 * 1024
                        settings.publishing.validate_message_type = True
                    yield service.TelemetryCommand(status=ok, settings=settings)

        async def NotifyClientTermination(self, request, context):
            return service.NotifyClientTerminationResponse(status=ok)

    server = grpc.aio.server()
    service_pb2_grpc.add_MessagingServiceServicer_to_server(Floor(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
