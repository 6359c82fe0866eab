"""The generated modules of RocketMQ 5's gRPC protocol (``apache.rocketmq.v2``), the one place the
proxy imports them.

They come from rocketmq-python-client (setup.py says why): importing ``rocketmq.grpc_protocol``
runs that package's ``__init__``, which loads its whole client (OpenTelemetry included) and
registers ``definition.proto`` / ``service.proto`` in protobuf's default pool. Nothing outside
``cluster/proxy/`` may import this module, and no other definitions of these messages may be
loaded in the same process (duplicate symbols).
"""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as pb   # messages and enums
from rocketmq.grpc_protocol import service_pb2 as service   # requests and responses
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc   # the servicer base

Code = pb.Code

__all__ = ["pb", "service", "service_grpc", "Code"]
