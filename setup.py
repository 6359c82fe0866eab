"""RocketBox packaging. ``pip install -e .`` (``make install``) also builds the
native helper in place: cluster/_native/build.py via cffi_modules."""

from setuptools import find_packages, setup

# What gets installed has one top-level name, rocketbox: the checkout's directories cluster/, spark/
# and perf/ become rocketbox.cluster, rocketbox.spark and rocketbox.perf, since bare names like
# `cluster` and `perf` belong to other distributions. `rocketbox` itself is a namespace package.
INSTALLED_ROOT = "rocketbox"
CHECKOUT_PACKAGES = ("cluster", "spark", "perf")
PACKAGES = [f"{INSTALLED_ROOT}.{top}{'.' + sub if sub else ''}"
            for top in CHECKOUT_PACKAGES for sub in ["", *find_packages(top)]]
PACKAGE_DIR = {f"{INSTALLED_ROOT}.{top}": top for top in CHECKOUT_PACKAGES}

setup(
    name="rocketbox",
    version="0.1.0",
    description="Apache RocketMQ's architecture as a multi-process cluster on one machine",
    python_requires=">=3.11",
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    setup_requires=["cffi>=1.15"],
    cffi_modules=["cluster/_native/build.py:ffibuilder"],
    # pyspark 4.2 is the first with latestOffset(start, limit) for maxOffsetsPerTrigger; its Python
    # DataSource API moves rows through Arrow (pyarrow) and imports pandas, which it supports below 3.
    # matplotlib draws the report's latency plot. pysyncobj is the consensus (Raft) under the failover
    # controller (cluster/controller/raft.py): a proven library rather than a home-made Raft.
    # prometheus-client writes the metrics endpoint (cluster/metrics/): the reference implementation of
    # Prometheus's exposition format, and of its parser, which the tests read the endpoint with.
    # setproctitle gives every process a title ps and top show ("rocketbox: broker-a reput"): rewriting
    # the argv area portably (and safely for environ behind it) is its whole job, in C.
    # rocketmq-python-client ships the generated gRPC modules of RocketMQ 5's protocol
    # (rocketmq.grpc_protocol: apache.rocketmq.v2's messages and MessagingService), which the proxy
    # (cluster/proxy/) serves with grpcio; depending on the published modules rather than copying or
    # regenerating the .proto files keeps the wire identical to the official clients'. Importing them
    # loads that client package (OpenTelemetry and all), so only cluster/proxy/protos.py imports them.
    # Its own client is never used here: the tests drive it from .venv-rocketmq5 (make real-clients).
    # The web console (cluster/console/) is an ASGI application: uvicorn serves it, Starlette routes it
    # (python-multipart parses its forms), Jinja2 renders its pages on the server (autoescaped), so it
    # needs no Node build and no JavaScript framework: one small script of our own refreshes and draws.
    # Each dependency is bounded by the versions known to work: from the oldest we rely on to below
    # the next major (constraints.txt pins the exact versions CI installs).
    install_requires=["pyzmq>=25,<28", "cffi>=1.15,<3", "psutil>=5.9,<8", "rich>=13,<16", "pyspark>=4.2,<5",
                      "pyarrow>=14,<27", "pandas>=2.0,<3", "matplotlib>=3.7,<4", "pysyncobj>=0.3.17,<0.4",
                      "prometheus-client>=0.20,<1", "setproctitle>=1.3,<2",
                      "rocketmq-python-client>=5.1.2,<6",
                      "uvicorn>=0.30,<1", "starlette>=0.40,<2", "jinja2>=3.1,<4", "python-multipart>=0.0.9,<0.1",
                      # plain_acl.yml, RocketMQ's ACL file (cluster/acl/)
                      "pyyaml>=6,<7",
                      # JSON headers of the remoting door: a fifth of json's time a header (perf/RESULTS.md)
                      "orjson>=3.9,<4",
                      # The failover controller's Raft traffic is authenticated and encrypted (PySyncObj's
                      # Fernet, keyed from the cluster's controller secret): nothing a stranger sends is
                      # unpickled. And `cluster tls` makes a self-signed certificate and key (cluster/tls.py):
                      # the standard library's ssl can use a certificate but not make one.
                      "cryptography>=42,<51",
                      # Java clients 4.9.8+ compress bodies with zlib, LZ4 or ZSTD (the type in sysFlag bits
                      # 8-10, RocketMQ's CompressionType): every client of ours must inflate all three.
                      "lz4>=4.3,<5", "zstandard>=0.22,<1"],
    extras_require={
        # pytest-timeout bounds every test (pyproject.toml), so a hung test fails instead of stalling CI.
        # setuptools 70.1+ builds a wheel by itself, so tests/integration/test_packaging.py can check
        # what an install puts into site-packages offline (no build isolation, no `wheel` package).
        "test": ["pytest>=8,<10", "pytest-benchmark>=4,<6", "hypothesis>=6.80,<7", "pytest-timeout>=2.2,<3",
                 "setuptools>=70.1,<85",
                 # The console's browser tests drive Debian's chromium (make browser) through Playwright's
                 # Python API; its own browser download (playwright install) is never used.
                 "playwright>=1.45,<2",
                 # make test runs the suite on two workers, a test file each at a time (--dist loadfile):
                 # most tests wait on clusters and clients, so two at once nearly halve CI's wall time.
                 "pytest-xdist>=3.5,<4",
                 # Coverage-guided fuzzing (libFuzzer) of the parsers in tests/fuzz/: it reaches branches
                 # random inputs seldom do (it found in seconds a crash hypothesis had not). A native
                 # wheel: where it does not install, those tests skip and say why.
                 "atheris>=2.3,<4"],
        # Clients of the peers `python -m rocketbox.perf --compare` measures (`make peers` also installs the servers).
        "peers": ["redis[hiredis]", "nats-py"],
    },
    # pytest11: the pytest plugin (cluster/pytest_plugin/), so an application's own tests get real clusters.
    entry_points={"console_scripts": ["cluster = rocketbox.cluster.cli:run"],
                  "pytest11": ["rocketbox = rocketbox.cluster.pytest_plugin"]},
    # The console's page templates, script and style sheet.
    package_data={"rocketbox.cluster.console": ["templates/*.html", "static/*.js", "static/*.css"]},
    zip_safe=False,
)
