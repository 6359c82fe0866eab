"""``make run`` / ``python -m rocketbox.spark.job``: a cluster, a Spark-driven load, the checker, a report.

1. Brings a cluster up (``LocalCluster``), or uses one elsewhere (``--namesrv``).
2. Starts a push-consumer group (``--members`` processes) on a fresh topic.
3. Runs the load as a Spark job (``--tasks`` tasks, each a producer; spark/loadgen.py)
   with a progress bar, optionally injecting faults (``--faults``) into the broker.
4. Waits for the group to catch up, reads the topic back through the DataSource too,
   and runs every check of spark/checker.py on the history and both reads.
5. Prints the report, writes ``report.json`` and ``latency.png`` under ``--out``.

Every step shows while it runs and says how long it took (spark/phases.py); Spark's own output
(its start-up warnings, its log, its Python workers') goes to ``--out``/spark.log.

Exits 1 when any anomaly is unexplained (a lost acknowledged message among them).

``--failover``: the cluster has a slave and automatic failover (controllers in the NameServers,
a SYNC_MASTER group whose master the controller elects); faults then aim at the master of the
moment, ``failover-master`` stops it until another is elected, and the report adds the
failovers, the time from each fault to the new master and whether the replicas' CommitLogs
are byte-identical after the load (exit 1 if not).
The same job runs against a Spark cluster (``--master spark://host:7077``; its workers
need rocketbox installed) and against a RocketBox cluster on other hosts (``--namesrv``;
faults then need ``--cluster-dir``, the data directory of that cluster's supervisor, which
must be on this host).

``--transport remoting``: every client of the run (load, push group, read-back, admin) speaks
RocketMQ's remoting protocol instead of RocketBox's ZeroMQ door, so ``--namesrv`` may be any
RocketMQ NameServer (Apache RocketMQ's ``host:9876`` as well as RocketBox's remoting door);
without ``--namesrv`` the job starts a local cluster and goes through its remoting door. Against
a cluster that is not a local supervisor's there is nothing to inject faults with: the report
says so.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import threading
import time

from rocketbox.cluster.config import ASYNC_FLUSH, SYNC_FLUSH, SYNC_MASTER

PROGRESS_POLL_S = 0.25
CATCH_UP_TIMEOUT_S = 180.0
CATCH_UP_STALL_S = 20.0     # committed offsets and queue ends unchanged this long: stop waiting
LOAD_GROUP = "RocketBoxCheckGroup"
SPARK_LOG_NAME = "spark.log"   # under --out: the JVM's output and its workers'


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m rocketbox.spark.job", description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=100_000, help="messages to send (default 100000)")
    p.add_argument("--keys", type=int, default=100, help="distinct keys; each key's messages are ordered")
    p.add_argument("--tasks", type=int, default=2, help="Spark load tasks, one producer each")
    p.add_argument("--batch", type=int, default=32, help="messages per send request (1: single sends)")
    p.add_argument("--rate", type=float, default=None, help="target msg/s for all tasks (default flat out)")
    p.add_argument("--body-bytes", type=int, default=100)
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--members", type=int, default=2, help="push consumers in the checking group")
    p.add_argument("--flush-mode", choices=("sync", "async"), default="sync")
    p.add_argument("--faults", action="store_true",
                   help="SIGKILL the broker master, its flush and reput workers, SIGSTOP/SIGCONT the master, "
                        "at random times during the load")
    p.add_argument("--fault-kinds", default=None,
                   help="comma-separated, of kill-master, kill-flush, kill-reput, pause-master, failover-master, "
                        "power (default: all but failover-master and power; with --failover: "
                        "kill-master,failover-master)")
    p.add_argument("--failover", action="store_true",
                   help="a master, an in-sync slave (SYNC_MASTER) and automatic failover; compare the "
                        "replicas after the load")
    p.add_argument("--fault-interval", default="1,3", help="seconds between faults: min,max")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--namesrv", default=None, help="use this cluster (host:port[;...]) instead of starting one")
    p.add_argument("--cluster-dir", default=None, help="data dir of that cluster's supervisor (for --faults)")
    p.add_argument("--out", default="run-report", help="directory for report.json, latency.png, history")
    p.add_argument("--request-timeout-ms", type=int, default=3_000)
    p.add_argument("--transport", choices=("native", "remoting"), default="native",
                   help="the clients' protocol: native (RocketBox's ZeroMQ door) or remoting (RocketMQ's, so "
                        "--namesrv may be any RocketMQ NameServer, Apache's included)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.faults and not (args.cluster_dir or not args.namesrv):
        print("--faults against a cluster elsewhere needs its data directory (--cluster-dir) on this host")
        return 2
    if args.namesrv:
        return 0 if run(args, args.namesrv, args.cluster_dir)["verdict_ok"] else 1
    from rocketbox.cluster.testing import LocalCluster
    from rich.console import Console

    from rocketbox.spark.phases import Phases
    with tempfile.TemporaryDirectory(prefix="rocketbox-run-") as tmp:
        started = time.monotonic()
        mode = SYNC_FLUSH if args.flush_mode == "sync" else ASYNC_FLUSH
        failover = dict(slaves=1, failover=True, broker_overrides={"broker_role": SYNC_MASTER}) \
            if args.failover else {}
        cluster = LocalCluster(os.path.join(tmp, "cluster"), flush_mode=mode, **failover)
        if args.faults and "power" in (args.fault_kinds or "").split(","):
            # Power cuts rewrite broker-a's store from a durable image of every sync its processes make.
            from rocketbox.cluster.shm import power_cut
            os.environ[power_cut.IMAGE_ENV] = os.path.join(tmp, "durable-image")
            power_cut.start_image(cluster.topology.brokers[0].store.store_dir, os.environ[power_cut.IMAGE_ENV])
        with Phases(Console()).step("cluster start"):
            cluster.start()
        try:
            namesrv = cluster.remoting_namesrv if args.transport == "remoting" else cluster.namesrv
            Console().print(f"cluster up in {time.monotonic() - started:.2f} s: NameServer {namesrv} "
                            f"({args.transport} door), flush {args.flush_mode}"
                            + (", a slave, automatic failover" if args.failover else ""))
            return 0 if run(args, namesrv, cluster.data_dir)["verdict_ok"] else 1
        finally:
            with Phases(Console()).step("cluster stop"):
                cluster.stop()


def run(args: argparse.Namespace, namesrv: str, cluster_dir: str | None, spark=None) -> dict:
    """The whole check against the cluster at ``namesrv``; the report as a dict (``verdict_ok``).
    ``spark``: a session to use (and leave running); else one is made and stopped here."""
    from rich.console import Console

    from rocketbox.spark.datasource import register
    from rocketbox.spark.phases import Phases
    from rocketbox.spark.session import spark_session

    console = Console()
    phases = Phases(console)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    addresses = tuple(a for a in namesrv.replace(",", ";").split(";") if a)
    own_session = spark is None
    if own_session:
        spark_log = os.path.join(out, SPARK_LOG_NAME)
        console.print(f"Spark's own messages (its start-up warnings, its log) go to {spark_log}", highlight=False)
        with phases.step("spark session", spinner=False):   # the JVM's output moves while it starts
            spark = spark_session(args.master, app_name="rocketbox-load", log_path=spark_log)
    register(spark)
    try:
        load = _load_and_consume(args, console, spark, addresses, cluster_dir, out, phases)
        result = _check_and_report(args, console, spark, addresses, load, out, phases)
    finally:
        if own_session:
            spark.stop()
    return result


def _load_and_consume(args, console, spark, addresses, cluster_dir, out, phases) -> dict:
    """Topic, push group, the Spark load (with faults), the group caught up; where things are."""
    from rocketbox.cluster import Admin
    from rocketbox.cluster.client.routes import config_for
    from rocketbox.spark import loadgen
    from rocketbox.cluster.testing import compare_replicas
    from rocketbox.spark.faults import DEFAULT_KINDS, FAILOVER_DEFAULT_KINDS, FaultInjector
    from rocketbox.spark.push_group import PushGroup

    cfg = config_for(addresses, transport=args.transport)
    topic = f"Load{time.strftime('%Y%m%d%H%M%S')}{os.getpid()}"
    history_path = os.path.join(out, "history.parquet")
    with Admin(config=cfg) as admin:
        plan = loadgen.LoadPlan(addresses, topic, args.messages, keys=args.keys, tasks=args.tasks,
                                body_bytes=args.body_bytes, batch=args.batch, rate_msg_s=args.rate,
                                request_timeout_ms=args.request_timeout_ms, transport=args.transport)
        with phases.step("push group start"):
            admin.create_topic(topic, args.queues)
            group = PushGroup(addresses, topic, LOAD_GROUP, os.path.join(out, "push"), members=args.members,
                              transport=args.transport).start()
        injector = None
        if args.faults:
            low, high = (float(x) for x in args.fault_interval.split(","))
            kinds = args.fault_kinds.split(",") if args.fault_kinds else \
                (FAILOVER_DEFAULT_KINDS if args.failover else DEFAULT_KINDS)
            injector = FaultInjector(cluster_dir, kinds=kinds, interval_s=(low, high), seed=args.seed,
                                     namesrv=";".join(addresses) if args.failover else None)
        with phases.step("load (Spark job)", spinner=False):   # its own bars
            try:
                # Faults begin with the first stored message: earlier ones would test only an idle broker.
                load_error = _load_with_progress(console, admin, spark, plan, history_path, LOAD_GROUP,
                                                 on_first_stored=injector.start if injector else None)
            finally:
                faults = injector.stop() if injector else []
        if load_error is not None:
            group.stop()
            raise load_error
        fault_error = None
        if injector is not None and injector.error is not None:
            fault_error = f"{type(injector.error).__name__}: {injector.error}"
            console.print(f"[red]fault injection failed: {fault_error}")

        with phases.step("push group catch-up and stop"):
            catch_up = _await_catch_up(admin, topic)
            if not catch_up["caught_up"]:
                console.print(f"[yellow]the push group's committed offsets stayed {catch_up['behind']:,} messages "
                              f"behind the queue ends ({catch_up['stopped']}, {catch_up['waited_s']:.0f} s); "
                              "what it did not read is reported as lost")
            exit_codes = group.stop()
        replicas = None
        if args.failover and cluster_dir:
            with phases.step("replica comparison"):
                replicas = compare_replicas(cluster_dir, ";".join(addresses))
    if any(code != 0 for code in exit_codes):
        console.print(f"[red]a push-group member failed: exit codes {exit_codes}")
    return {"topic": topic, "history": history_path, "group": group, "faults": faults, "cluster_dir": cluster_dir,
            "member_exit_codes": exit_codes, "fault_error": fault_error, "replicas": replicas,
            "catch_up": catch_up}


def _check_and_report(args, console, spark, addresses, load, out, phases) -> dict:
    from rocketbox.spark import checker, report
    from rocketbox.spark.faults import POWER, events_as_dicts
    from rocketbox.spark.reads import datasource_reads

    # Cached: every check and every measure scans these again (about a fifth of the check time).
    history = spark.read.parquet(load["history"]).cache()
    datasource_path = os.path.join(out, "reads-datasource.parquet")
    with phases.step("read back (DataSource)"):
        messages = (spark.read.format("rocketbox").option("namesrv", ";".join(addresses))
                    .option("topic", load["topic"]).option("transport", args.transport).load())
        datasource_reads(messages).write.mode("overwrite").parquet(datasource_path)
    group = load["group"]
    reads = spark.read.parquet(datasource_path).unionByName(spark.read.parquet(group.reads_glob())).cache()
    commits = spark.read.parquet(group.commits_glob()).cache()
    power_cuts = [(e.target, e.start_ns, e.end_ns) for e in load["faults"] if e.kind == POWER]
    with phases.step("check"):
        anomalies = checker.check_all(history, reads, commits, readers=["datasource", "push"],
                                      power_cuts=power_cuts).cache()
        anomalies.count()
    with phases.step("measures"):
        result = report.measures(history, reads, anomalies)
    result.update(target=_target(args, addresses, load["cluster_dir"]),
                  topic=load["topic"], flush_mode=args.flush_mode, faults=events_as_dicts(load["faults"]),
                  settings=dict(vars(args)), failover_mode=bool(args.failover), fault_error=load["fault_error"],
                  replicas=load["replicas"], catch_up=load["catch_up"],
                  member_exit_codes=load["member_exit_codes"])
    if args.failover:
        result["failover"] = report.failover_summary(result["faults"])
    anomalies.filter("explained is null").limit(1000).toPandas().to_json(
        os.path.join(out, "anomalies.json"), orient="records", indent=1)
    report.print_report(result, console)
    with phases.step("plot"):
        report.plot(history, reads, result["faults"], os.path.join(out, "latency.png"))
    for frame in (anomalies, history, reads, commits):
        frame.unpersist()
    result["phases_s"] = phases.seconds
    replicas_ok = load["replicas"] is None or load["replicas"]["identical"]
    result["verdict_ok"] = (result["unexplained"] == 0 and all(c == 0 for c in load["member_exit_codes"])
                            and replicas_ok and load["fault_error"] is None)
    report.write_json(result, os.path.join(out, "report.json"))
    console.print("phases: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.seconds.items()))
    console.print(f"report: {out}/report.json, plot: {out}/latency.png, history: {load['history']}")
    if result["verdict_ok"]:
        console.print("[green]OK: nothing lost, every duplicate explained"
                      + (", replicas byte-identical" if load["replicas"] else ""))
    else:
        reasons = [f"{result['unexplained']} unexplained anomalies (see {out}/anomalies.json)"]
        if not replicas_ok:
            reasons.append(f"replicas not identical: {load['replicas']}")
        if load["fault_error"]:
            reasons.append(f"fault injection failed: {load['fault_error']}")
        if any(c != 0 for c in load["member_exit_codes"]):
            reasons.append(f"push-group member exit codes {load['member_exit_codes']}")
        console.print("[red]FAILED: " + "; ".join(reasons))
    return result


def _target(args, addresses, cluster_dir) -> dict:
    """What the run was aimed at, and whether faults could be injected and why not."""
    if args.faults:
        faults = "on"
    elif cluster_dir is None:
        faults = ("off: no local supervisor of this cluster (--cluster-dir) to inject them with"
                  if args.namesrv else "off")
    else:
        faults = "off (--faults not given)"
    return {"namesrv": ";".join(addresses), "transport": args.transport, "faults": faults,
            "local_cluster": not args.namesrv}


def _load_with_progress(console, admin, spark, plan, history_path: str, group: str,
                        on_first_stored=None) -> BaseException | None:
    """Runs the Spark load in a thread while a bar shows stored and consumed counts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rocketbox.spark import loadgen
    error: list[BaseException] = []

    def load() -> None:
        try:
            loadgen.generate(spark, plan, history_path)
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=load, name="spark-load", daemon=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        stored = progress.add_task("stored  ", total=plan.messages)
        consumed = progress.add_task("consumed", total=plan.messages)
        thread.start()
        deadline = time.monotonic() + plan.time_s_max + 120
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(PROGRESS_POLL_S)
            try:
                rows = admin.queue_offsets(plan.topic, group)
            except Exception:   # a broker being restarted by a fault: the bar just waits
                continue
            stored_now = sum(r["maxOffset"] for r in rows)
            if stored_now and on_first_stored is not None:
                on_first_stored()
                on_first_stored = None
            progress.update(stored, completed=min(plan.messages, stored_now))
            progress.update(consumed, completed=min(plan.messages, sum(r.get("consumerOffset") or 0 for r in rows)))
    if thread.is_alive():
        return TimeoutError("the Spark load did not finish in time")
    return error[0] if error else None


def _await_catch_up(admin, topic: str) -> dict:
    """Until the push group's committed offsets reach every queue's end, at most CATCH_UP_TIMEOUT_S,
    and not longer than CATCH_UP_STALL_S without any offset moving (a commit that never reaches
    the master stalls it for good). How it ended: caught_up, behind (messages), the last offsets."""
    started = last_change = time.monotonic()
    last = None
    while True:
        try:
            rows = admin.queue_offsets(topic, LOAD_GROUP)
        except Exception:   # a broker still restarting
            rows = None
        now = time.monotonic()
        if rows:
            state = [(r["queueId"], r["maxOffset"], r.get("consumerOffset") or 0) for r in rows]
            behind = sum(max(0, m - c) for _q, m, c in state)
            if behind == 0:
                return {"caught_up": True, "behind": 0, "waited_s": now - started, "stopped": None, "offsets": state}
            if state != last:
                last, last_change = state, now
        stopped = ("no offset moved for %.0f s" % CATCH_UP_STALL_S if last and now - last_change > CATCH_UP_STALL_S
                   else "time-out" if now - started > CATCH_UP_TIMEOUT_S else None)
        if stopped:
            behind = sum(max(0, m - c) for _q, m, c in last) if last else None
            return {"caught_up": False, "behind": behind, "waited_s": now - started, "stopped": stopped,
                    "offsets": last}
        time.sleep(0.25)


if __name__ == "__main__":
    raise SystemExit(main())
