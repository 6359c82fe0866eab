"""What a test may choose about its cluster: the keywords of ``@pytest.mark.rocketbox(...)``, of an
indirect parametrization of ``rocketbox_cluster`` and of ``rocketbox_session_options``; their
defaults, their checks, and how the layers combine (pure: no pytest, no processes)."""

from __future__ import annotations

from rocketbox.cluster.config import ASYNC_FLUSH, FLUSH_MODES

READY_TIMEOUT = "ready_timeout_s"
# Option -> default. Each is LocalCluster's keyword of the same name except READY_TIMEOUT, which is
# LocalCluster.start's. A role LocalCluster learns to start becomes an option by one line here, and
# its address an endpoint by one line in handle.ENDPOINTS.
DEFAULTS: dict[str, object] = {
    "namesrvs": 1,
    "brokers": 1,
    "slaves": 0,               # per broker group
    "flush_mode": ASYNC_FLUSH,
    "failover": False,         # controllers in the NameServers elect each group's master
    "remoting": True,          # RocketMQ's remoting door (what RocketMQ's own clients take)
    "metrics": True,           # the Prometheus exporter
    "proxy": False,            # the gRPC proxy: off, as it loads the gRPC packages
    "console": False,          # the web console: off, as it loads the web packages
    "broker_overrides": None,  # BrokerConfig fields for every broker, e.g. {"auto_create_topic_enable": False}
    "store_overrides": None,   # StoreConfig fields for every broker's store
    "namesrv_overrides": None,
    "proxy_overrides": None,   # ProxySettings fields
    READY_TIMEOUT: 60.0,
}
_COUNTS_MIN = {"namesrvs": 1, "brokers": 1, "slaves": 0}
_SWITCHES = ("failover", "remoting", "metrics", "proxy", "console")
_OVERRIDES = ("broker_overrides", "store_overrides", "namesrv_overrides", "proxy_overrides")


def problems(options: dict) -> list[str]:
    """Why ``options`` cannot start a cluster, one line a reason (empty when they can)."""
    found = [f"unknown option {name!r} (options: {', '.join(DEFAULTS)})" for name in options if name not in DEFAULTS]
    for name, least in _COUNTS_MIN.items():
        value = options.get(name, DEFAULTS[name])
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            found.append(f"{name} must be a whole number of at least {least}, not {value!r}")
    flush_mode = options.get("flush_mode", DEFAULTS["flush_mode"])
    if flush_mode not in FLUSH_MODES:
        found.append(f"flush_mode must be one of {', '.join(FLUSH_MODES)}, not {flush_mode!r}")
    found += [f"{name} must be True or False, not {options[name]!r}"
              for name in _SWITCHES if name in options and not isinstance(options[name], bool)]
    found += [f"{name} must be a dict of settings or None, not {options[name]!r}"
              for name in _OVERRIDES if options.get(name) is not None and not isinstance(options[name], dict)]
    timeout = options.get(READY_TIMEOUT, DEFAULTS[READY_TIMEOUT])
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        found.append(f"{READY_TIMEOUT} must be a positive number of seconds, not {timeout!r}")
    return found


def combine(*layers: dict | None) -> dict:
    """DEFAULTS, then each layer over the previous ones (a later layer wins); ValueError naming
    every problem when the result cannot start a cluster."""
    combined = dict(DEFAULTS)
    for layer in layers:
        combined.update(layer or {})
    found = problems(combined)
    if found:
        raise ValueError("; ".join(found))
    return combined


def from_markers(markers) -> dict:
    """The keywords of ``rocketbox`` markers, closest first as ``Node.iter_markers`` yields them
    (a test's own marker wins over its class's, which wins over its module's ``pytestmark``)."""
    combined: dict = {}
    for marker in reversed(list(markers)):
        if marker.args:
            raise ValueError(f"@pytest.mark.rocketbox takes keywords only (e.g. brokers=2), not {marker.args!r}")
        combined.update(marker.kwargs)
    return combined


def cluster_keywords(options: dict) -> dict:
    """The options LocalCluster(...) takes."""
    return {name: value for name, value in options.items() if name != READY_TIMEOUT}
