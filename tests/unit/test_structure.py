"""The package's shape: imports point down the layers, no import circle, no oversized module.

Every import counts, including those inside functions (an import deferred into a
function still ties the two modules together). ``from rocketbox.cluster import _native`` is an
import of ``rocketbox.cluster._native``; the package root ``rocketbox.cluster`` (the public
re-exports) is the top of the stack and nothing inside the package may import it. The directories
``cluster/``, ``spark/`` and ``perf/`` are installed as ``rocketbox.cluster``, ``rocketbox.spark``
and ``rocketbox.perf`` (setup.py), and every import names them so.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("cluster", "spark", "perf")   # directories of the checkout
INSTALLED_ROOT = "rocketbox"               # the one top-level name they are installed under
MODULE_LINES_MAX = 600

# Lowest first, by dotted path below the installed root. A module may import modules of its own
# layer or of a lower one only.
_LAYERS_BY_PATH: list[tuple[str, ...]] = [
    ("cluster.message", "cluster._native", "cluster.clock", "cluster.fault_proxy", "cluster.field_tables",
     "cluster.file_modes", "cluster.format_errors", "cluster.log_limit", "cluster.loop_stalls", "cluster.spin_wait", "cluster.zmq_frames",
     "cluster.port_reservations"),
    ("cluster.account_keys", "cluster.setting_texts", "cluster.config", "cluster.rocketmq_keys", "cluster.rocketmq_defaults", "cluster.config_file"),
    ("cluster.wire_format", "cluster.remoting_format", "cluster.fastjson_format", "cluster.mq_version",
     "cluster.ack_batch_format",
     "cluster.zmtp_format"),
    ("cluster.shm", "cluster.json_files", "cluster.live_settings"),
    ("cluster.supervision",),
    ("cluster.protocol", "cluster.request_dispatch", "cluster.event_loop", "cluster.fast_failure", "cluster.tls",
     "cluster.client_transport", "cluster.zmq_transport", "cluster.zmtp_client", "cluster.zmtp_calls",
     "cluster.zmtp_io", "cluster.remoting_admission", "cluster.arrival_stamps",
     "cluster.remoting_transport", "cluster.zmtp_door", "cluster.http_door",
     "cluster.acl", "cluster.remoting_client", "cluster.filter", "cluster.receipt_handle",
     "cluster.topic_attributes", "cluster.refusals"),
    ("cluster.errors",),
    ("cluster.namesrv", "cluster.namesrv_kv", "cluster.namesrv_admin"),
    ("cluster.controller", "cluster.broker", "cluster.client", "cluster.metrics", "cluster.proxy", "cluster.console"),
    ("cluster.procs",),
    ("cluster.topology",),
    ("cluster.testing", "cluster.cli", "cluster.pytest_plugin"),
    ("cluster",),
    ("spark", "perf"),
]
# Same layer, but neither may import the other.
_FORBIDDEN_BY_PATH = [("cluster.broker", "cluster.client"), ("cluster.client", "cluster.broker"),
                      ("cluster.broker", "cluster.controller"), ("cluster.broker", "cluster.proxy"),
                      ("cluster.proxy", "cluster.broker"), ("cluster.console", "cluster.broker"),
                      ("cluster.broker", "cluster.console"),
                      # The loop is the mechanism, overload's fast failure a policy that watches it: what the
                      # loop measures for it (its own stalls) is cluster.loop_stalls, below both.
                      ("cluster.event_loop", "cluster.fast_failure")]
# The store's modules are the broker's: a client, the proxy, the console, the metrics exporter and
# the CLI speak the message's vocabulary (cluster.message), never the store's layouts or state.
_SHM_FREE_BY_PATH = ("cluster.client", "cluster.proxy", "cluster.console", "cluster.metrics", "cluster.cli")
# What cluster.message may import beside itself: the pure byte helpers of the lowest layer its layouts
# (the record, the batch body) are written with.
_MESSAGE_MAY_IMPORT_BY_PATH = ("cluster.field_tables", "cluster.format_errors")
LAYERS = [tuple(f"{INSTALLED_ROOT}.{name}" for name in layer) for layer in _LAYERS_BY_PATH]
FORBIDDEN = [(f"{INSTALLED_ROOT}.{low}", f"{INSTALLED_ROOT}.{high}") for low, high in _FORBIDDEN_BY_PATH]
SHM = f"{INSTALLED_ROOT}.cluster.shm"
MESSAGE = f"{INSTALLED_ROOT}.cluster.message"
SHM_FREE = tuple(f"{INSTALLED_ROOT}.{name}" for name in _SHM_FREE_BY_PATH)
MESSAGE_MAY_IMPORT = tuple(f"{INSTALLED_ROOT}.{name}" for name in _MESSAGE_MAY_IMPORT_BY_PATH)


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([INSTALLED_ROOT, *parts])


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            found[_module_name(path)] = path
    return found


def _imports(path: pathlib.Path, module: str, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in known else source)
    return {t for t in targets if t.split(".")[0] in (INSTALLED_ROOT, *PACKAGES)}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: {t for t in _imports(path, name, known) if t != name} for name, path in modules.items()}


def _layer_of(module: str) -> tuple[int, str]:
    best = (-1, "")
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best[1]):
                best = (rank, prefix)
    return best


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in _modules() if _layer_of(m)[0] < 0)
    assert not unplaced, f"modules outside every layer (add them to LAYERS): {unplaced}"


def test_imports_name_the_installed_package():
    """``import cluster`` from a checkout would load a second copy of every module it reaches."""
    bare = sorted(f"{module} -> {target}" for module, targets in _graph().items()
                  for target in targets if target.split(".")[0] in PACKAGES)
    assert not bare, f"imports by checkout directory instead of {INSTALLED_ROOT}.*:\n" + "\n".join(bare)


def test_imports_point_down():
    upward = []
    for module, targets in _graph().items():
        rank, home = _layer_of(module)
        for target in targets:
            target_rank, target_home = _layer_of(target)
            if target_rank > rank:
                upward.append(f"{module} ({home}) -> {target} ({target_home})")
            for low, high in FORBIDDEN:
                if home == low and target_home == high:
                    upward.append(f"{module} -> {target} ({low} may not import {high})")
    assert not upward, "imports that point up the layers:\n" + "\n".join(sorted(upward))


def test_clients_proxy_console_metrics_and_cli_import_no_store_module():
    found = sorted(f"{module} -> {target}" for module, targets in _graph().items()
                   if module.startswith(tuple(p + "." for p in SHM_FREE)) or module in SHM_FREE
                   for target in targets if target == SHM or target.startswith(SHM + "."))
    assert not found, "store modules imported above the broker (speak cluster.message instead):\n" + "\n".join(found)


def test_the_message_vocabulary_imports_nothing_of_ours():
    """cluster.message is below everything: the store, the broker and the clients all import it. Beside
    itself it may import only the byte helpers its layouts are written with."""
    outside = sorted(f"{module} -> {target}" for module, targets in _graph().items()
                     if module == MESSAGE or module.startswith(MESSAGE + ".")
                     for target in targets if not target.startswith(MESSAGE) and target not in MESSAGE_MAY_IMPORT)
    assert not outside, "cluster.message imports outside itself:\n" + "\n".join(outside)


def test_no_import_circle():
    graph = _graph()
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not circles, f"import circles: {circles}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_the_line_limit(package):
    too_long = []
    for path in sorted((REPO / package).rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MODULE_LINES_MAX:
            too_long.append(f"{path.relative_to(REPO)}: {lines}")
    assert not too_long, f"modules over {MODULE_LINES_MAX} lines: {too_long}"
