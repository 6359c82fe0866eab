"""RocketBox packaging. ``pip install -e .`` (``make install``) also builds the
native helper in place: cluster/_native/build.py via cffi_modules."""

from setuptools import find_packages, setup

setup(
    name="rocketbox",
    version="0.1.0",
    description="Apache RocketMQ's architecture as a multi-process cluster on one machine",
    python_requires=">=3.11",
    # spark and perf join when they become packages (an __init__.py).
    packages=find_packages(include=["cluster", "cluster.*", "spark", "spark.*", "perf", "perf.*"]),
    setup_requires=["cffi>=1.15"],
    cffi_modules=["cluster/_native/build.py:ffibuilder"],
    # pyspark 4.2 is the first with latestOffset(start, limit) for maxOffsetsPerTrigger; its Python
    # DataSource API moves rows through Arrow (pyarrow) and imports pandas, which it supports below 3.
    # matplotlib draws the report's latency plot. pysyncobj is the consensus (Raft) under the failover
    # controller (cluster/controller/raft.py): a proven library rather than a home-made Raft.
    # Each dependency is bounded by the versions known to work: from the oldest we rely on to below
    # the next major (constraints.txt pins the exact versions CI installs).
    install_requires=["pyzmq>=25,<28", "cffi>=1.15,<3", "psutil>=5.9,<8", "rich>=13,<16", "pyspark>=4.2,<5",
                      "pyarrow>=14,<27", "pandas>=2.0,<3", "matplotlib>=3.7,<4", "pysyncobj>=0.3.17,<0.4"],
    extras_require={
        # pytest-timeout bounds every test (pyproject.toml), so a hung test fails instead of stalling CI.
        "test": ["pytest>=8,<10", "pytest-benchmark>=4,<6", "hypothesis>=6.80,<7", "pytest-timeout>=2.2,<3"],
        # Clients of the peers `python -m perf --compare` measures (`make peers` also installs the servers).
        "peers": ["redis[hiredis]", "nats-py"],
    },
    entry_points={"console_scripts": ["cluster = cluster.cli:main"]},
    zip_safe=False,
)
