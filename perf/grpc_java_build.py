"""grpc-java (Netty) from Debian's packages (``make grpc-java``), and Java programs that speak to the proxy
through it, built into a directory when they are wanted: protoc with the grpc-java plugin generates the
stubs from the proto descriptors the proxy itself serves (``proxy/protos.py``, given to protoc as a
FileDescriptorSet: the same messages, no second copy of the .proto files), javac compiles them with the
program. Used by the test probe (``tests/grpc/grpc_java.py``) and the load client (``grpc_java_load.py``).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess

JARS_DIR = pathlib.Path("/usr/share/java")
PLUGIN = "/usr/bin/grpc_java_plugin"
PROTO_FILES = ("definition.proto", "service.proto")
# What grpc-java 1.41 over Netty 4.1 loads at run time (Debian's unversioned links). No SLF4J: Netty's
# logging then goes to java.util.logging.
JARS = ("grpc-api", "grpc-context", "grpc-core", "grpc-netty", "grpc-stub", "grpc-protobuf", "grpc-protobuf-lite",
        "protobuf", "guava", "perfmark-api", "netty-buffer", "netty-codec", "netty-codec-http", "netty-codec-http2",
        "netty-common", "netty-handler", "netty-resolver", "netty-transport",
        "geronimo-annotation-1.3-spec")   # javax.annotation.Generated, on the generated stubs (Java 17 lacks it)
# The Debian packages that hold them (the Makefile's grpc-java target installs these).
PACKAGES = ("libgrpc-java libprotobuf-java libperfmark-java libgeronimo-annotation-1.3-spec-java protobuf-compiler "
            "protobuf-compiler-grpc-java-plugin")
BUILD_TIMEOUT_S = 240


class BuildFailed(RuntimeError):
    pass


def missing() -> list[str]:
    """What of grpc-java's tool chain is not here (empty: everything is)."""
    absent = [tool for tool in ("javac", "java", "protoc") if shutil.which(tool) is None]
    if not pathlib.Path(PLUGIN).exists():
        absent.append(PLUGIN)
    absent += [f"{JARS_DIR}/{jar}.jar" for jar in JARS if not (JARS_DIR / f"{jar}.jar").exists()]
    return absent


def class_path(*more: pathlib.Path) -> str:
    return ":".join([*(str(p) for p in more), *(f"{JARS_DIR}/{jar}.jar" for jar in JARS)])


def descriptor_set() -> bytes:
    """The proxy's own descriptors of MessagingService and what it imports, as one FileDescriptorSet."""
    from google.protobuf import descriptor_pb2

    from rocketbox.cluster.proxy.protos import service
    files, seen = descriptor_pb2.FileDescriptorSet(), set()

    def add(file) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:   # protoc wants a file's imports before it
            add(dependency)
        file.CopyToProto(files.file.add())
    add(service.DESCRIPTOR)
    return files.SerializeToString()


def build(work: pathlib.Path, programs: list[pathlib.Path]) -> pathlib.Path:
    """Generates the stubs, compiles them with ``programs`` (Java sources); the directory of the classes."""
    sources, classes = work / "src", work / "classes"
    sources.mkdir(parents=True, exist_ok=True)
    classes.mkdir(exist_ok=True)
    (work / "service.pb").write_bytes(descriptor_set())
    _run(["protoc", f"--descriptor_set_in={work / 'service.pb'}", f"--java_out={sources}",
          f"--plugin=protoc-gen-grpc-java={PLUGIN}", f"--grpc-java_out={sources}", *PROTO_FILES])
    java_files = [str(p) for p in sources.rglob("*.java")] + [str(p) for p in programs]
    _run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(classes), "-cp", class_path(), *java_files])
    return classes


def java_command(classes: pathlib.Path, main_class: str, *args: str, quick_start: bool = True) -> list[str]:
    """``quick_start``: the JIT's first tier only (a short probe); a load client wants its full JIT."""
    return ["java", "-Xss1m", "-XX:+UseSerialGC", *(["-XX:TieredStopAtLevel=1"] if quick_start else []),
            "-cp", class_path(classes), main_class, *args]


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode:
        raise BuildFailed(f"{command[0]} failed ({done.returncode}): {done.stderr[-4000:]}")
