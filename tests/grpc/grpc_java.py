"""Our probe of the proxy through grpc-java (``java/GrpcJavaProbe.java``), built at test time into a
temporary directory by ``perf/grpc_java_build.py`` (protoc's stubs from the proxy's own descriptors,
javac). Where javac, java, protoc, the plugin or a jar is missing, ``require_grpc_java`` skips saying which.
"""

from __future__ import annotations

import pathlib

import pytest

from rocketbox.perf.grpc_java_build import PACKAGES, build, java_command, missing

PROBE = pathlib.Path(__file__).with_name("java") / "GrpcJavaProbe.java"


def require_grpc_java() -> None:
    absent = missing()
    if absent:
        pytest.skip(f"grpc-java is not installed ({', '.join(absent)} missing): `make grpc-java` installs Debian's "
                    f"{PACKAGES} (root or passwordless sudo)")


def build_probe(work: pathlib.Path) -> pathlib.Path:
    """Generates the stubs, compiles them with the probe; the directory of the classes."""
    return build(work, [PROBE])


def probe_command(classes: pathlib.Path, endpoint: str, topic: str, group: str, access_key: str,
                  secret_key: str) -> list[str]:
    return java_command(classes, "GrpcJavaProbe", endpoint, topic, group, access_key, secret_key)
