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
    install_requires=["pyzmq", "cffi>=1.15", "psutil", "rich", "pyspark>=4.2,<5", "pyarrow", "pandas<3",
                      "matplotlib", "pysyncobj>=0.3.17"],
    extras_require={
        "test": ["pytest", "pytest-benchmark", "hypothesis"],
        # Clients of the peers `python -m perf --compare` measures (`make peers` also installs the servers).
        "peers": ["redis[hiredis]", "nats-py"],
    },
    entry_points={"console_scripts": ["cluster = cluster.cli:main"]},
    zip_safe=False,
)
