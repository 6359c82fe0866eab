"""The generated modules of RocketMQ 5's gRPC protocol (``apache.rocketmq.v2``), the one place the
proxy imports them.

They come from rocketmq-python-client (setup.py says why). A plain ``import rocketmq.grpc_protocol``
would first run that package's ``__init__``, which loads its whole client (OpenTelemetry included:
three quarters of the proxy's import time, and a log file opened under $HOME). The proxy needs only
the generated modules: ``_protocol_package`` loads them beneath the ``rocketmq`` package whose
``__init__`` is deferred until something asks the package for another name (then it runs, once, as
an import would have). ``definition.proto`` / ``service.proto`` register in protobuf's default
pool: nothing outside ``cluster/proxy/`` may import this module, and no other definitions of these
messages may be loaded in the same process (duplicate symbols).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

CLIENT_PACKAGE = "rocketmq"
PROTOCOL_PACKAGE = "rocketmq.grpc_protocol"


def _protocol_package():
    """``rocketmq.grpc_protocol``, with ``rocketmq/__init__.py`` run only when the package is asked
    for a name it does not have yet (``rocketmq.Producer``: a test's client in this process)."""
    if CLIENT_PACKAGE in sys.modules:
        return importlib.import_module(PROTOCOL_PACKAGE)
    spec = importlib.util.find_spec(CLIENT_PACKAGE)
    if spec is None or spec.submodule_search_locations is None or spec.loader is None:
        return importlib.import_module(PROTOCOL_PACKAGE)   # not a package on disk: the plain way
    package = importlib.util.module_from_spec(spec)

    def run_init(name: str):
        del package.__getattr__   # once; names the __init__ asks for while running resolve normally
        spec.loader.exec_module(package)
        return getattr(package, name)
    package.__getattr__ = run_init   # PEP 562: consulted only for names the module lacks
    sys.modules[CLIENT_PACKAGE] = package
    return importlib.import_module(PROTOCOL_PACKAGE)


_protocol_package()
from rocketmq.grpc_protocol import definition_pb2 as pb   # noqa: E402  messages and enums
from rocketmq.grpc_protocol import service_pb2 as service   # noqa: E402  requests and responses
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc   # noqa: E402  the servicer base

Code = pb.Code

__all__ = ["pb", "service", "service_grpc", "Code"]
