"""The whole Spark check, small: a sync-flush cluster, a Spark load, the broker master
SIGKILLed during it, and the checker's verdict: nothing acknowledged lost, every
duplicate explained, by both readers (DataSource and a push group)."""

from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.testing import LocalCluster
from rocketbox.spark.job import parse_args, run


def test_spark_load_with_master_kills_loses_nothing(spark, tmp_path):
    args = parse_args(["--messages", "12000", "--keys", "40", "--batch", "16", "--rate", "3000",
                       "--faults", "--fault-kinds", "kill-master", "--fault-interval", "1,1.5", "--seed", "7",
                       "--out", str(tmp_path / "report")])
    with LocalCluster(str(tmp_path / "cluster"), flush_mode=SYNC_FLUSH) as cluster:
        result = run(args, cluster.namesrv, cluster.data_dir, spark=spark)
    first_invoke_ns, last_complete_ns = result["load_span_ns"]
    kills_during_load = [f for f in result["faults"]
                         if f["kind"] == "kill-master" and first_invoke_ns <= f["start_ns"] <= last_complete_ns]
    assert kills_during_load, f"no kill landed inside the load: {result['faults']}"
    assert result["acknowledged"] > 0
    assert result["lost"] == 0
    assert result["unexplained"] == 0, result["anomalies"]
    # Both readers saw every acknowledged message, and nothing failed on the way.
    assert result["distinct_read"]["datasource"] >= result["acknowledged"]
    assert result["distinct_read"]["push"] >= result["acknowledged"]
    assert result["member_exit_codes"] and all(code == 0 for code in result["member_exit_codes"])
    assert result["fault_error"] is None
    assert result["verdict_ok"]
    assert (tmp_path / "report" / "latency.png").stat().st_size > 0
    assert (tmp_path / "report" / "report.json").exists()


def test_spark_load_with_power_cuts_of_the_broker_loses_nothing(spark, tmp_path, monkeypatch):
    """The ``power`` fault: broker-a's host loses power during the load (its processes frozen and
    killed, its store rewritten from the durable image of its syncs). Under sync flush the checker
    finds nothing acknowledged lost, and the push group catches up (its members send their commit
    points again, which the broker's reverted offsets need)."""
    from rocketbox.cluster.shm import power_cut
    args = parse_args(["--messages", "12000", "--keys", "40", "--batch", "16", "--rate", "3000",
                       "--faults", "--fault-kinds", "power", "--fault-interval", "1,1.5", "--seed", "11",
                       "--out", str(tmp_path / "report")])
    cluster = LocalCluster(str(tmp_path / "cluster"), flush_mode=SYNC_FLUSH)
    monkeypatch.setenv(power_cut.IMAGE_ENV, str(tmp_path / "image"))
    power_cut.start_image(cluster.topology.brokers[0].store.store_dir, str(tmp_path / "image"))
    with cluster:
        result = run(args, cluster.namesrv, cluster.data_dir, spark=spark)
    first_invoke_ns, last_complete_ns = result["load_span_ns"]
    cuts = [f for f in result["faults"] if f["kind"] == "power" and first_invoke_ns <= f["start_ns"] <= last_complete_ns]
    assert cuts, f"no power cut landed inside the load: {result['faults']}"
    assert result["acknowledged"] > 0 and result["lost"] == 0
    assert result["unexplained"] == 0, result["anomalies"]
    assert result["fault_error"] is None
    assert result["verdict_ok"]


def test_spark_load_through_the_remoting_door_loses_nothing(spark, tmp_path):
    """``--transport remoting``: load, push group, read-back and admin speak RocketMQ's protocol only
    (the job's way to any RocketMQ, Apache's included), here to RocketBox's remoting door, with the
    master SIGKILLed during the load."""
    args = parse_args(["--messages", "8000", "--keys", "40", "--batch", "16", "--rate", "3000",
                       "--transport", "remoting", "--faults", "--fault-kinds", "kill-master",
                       "--fault-interval", "1,1.5", "--seed", "5", "--out", str(tmp_path / "report")])
    with LocalCluster(str(tmp_path / "cluster"), flush_mode=SYNC_FLUSH) as cluster:
        result = run(args, cluster.remoting_namesrv, cluster.data_dir, spark=spark)
    assert result["target"] == {"namesrv": cluster.remoting_namesrv, "transport": "remoting", "faults": "on",
                                "local_cluster": True}
    assert any(f["kind"] == "kill-master" for f in result["faults"])
    assert result["acknowledged"] > 0 and result["lost"] == 0
    assert result["unexplained"] == 0, result["anomalies"]
    assert result["distinct_read"]["datasource"] >= result["acknowledged"]
    assert result["distinct_read"]["push"] >= result["acknowledged"]
    assert result["verdict_ok"]
