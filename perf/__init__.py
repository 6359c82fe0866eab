"""RocketBox benchmarks: micro-benchmarks of the hot paths and an end-to-end runner.

Map:

    test_micro.py   pytest-benchmark micro-benchmarks (record encode/decode, ConsumeQueue,
                    IndexFile, wire header, one RPC round trip over ZeroMQ); each states
                    its back-of-envelope expectation in its docstring
    conftest.py     the ``bench`` fixture and quick mode (ROCKETBOX_BENCH_QUICK=1 or
                    ``--bench-quick``: one round, one iteration)
    runner.py       ``python -m rocketbox.perf``: real clusters (LocalCluster), one scenario each
                    (scenarios/, table in its ``__init__``), a rich table and perf/results.json;
                    targets beside the figures (report.py, harness.py: what scenarios share)
    profile.py      ``python -m rocketbox.perf.profile``: py-spy over the broker, reput and a
                    producer process under batched produce, top functions by share
    compare.py      ``python -m rocketbox.perf --compare``: ours against Redis Streams and NATS
                    JetStream (peers/, ``make peers``), the same measures in one run, a
                    table with "ours / best peer", perf/compare.json and compare.png
                    (compare_table.py; results_md.py rewrites RESULTS.md's tables); then a
                    row per door (door_table.py, door_rows.py): remoting through RocketMQ's
                    C++ client (remoting_cpp_bench.py), gRPC through its Node.js client
                    (grpc_node_bench.js, ``make node-client``), Apache RocketMQ
                    (peers/apache_rocketmq.py) through the same C++ client
    peers/          one module a peer (start/stop its server on 127.0.0.1, its client's
                    best batching) and the measures run on each (base.py)
    raw_sender.py, offered_load.py, disk_throttle.py
                    the overload scenario's load (also used by tests/fault/test_overload.py)
    grpc_bench.py, grpc_floor.py
                    the gRPC scenario's client run and its no-store floor
    latency_ab.py, batch_tail.py, latency_floor.py
                    the probes behind RESULTS.md's latency sections (commands there): one sync
                    send under polling settings, batched sync sends per replication x flush
                    mode, a bare round trip between two processes
    RESULTS.md      the latest full run and where the time goes

Everything binds 127.0.0.1 only (Apache RocketMQ 4.9.8 itself cannot be told to; it is only
ever connected to on 127.0.0.1); every loop is bounded in count and in time.
The test suite keeps all of this from rotting through tests/test_perf_quick.py.
"""
