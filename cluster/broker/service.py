"""The broker main process: its handlers, its registration with NameServers, its wake-ups.

Runs on one thread (``EventLoop``): no locks. The store is appended here and only
here (this process owns ``write_pos``); the flush and reput workers are separate
processes that publish ``flushed_pos`` and ``dispatched_pos`` in the shared control
block and ping ``broker_notify`` when they move, which releases group-commit waiters
and wakes long-polling pulls.
"""

from __future__ import annotations

import logging
import time


from rocketbox.cluster.acl.records import readable_records, require_record
from rocketbox.cluster.broker import channels
from rocketbox.cluster.broker.admin import AdminProcessor
from rocketbox.cluster.broker.admin_acl import AclAdmin
from rocketbox.cluster.broker.admin_auth import AuthAdmin
from rocketbox.cluster.broker.admin_clients import ClientAdmin
from rocketbox.cluster.broker.admin_store import StoreAdmin
from rocketbox.cluster.broker.boot import BootedBroker
from rocketbox.cluster.broker.clients import ClientRegistry
from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.doors import BrokerDoors
from rocketbox.cluster.broker.durability import DurabilityWait
from rocketbox.cluster.broker.filtering import ClientConfigCheck, check_heartbeat_subscriptions
from rocketbox.cluster.broker.ha import HAClient, HAServer
from rocketbox.cluster.broker.sync_state import SyncStateSet
from rocketbox.cluster.broker.locks import LockProcessor
from rocketbox.cluster.broker.message_queries import MessageQueries
from rocketbox.cluster.broker.metrics import BrokerMetrics
from rocketbox.cluster.broker.send_lane import SendLane
from rocketbox.cluster.broker.offset_requests import OffsetRequests
from rocketbox.cluster.broker.offsets import ConsumerOffsetManager
from rocketbox.cluster.broker.pop import PopProcessor
from rocketbox.cluster.broker.pop_log import PopLog
from rocketbox.cluster.broker.pop_revive import TICK_S as REVIVE_TICK_S, PopReviver
from rocketbox.cluster.broker.pull import PullProcessor
from rocketbox.cluster.broker.reply import ReplyProcessor
from rocketbox.cluster.broker.request_table import BROKER_HANDLERS, handler_of
from rocketbox.cluster.broker.reset_offset import ResetOffsetProcessor
from rocketbox.cluster.broker.retry import SendBackProcessor
from rocketbox.cluster.broker.runtime_kv import runtime_kv_table, schedule_offsets, store_disk
from rocketbox.cluster.broker.recall import RecallLedger, RecallProcessor
from rocketbox.cluster.broker.schedule import TICK_S as SCHEDULE_TICK_S, ScheduleService
from rocketbox.cluster.broker.transaction import SYSTEM_TOPICS as TRANSACTION_TOPICS, TransactionService
from rocketbox.cluster.broker.send import SendProcessor
from rocketbox.cluster.broker.slave_sync import SlaveSynchronize
from rocketbox.cluster.broker.stats import SAMPLE_INTERVAL_S, BrokerStats
from rocketbox.cluster.broker.subscription_groups import SubscriptionGroupManager
from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.broker.topic_requests import TopicRequests
from rocketbox.cluster.broker.topics import TopicConfig, TopicConfigManager
from rocketbox.cluster.broker.waiters import FlushWaiters, PullWaiters, UnflushedQueues
from rocketbox.cluster.clock import SYSTEM_CLOCK, Clock
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.refusals import BROKER_REFUSALS, refusal_handlers
from rocketbox.cluster.protocol import (DLQ_TOPIC_PREFIX, PERM_READ_WRITE, RETRY_TOPIC_PREFIX, RequestCode,
                                        ResponseCode, answers_refusals, field_str, json_body, require_name,
                                        retry_topic, to_json_bytes)
from rocketbox.cluster.message.system_topics import REVIVE_TOPIC_PREFIX, SCHEDULE_TOPIC
from rocketbox.cluster.shm import durable
from rocketbox.cluster.shm.paths import truncate_marker_path
from rocketbox.cluster.wire_format import DOOR_NATIVE, Command
from rocketbox.cluster.zmq_transport import EventLoop

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)


# The reput worker (it builds the IndexFile; no consumer waits for it) is woken after writes, at
# most once every 10 ms. A wake per send made it compete with every sync send for the CPU
# (measured: p50 241 us with it, 154 us with the reput stopped, on 2 cores). At 1 ms (RocketMQ's
# ReputMessageService looks every 1 ms) a sync sender's every message woke it: 110-130 us of its CPU
# a message under the Java client's sync sends; at 10 ms 40-50 us (issue 33, perf/RESULTS.md "sync
# row"). Longer steps interfered more only while it also wrote the ConsumeQueue (p99 310 us at 1 ms,
# 500+ at 10 ms then); the broker writes those entries itself now, and only a query by key waits for
# the index (RocketMQ's is asynchronous too).
REPUT_WAKE_INTERVAL_S = 0.01
# A slave under sync flush flushes what it copied at most this often (RocketMQ's GroupCommitService
# looks every 10 ms when no send waits): a flush per replicated write competed on the cores with the
# master's own flush and answer (sync flush + sync replication, one send at a time: p50 1.03 ->
# 0.69 ms, p99 2.4 -> 1.6 ms). No sends wait for a slave's disk; its acknowledgements name bytes written.
SLAVE_FLUSH_INTERVAL_S = 0.01
# After a connection closes: when to ask which clients' connections are gone.
PEER_CHECK_DELAYS_S = (0.2, 1.5)



class BrokerService:
    def __init__(self, booted: BootedBroker, clock: Clock = SYSTEM_CLOCK):
        """Built from a broker already booted (``boot.py``: recovered, role settled)."""
        cfg = self.cfg = booted.cfg
        # Wall time for stamps, expiry, schedule and transaction checks; a test passes a ManualClock.
        self.clock = clock
        store_dir = cfg.store.store_dir
        self.control = booted.control
        self.store = booted.store
        self.recovery = booted.recovery
        self.epochs = booted.epochs
        self.namesrv_client = booted.namesrv_client
        self.controller = booted.controller
        # The epoch this broker's master serves (0 without a controller): replicated bytes carry it.
        self.epoch = self.controller.epoch if self.controller else 0
        # A slave's store takes only its master's bytes (broker/ha.py); a master serves its slaves.
        self.store.read_only = cfg.is_slave
        self.ha = (HAClient(cfg, self.store, self.epoch, self.epochs, self.on_written,
                            on_truncate=self.restart_truncated) if cfg.is_slave
                   else HAServer(cfg, self.store, self.control, self.epoch, self.epochs, self._sync_state(cfg)))
        self.topics = TopicConfigManager(store_dir, auto_create_enabled=cfg.auto_create_topic_enabled,
                                         queue_count_default=cfg.topic_queue_count_default)
        if self.controller is not None and not cfg.is_slave:
            adopted = self.topics.adopt(self.store.topics_and_queues(), {SCHEDULE_TOPIC, *TRANSACTION_TOPICS})
            if adopted:
                log.warning("topics with stored messages but no config (not yet copied from the old master): "
                            "%s; given configs from their queues", ", ".join(adopted))
        self.offsets = ConsumerOffsetManager(store_dir)
        self.groups = SubscriptionGroupManager(store_dir, auto_create=cfg.auto_create_subscription_group)
        self.clients = ClientRegistry(cfg.client_expiry_ms)
        self.flush_waiters = FlushWaiters()
        self.pull_waiters = PullWaiters()
        self.durability = DurabilityWait(cfg, self.flush_waiters, self.ha)
        # What every processor shares; the service's own callables stand in for the rest of the broker.
        ctx = self.ctx = BrokerContext(
            cfg=cfg, store=self.store, clock=clock, topics=self.topics, offsets=self.offsets, groups=self.groups,
            clients=self.clients, pull_waiters=self.pull_waiters, durability=self.durability,
            on_written=self.on_written, may_write=self.may_write, ensure_system_topic=self.ensure_system_topic,
            publish_topics=self.register_with_namesrvs, notify_peer=self.notify_peer,
            call_peer=lambda *call: self.doors.call(*call))   # the doors open in serve()
        recall_ledger = RecallLedger(cfg.store.store_dir)
        self.schedule = ScheduleService(ctx, recall_ledger)
        self.recaller = RecallProcessor(ctx, recall_ledger)
        self.transactions = TransactionService(ctx)
        self.sender = SendProcessor(ctx, self.schedule, self.transactions)
        self.puller = PullProcessor(ctx, self.ha)
        self.send_back = SendBackProcessor(ctx, len(self.schedule.levels_ms))
        self.pop_log = PopLog(ctx)
        if not cfg.is_slave:
            self.pop_log.replay()
        self.popper = PopProcessor(ctx, self.pop_log)
        self.reviver = PopReviver(ctx, self.pop_log)
        self.reset_offsets = ResetOffsetProcessor(ctx)
        self.locks = LockProcessor(cfg.rebalance_lock_max_live_ms, clock.now_ms)
        self.slave_sync = SlaveSynchronize(cfg, self.topics, self.offsets, self.groups, clock) if cfg.is_slave else None
        self.started_ms = self.clock.now_ms()
        self.stats = BrokerStats(self.sender, self.puller)
        self.admin = AdminProcessor(ctx, self.stats.group_gets, self.started_ms)
        self.acl_admin = AclAdmin(cfg)
        # An edit is in force on this broker at once (the others reread the file within a second).
        self.auth_admin = AuthAdmin(cfg, on_edit=lambda: self.acl.acl.reload_if_changed() if self.acl else None)
        self.client_admin = ClientAdmin(cfg.broker_name, self.store, self.clients, ctx.call_peer)
        self.store_admin = StoreAdmin(ctx, self.stats.group_gets, self.schedule, self.transactions)
        self.replies = ReplyProcessor(ctx, cfg.remoting_address or cfg.address)
        if not cfg.is_slave:
            self.replies.ensure_reply_topic()
        # The doors, once ``serve`` opened them: ZeroMQ always, RocketMQ's remoting TCP when configured.
        self.doors: BrokerDoors | None = None
        self.role_changed = False
        self._written_since_wake = False
        self.durable_reads = cfg.store.flush_mode == SYNC_FLUSH   # see shm/queue_writer.py
        self.unflushed_queues = UnflushedQueues()
        self.pulls_answered_with_put = 0   # parked pulls answered before the answers of the read that stored
        self._channels: list = []   # the wake channels to the workers, once serving
        self.offset_requests = OffsetRequests(ctx, self.controller)
        self.topic_requests = TopicRequests(ctx)
        self.queries = MessageQueries(self.store)
        self.client_config_check = ClientConfigCheck(cfg)
        metrics = self.metrics = BrokerMetrics(ctx, self.sender, self.puller, self.send_back, self.transactions)
        # The dispatch, from the table (request_table.py) and the codes refused with a reason (refusals.py).
        self.handlers = {code: handler_of(self, path) for code, path in BROKER_HANDLERS.items()}
        self.handlers.update(refusal_handlers(BROKER_REFUSALS))
        self.handlers = metrics.timed(self.handlers)   # while metrics are exported (broker/metrics.py)
        # Access control (cluster/acl/): every request checked first; nothing wrapped when off.
        # The guard (hmac, OpenSSL's hashlib: ~15 ms and ~4 MB of a broker's start) loads only when on.
        self.acl = None
        if cfg.acl_enable:
            from rocketbox.cluster.acl.guard import AclGuard
            self.acl = AclGuard.from_file(cfg.acl_file, f"broker {cfg.broker_name}")
        if self.acl is not None:
            self.handlers = self.acl.wrap(self.handlers)
            metrics.acl_refusals = self.acl.refusal_counts
        # The send handler's fast path for a remoting read of plain sends (not under access control).
        self.send_lane = SendLane(self.sender, metrics.rpc_latency)

    def on_role_changed(self) -> None:
        # The process entry point turns this into its restart-me exit code (also after a truncation).
        self.role_changed = True
        self.loop.stopping = True

    def restart_truncated(self, keep: int) -> None:
        """The master's log is shorter: note where to cut and restart (the cut is recovery's, at boot:
        this process's workers map the files it would cut)."""
        durable.atomic_write(truncate_marker_path(self.cfg.store.store_dir), str(keep).encode())
        self.on_role_changed()

    def notify_peer(self, peer, command: Command) -> None:
        """A request to a connected client over its own connection (served once ``serve`` ran),
        through the door it came in by."""
        self.doors.notify(peer, command)

    def _sync_state(self, cfg) -> SyncStateSet | None:
        """A controller-mode master's SyncStateSet, from the set the controller named it with."""
        if self.controller is None or cfg.is_slave:
            return None
        return SyncStateSet(self.controller.replica_id, self.controller.view.get("syncStateSet", ()),
                            cfg.ha_max_time_slave_not_catchup_ms / 1000, time.monotonic())

    def may_write(self) -> bool:
        """A master writes; with a controller only while its lease holds (controller_client.py)."""
        return not self.cfg.is_slave and (self.controller is None or self.controller.lease_valid())

    # ------------------------------------------------------------ wiring

    def serve(self, loop: EventLoop) -> BrokerDoors:
        self.loop = loop
        store_dir = self.cfg.store.store_dir
        if self.acl is not None:
            self.acl.start(loop)
        self.doors = BrokerDoors(self.cfg, self.handlers, loop, self.on_peer_disconnected,
                                 self.acl.server_pair if self.acl is not None else None,
                                 read_lane=self.send_lane.serve_read if self.acl is None else None)
        self.notify_receiver = channels.Receiver(channels.broker_notify(store_dir))
        loop.add_reader(self.notify_receiver.fileno(), self.on_notify)
        self.flush_wake = channels.Sender(channels.flush_wake(store_dir))
        self.reput_wake = channels.Sender(channels.reput_wake(store_dir))
        self._channels = [self.notify_receiver, self.flush_wake, self.reput_wake]
        # After writes: under sync flush the flush worker (consumers read flushed records only; it
        # wakes the reput after), else the reput; coalesced, see REPUT_WAKE_INTERVAL_S and
        # SLAVE_FLUSH_INTERVAL_S.
        self._dispatch_wake = (
            channels.CoalescedWake(self.flush_wake, SLAVE_FLUSH_INTERVAL_S if self.cfg.is_slave else 0.0,
                                   loop.call_at) if self.durable_reads
            else channels.CoalescedWake(self.reput_wake, REPUT_WAKE_INTERVAL_S, loop.call_at))
        self.doors.before_answers(self.answer_parked_pulls)
        loop.after_each_batch(self.after_batch)
        loop.call_every(0.05, self.on_tick)
        self.stats.sample()   # the zero point: what arrives before the first interval is a rate too
        loop.call_every(SAMPLE_INTERVAL_S, self.stats.sample)
        loop.call_every(self.cfg.register_interval_ms / 1000, self.register_with_namesrvs)
        loop.call_every(self.cfg.consumer_offset_persist_interval_ms / 1000, self.offsets.persist)
        loop.call_every(self.cfg.consumer_offset_persist_interval_ms / 1000, self.schedule.persist)
        self.ha.serve(loop)
        if self.controller is not None:
            self.controller.serve(loop, getattr(self.ha, "sync_state", None), self.on_role_changed)
        if self.slave_sync is not None:
            self.slave_sync.serve(loop)
        if not self.cfg.is_slave:   # both write messages: a slave only copies its master's
            loop.call_every(SCHEDULE_TICK_S, self.schedule.tick)
            loop.call_every(REVIVE_TICK_S, self.reviver.tick)
            loop.call_every(self.cfg.transaction_check_interval_ms / 1000, self.transactions.check)
        loop.call_every(self.cfg.consumer_offset_persist_interval_ms / 1000, self.transactions.persist)
        loop.call_every(self.cfg.client_scan_interval_ms / 1000, self.expire_clients)
        self.register_with_namesrvs()
        return self.doors

    def on_written(self) -> None:
        self._written_since_wake = True

    def after_batch(self) -> None:
        """Once per loop turn: the ConsumeQueue entries of the turn's writes and the parked pulls
        they answer, then one wake for each worker (batching across processes)."""
        self._write_queue_entries()
        if self.flush_waiters.parked_since_wake:
            # A send waits for the disk: the flush worker at once (it wakes the reput after).
            self.flush_waiters.parked_since_wake = 0
            self._written_since_wake = False
            self.flush_wake.send()
        elif self._written_since_wake:
            # Under sync flush every write wants a flush, parked or not (RocketMQ's GroupCommitService
            # is woken for a send that does not wait too): consumers read flushed records only, and
            # a parked pull is a consumer waiting for exactly this data, so no coalescing then
            # (measured: a 1 ms cap alone held end-to-end throughput to one pull per ~3 ms per queue).
            self._written_since_wake = False
            self._dispatch_wake.wake(urgent=self.durable_reads and bool(len(self.pull_waiters)))
        self._flushed()

    def _write_queue_entries(self) -> int:
        """The ConsumeQueue entries of the writes so far; the pulls parked on their queues answered
        when they are readable now (under sync flush once flushed: ``_flushed``). Returns how many."""
        touched = self.store.write_queue_entries()
        if not touched:
            return 0
        if self.durable_reads:
            self.unflushed_queues.written(touched, self.control.write_pos)
            return 0
        return self.pull_waiters.wake(touched) if len(self.pull_waiters) else 0

    def answer_parked_pulls(self) -> None:
        """After a read's requests were served and before their answers are written: the pulls parked
        for what the read stored are answered first, in the same pass as the put: a consumer's message
        no longer waits behind the producer's answer (its send, which runs the loopback TCP stack and
        wakes the producer) and the rest of the turn; the producer's answer waits for the pull's
        instead (e2e p50 0.86x at 10k msg/s, the sync producer's rate 0.87x when a consumer waits:
        perf/RESULTS.md "The parked pull's answer"). Under sync flush nothing is readable before the
        flush, so the turn's end is soon enough."""
        if len(self.pull_waiters) and not self.durable_reads:
            self.pulls_answered_with_put += self._write_queue_entries()

    def on_notify(self) -> None:
        self.notify_receiver.drain()   # "flushed_pos moved": read from the control block
        self._flushed()

    def _flushed(self) -> None:
        """Answer what the flush has reached: sends waiting for it, and under sync flush the pulls
        parked on queues whose entries it made readable."""
        flushed_pos = self.control.flushed_pos
        if len(self.flush_waiters):
            self.flush_waiters.release(flushed_pos)
        if self.durable_reads:
            readable = self.unflushed_queues.flushed(flushed_pos)
            if readable and len(self.pull_waiters):
                self.pull_waiters.wake(readable)

    def on_tick(self) -> None:
        self.control.heartbeat("broker", self.clock.now_ms())
        if self.controller is not None and not self.cfg.is_slave:
            # Timers that write (schedule, transaction checks, send-back) stop with the lease too.
            self.store.read_only = not self.controller.lease_valid()
        self._flushed()
        self.pull_waiters.expire()

    def expire_clients(self) -> None:
        self._forget_clients(self.clients.expire(self.clock.now_ms()), "its heartbeats stopped")

    def on_peer_disconnected(self) -> None:
        """A connection closed: a client that died without unregistering leaves its groups now, not
        after ``client_expiry_ms``. ZeroMQ retires the peer's route shortly after the event, so look
        twice: soon, and once more a little later (closes are rare: no need to coalesce)."""
        now = time.monotonic()
        for delay_s in PEER_CHECK_DELAYS_S:
            self.loop.call_at(now + delay_s, self._drop_disconnected_clients)

    def _drop_disconnected_clients(self) -> None:
        self._forget_clients(self.clients.drop_unreachable(self.doors.reachable), "its connection closed")

    def _forget_clients(self, gone: list[tuple[str, str]], why: str) -> None:
        for group, client_id in gone:
            _limited.info("client-left", "client %s left group %s: %s", client_id, group, why)
            self.locks.client_gone(client_id, group)
        self._notify_groups_changed({group for group, _ in gone})

    def register_with_namesrvs(self) -> None:
        body = to_json_bytes({"topicConfigTable": self.topics.table()})
        for endpoint in self.cfg.namesrv_endpoints:
            request = Command(RequestCode.REGISTER_BROKER, {
                **self._identity_fields(), "haServerAddr": "" if self.cfg.is_slave else self.cfg.ha_address,
                "masterEpoch": str(self.epoch)}, body)
            future = self.namesrv_client.call_async(endpoint, request)
            future.add_done_callback(lambda f, e=endpoint: self._registered(e, f))

    def _identity_fields(self) -> dict[str, str]:
        """Who this broker is, as REGISTER_BROKER and UNREGISTER_BROKER name it."""
        cfg = self.cfg
        return {"brokerName": cfg.broker_name, "brokerAddr": cfg.address, "remotingAddr": cfg.remoting_address,
                "clusterName": cfg.cluster_name, "brokerId": str(cfg.broker_id)}

    @staticmethod
    def _registered(endpoint, future) -> None:
        exc = future.exception()
        if exc is not None:
            log.warning("registration with NameServer %s failed: %s", endpoint, exc)
        elif future.result().code != ResponseCode.SUCCESS:
            log.warning("NameServer %s refused registration: %s", endpoint, future.result().remark)

    def shutdown(self) -> None:
        self.flush_waiters.fail_all()
        self.ha.close()
        if self.slave_sync is not None:
            self.slave_sync.close()
        self.pull_waiters.expire(float("inf"))
        self.offsets.persist(force=True)
        self.schedule.persist(force=True)
        self.transactions.persist(force=True)
        for endpoint in self.cfg.namesrv_endpoints:
            try:
                self.namesrv_client.call(endpoint, Command(RequestCode.UNREGISTER_BROKER, self._identity_fields()), 500)
            except Exception as exc:  # the NameServer may already be gone; expiry covers it
                log.info("unregister from %s skipped: %s", endpoint, exc)
        self.namesrv_client.close()
        self.store.mark_clean_shutdown()
        self.store.close()
        self.release_files()
        for channel in self._channels:
            channel.close()

    def release_files(self) -> None:
        """Close the offset slots' files (a clean shutdown, or a crash of a broker run in process)."""
        for manager in (self.offsets, self.schedule.progress, self.transactions.progress):
            manager.close()

    # ------------------------------------------------------------ handlers

    @answers_refusals
    def on_heartbeat(self, request: Command, reply=None) -> Command:
        body = json_body(request)
        for consumer in body.get("consumerDataSet") or []:
            require_name("group", str(consumer.get("groupName", "")))
        check_heartbeat_subscriptions(body, self.cfg.enable_property_filter)
        for consumer in body.get("consumerDataSet") or []:
            self.groups.ensure(str(consumer["groupName"]))
            if str(consumer.get("messageModel", "CLUSTERING")) in ("CLUSTERING", "1"):
                # Java's broker makes the group's retry topic on its first heartbeat.
                self.ensure_system_topic(retry_topic(str(consumer["groupName"])))
        address = f"{request.peer_address}:{request.peer_port}" if request.peer_port else request.peer_address
        changed = self.clients.heartbeat(body, self.clock.now_ms(), getattr(reply, "peer", None),
                                         (address, request.language, request.version))
        self._notify_groups_changed(changed)
        return request.response(ResponseCode.SUCCESS)

    @answers_refusals
    def on_unregister_client(self, request: Command, reply=None) -> Command:
        """Only the groups named (RocketMQ's rule): one that names no consumer group leaves every
        consumer group as it was, so no request can drop a group's members without naming the group
        (which access control checks)."""
        client_id = field_str(request, "clientID")
        consumer_group = request.fields.get("consumerGroup") or None
        changed = self.clients.unregister(client_id, consumer_group, request.fields.get("producerGroup") or None)
        if consumer_group is not None:
            self.locks.client_gone(client_id, consumer_group)
        self._notify_groups_changed(changed)
        return request.response(ResponseCode.SUCCESS)

    def ensure_system_topic(self, topic: str) -> bool:
        """Create a group's retry or dead-letter topic (1 queue, read-write) if missing; False
        for any other unknown topic. Registered with the NameServers so clients find it."""
        if self.topics.get(topic) is not None:
            return True
        if not topic.startswith((RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX, REVIVE_TOPIC_PREFIX)):
            return False
        self.topics.upsert(TopicConfig(topic, 1, 1, PERM_READ_WRITE))
        _limited.info("created", "created %s", topic)
        self.register_with_namesrvs()
        return True

    def _notify_groups_changed(self, groups) -> None:
        """Tell every member of each group to rebalance now (RocketMQ's NOTIFY_CONSUMER_IDS_CHANGED)."""
        for group in groups:
            _limited.info("group-changed", "consumer group %s is now %s", group, self.clients.consumer_ids(group))
            for peer in self.clients.peers(group):
                self.notify_peer(peer, Command(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}))

    @answers_refusals
    def on_consumer_list(self, request: Command, reply=None) -> Command:
        group = field_str(request, "consumerGroup")
        ids = self.clients.consumer_ids(group)
        if not ids:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"no live consumer in group {group}")
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"consumerIdList": ids}))

    def runtime_info(self) -> dict:
        control = self.control
        return {
            "brokerName": self.cfg.broker_name, "brokerId": self.cfg.broker_id, "address": self.cfg.address,
            "brokerRole": self.cfg.broker_role, "ha": self.ha.info(),
            "slaveSyncRounds": self.slave_sync.synced if self.slave_sync is not None else 0,
            "suggestedSlave": self.puller.suggested_slave, "suggestedMaster": self.puller.suggested_master, "confirmPos": control.confirm_pos,
            "flushMode": self.cfg.store.flush_mode, "writePos": control.write_pos,
            "flushedPos": control.flushed_pos, "dispatchedPos": control.dispatched_pos, "queuedPos": control.queued_pos,
            "minPos": control.commitlog_min_pos,
            "messagesStored": self.sender.messages_stored, "messagesServed": self.puller.messages_served,
            "parkedFlushWaiters": len(self.flush_waiters), "parkedPulls": len(self.pull_waiters),
            "pullsAnsweredWithTheirPut": self.pulls_answered_with_put,
            "topics": len(self.topics.topics), "uptimeMs": self.clock.now_ms() - self.started_ms,
            "recovery": str(self.recovery),
            "scheduleDelivered": self.schedule.delivered,
            "sentBackToRetry": self.send_back.sent_to_retry, "sentToDeadLetters": self.send_back.sent_to_dlq,
            "transactions": {"committed": self.transactions.committed, "rolledBack": self.transactions.rolled_back,
                             "discarded": self.transactions.discarded, "checksSent": self.transactions.checks_sent},
            "epoch": self.epoch, "epochs": self.epochs.to_json(),
            "controller": self.controller.info() if self.controller is not None else None,
            "writable": self.may_write(),
            "doors": self.doors.info() if self.doors is not None else {},
            "bootTimestamp": self.started_ms,
        }

    def on_runtime_info(self, request: Command, reply=None) -> Command:
        """Our detailed JSON when asked (``detail=true``; by default through the native door),
        else RocketMQ's KVTable of strings (mqadmin brokerStatus and clusterList read it)."""
        info = self.runtime_info()
        detail = request.fields.get("detail")
        if detail == "true" or (detail is None and request.door == DOOR_NATIVE):
            return request.response(ResponseCode.SUCCESS, body=to_json_bytes(info))
        commitlog_min = self.store.commitlog_floor()
        earliest = self.store.read_record(commitlog_min)
        table = runtime_kv_table(info, self.stats, commitlog_min_offset=commitlog_min,
                                 earliest_ms=earliest.store_timestamp_ms if earliest is not None else 0,
                                 disk=store_disk(self.cfg.store.store_dir),
                                 send_queue_capacity=self.cfg.send_queue_capacity,
                                 schedule_offsets=schedule_offsets(self.schedule, self.store))
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"table": table}))

    def on_epoch_cache(self, request: Command, reply=None) -> Command:
        body = {"epoch": self.epoch, "epochs": self.epochs.to_json(), "maxOffset": self.store.commitlog.write_pos,
                "isMaster": not self.cfg.is_slave}
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(body))
