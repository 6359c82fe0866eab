"""The Spark check against a failover cluster, small: a master and an in-sync slave
(SYNC_MASTER, sync flush) whose master the controller elects, a Spark load during which the
master of the moment is stopped until another is elected (failover-master) and SIGKILLed
(kill-master), and the verdict: nothing acknowledged lost, every duplicate explained, the
replicas' CommitLogs byte-identical after the load."""

from rocketbox.cluster.config import SYNC_FLUSH, SYNC_MASTER
from rocketbox.cluster.testing import LocalCluster
from rocketbox.spark.job import parse_args, run


def test_spark_load_through_failovers_loses_nothing_and_replicas_match(spark, tmp_path):
    args = parse_args(["--failover", "--messages", "1200", "--keys", "30", "--batch", "16", "--rate", "250",
                       "--faults", "--fault-kinds", "failover-master,kill-master", "--fault-interval", "0.3,0.6",
                       "--seed", "10", "--out", str(tmp_path / "report")])
    with LocalCluster(str(tmp_path / "cluster"), slaves=1, failover=True, flush_mode=SYNC_FLUSH,
                      broker_overrides={"broker_role": SYNC_MASTER}) as cluster:
        result = run(args, cluster.namesrv, cluster.data_dir, spark=spark)
    first_invoke_ns, last_complete_ns = result["load_span_ns"]
    during_load = [f for f in result["faults"] if first_invoke_ns <= f["start_ns"] <= last_complete_ns]
    # Both kinds end in an election (a SIGKILLed master is replaced too); on a busy machine one
    # recovery can outlast the load, so one failover inside it is what the check needs.
    failovers = [f for f in during_load if f["failover"]]
    assert failovers, f"faults inside the load: {result['faults']}"
    for fault in failovers:   # the stopped master was replaced by the other replica
        assert fault["master_after"] != fault["master_before"] and fault["to_new_master_s"] > 0
    assert result["failover"]["failovers"] >= len(failovers)
    assert result["fault_error"] is None
    assert result["member_exit_codes"] and all(code == 0 for code in result["member_exit_codes"])
    assert result["acknowledged"] > 0
    assert result["lost"] == 0
    assert result["unexplained"] == 0, result["anomalies"]
    assert result["replicas"]["identical"], result["replicas"]
    assert result["replicas"]["end"] > 0
    assert result["verdict_ok"]
    assert (tmp_path / "report" / "report.json").exists()
