"""One seed's world: a broker (``tests/in_process.py``) on the disk's twin (``tests/faulty_disk.py``),
a producer, a pull consumer and a pop consumer, all stepped by one ``random.Random(seed)`` on one
ManualClock, in one thread. Nothing here reads the wall clock or starts a thread, so a seed is a
history: ``python -m tests.simulation --seed N`` replays it exactly.

Each step is one of: a send, a pull (and maybe a commit), a pop, an ack, a reput or flush step, the
clock moving with the broker's timers, an offset persist, a crash (the process killed: the page
cache stays), a power cut (unsynced pages lost or torn), a clean restart, the disk filling or
emptying, syncs turning slow. After each restart the store is read back whole and checked
(``history.audit``); at the end every parked answer is settled, the store read back again and the
pop consumer drained.
"""

from __future__ import annotations

import errno
import os
import random
import traceback
from dataclasses import dataclass, field

from rocketbox.cluster.clock import ManualClock
from rocketbox.cluster.config import ASYNC_FLUSH, SYNC_FLUSH
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY
from rocketbox.cluster.protocol import PULL_FLAG_SUBSCRIPTION, RequestCode, ResponseCode
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.wire_format import Command
from tests.faulty_disk import FaultyDisk
from tests.in_process import InProcessBroker, send_request
from tests.simulation import history as h

START_MS = 1_700_000_000_000
TOPIC, PULL_GROUP, POP_GROUP, AUDIT_GROUP = "SimTopic", "SimPullGroup", "SimPopGroup", "SimAuditGroup"
QUEUES, KEYS = 2, 4
INVISIBLE_MS = 10_000
STEPS = 80
# A send's answer that leaves it open whether the message was stored.
UNDECIDED = {ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT}


@dataclass
class Outcome:
    seed: int
    flush_mode: str
    steps: int
    anomalies: list[str]
    events: list[str] = field(default_factory=list)
    sent: int = 0
    acknowledged: int = 0
    digest: str = ""   # of everything the clients saw: two runs of one seed give the same


class World:
    def __init__(self, seed: int, root: str, steps: int = STEPS, trace: bool = False):
        self.seed, self.steps, self.trace = seed, steps, trace
        self.rng = random.Random(seed)
        self.clock = ManualClock(now_ms=START_MS, monotonic=1_000.0)
        self.flush_mode = self.rng.choice((ASYNC_FLUSH, SYNC_FLUSH))
        self.store_dir = os.path.join(root, "store")
        self.disk = FaultyDisk(self.store_dir, os.path.join(root, "image"), self.rng, self.clock)
        self.history = h.History()
        self.anomalies: list[str] = []
        self.next_seq = [0] * KEYS
        self.pull_next: dict[int, int] = {}
        self.pull_last: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.persisted: dict[int, int] = {}
        self.handles: list[str] = []
        self.parked_sends: set[str] = set()
        self.broker: InProcessBroker | None = None

    # ------------------------------------------------------------------ running

    def run(self) -> Outcome:
        ops = [(self.send, 30), (self.pull, 14), (self.pop, 10), (self.ack, 8), (self.reput, 10), (self.flush, 10),
               (self.tick, 10), (self.persist, 3), (self.crash, 2), (self.power_cut, 2), (self.restart, 1),
               (self.toggle_full, 2), (self.toggle_slow, 2)]
        actions, weights = zip(*ops)
        step = 0
        with self.disk.installed():
            try:
                self.broker = InProcessBroker(self.store_dir, clock=self.clock, store_settings={
                    "flush_mode": self.flush_mode, "disk_free_bytes_min": 1})
                self._started()
                created = self._call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                    "topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES), "perm": "6"})
                assert created.code == ResponseCode.SUCCESS, created.remark
                for step in range(self.steps):
                    action = self.rng.choices(actions, weights)[0]
                    if self.trace:
                        print(f"step {step}: {action.__name__}", flush=True)
                    action()
                    if self.anomalies:
                        break
                if not self.anomalies:
                    self.finish()
            except Exception:
                self.anomalies.append(f"exception at step {step}:\n{traceback.format_exc()}")
            finally:
                if self.broker is not None:
                    self.broker.crash()
        sent = self.history.sent.values()
        return Outcome(self.seed, self.flush_mode, step + 1, self.anomalies, self.history.events,
                       len(self.history.sent), sum(s.outcome == h.OK for s in sent), h.digest(self.history))

    def finish(self) -> None:
        """Faults end; every parked answer is given; the store is read back; the pop consumer drains."""
        self.disk.full, self.disk.sync_delay_s = False, 0.0
        self.flush()
        self.tick(0.0)
        for uniq in self.parked_sends:
            self.anomalies.append(f"unanswered: the send of {uniq} still waits after a flush")
        if self.anomalies:
            return
        self._audit(after_power_cut=False)
        empty_rounds = 0
        for _ in range(200):
            if empty_rounds >= 8:
                break
            popped = self.pop(max_count=32)
            self.flush()   # under SYNC_FLUSH a pop is answered once its checkpoint is on disk
            for handle in list(popped):
                self.ack(handle)
            if popped:
                empty_rounds = 0
            else:
                empty_rounds += 1
                self.tick(INVISIBLE_MS / 1000 + 1)
        self.anomalies += h.popped_everything(self.history)

    # ------------------------------------------------------------------ the broker's side

    def _call(self, code, fields, body: bytes = b"", on_reply=None) -> Command | None:
        """The handler's answer now, or None while it is parked (``on_reply`` gets it later)."""
        replies: list[Command] = []
        self._handle(Command(code, fields, body), on_reply or replies.append)
        return None if on_reply else (replies[0] if replies else None)

    def _handle(self, request: Command, reply) -> None:
        """The request through its handler, as ``request_dispatch.dispatch`` runs it, except that a
        handler's exception is an anomaly; one from a full disk is answered SYSTEM_ERROR (a
        state file the request writes could not be written) and recorded."""
        try:
            answer = self.broker.handlers[request.code](request, reply)
        except OSError as exc:
            if not (self.disk.full and exc.errno == errno.ENOSPC):
                raise
            self.history.events.append(f"code {request.code}: {exc.strerror}")
            answer = request.response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        if answer is not None:
            reply(answer)

    def _started(self) -> None:
        """After a (re)start: the store checks free space on every append (no wall-clock interval),
        and the pull consumer starts a session from its committed offsets."""
        self.broker.booted.store.commitlog.disk_check_interval_ms = 0
        self.pull_last.clear()
        self.pull_next.clear()

    def _timers(self) -> None:
        """The broker's periodic work, as its event loop runs it (an exception is logged, not fatal)."""
        service = self.broker.service
        for timer in (service.on_tick, service.reviver.tick, service.schedule.tick, service.expire_clients):
            try:
                timer()
            except OSError as exc:
                self.history.events.append(f"timer {timer.__qualname__}: {exc}")

    # ------------------------------------------------------------------ steps

    def send(self) -> None:
        key = self.rng.randrange(KEYS)
        seq, self.next_seq[key] = self.next_seq[key], self.next_seq[key] + 1
        uniq = f"S{self.seed}M{len(self.history.sent)}"
        body = f"{uniq}|{key}|{seq}|".encode() + self.rng.randbytes(self.rng.randrange(0, 300))
        sent = self.history.sent[uniq] = h.Sent(uniq, key, seq, body, key % QUEUES,
                                                cuts_before=len(self.history.ends_before_cut))
        request = send_request(TOPIC, body, queue_id=sent.queue_id, born_ms=self.clock.now_ms(), queue_count=QUEUES,
                               uniq=uniq, KEYS=f"k{key}")
        self.parked_sends.add(uniq)
        self._handle(request, lambda reply: self._sent(sent, reply))

    def _sent(self, sent: h.Sent, reply: Command) -> None:
        self.parked_sends.discard(sent.uniq)
        if sent.outcome != h.PENDING:
            self.anomalies.append(f"answered twice: the send of {sent.uniq}")
        if reply.code == ResponseCode.SUCCESS:
            sent.outcome = h.OK
            sent.queue_offset = int(reply.fields["queueOffset"])
            sent.phys = parse_offset_msg_id(reply.fields["msgId"])[2]
            sent.durable = self.flush_mode == SYNC_FLUSH
        else:
            sent.outcome = h.UNKNOWN if reply.code in UNDECIDED else h.FAIL

    def _settle_unanswered(self) -> None:
        """A stop leaves the parked sends without an answer: they may or may not be stored."""
        for uniq in self.parked_sends:
            self.history.sent[uniq].outcome = h.UNKNOWN
        self.parked_sends.clear()

    def pull(self) -> None:
        queue_id = self.rng.randrange(QUEUES)
        if queue_id not in self.pull_next:
            self.pull_next[queue_id] = self._committed_offset(queue_id)
        answer = self._call(RequestCode.PULL_MESSAGE, self._pull_fields(PULL_GROUP, queue_id, self.pull_next[queue_id],
                                                                        self.rng.randint(1, 8)))
        if answer.code == ResponseCode.SUCCESS:
            for record in fmt.iter_records(answer.body):
                uniq = record.properties.get(PROPERTY_UNIQ_KEY)
                self.anomalies += h.delivered(self.history, queue_id, record.queue_offset, uniq, record.body,
                                              self.pull_last.get(queue_id))
                self.pull_last[queue_id] = record.queue_offset
                self.history.pulled.append((queue_id, record.queue_offset, uniq))
        if "nextBeginOffset" in answer.fields:
            self.pull_next[queue_id] = int(answer.fields["nextBeginOffset"])
        if self.rng.random() < 0.5:
            commit = self._call(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": PULL_GROUP, "topic": TOPIC, "queueId": str(queue_id),
                "commitOffset": str(self.pull_next[queue_id])})
            if commit.code == ResponseCode.SUCCESS:
                self.committed[queue_id] = self.pull_next[queue_id]

    @staticmethod
    def _pull_fields(group: str, queue_id: int, offset: int, count: int) -> dict:
        return {"consumerGroup": group, "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
                "maxMsgNums": str(count), "sysFlag": str(PULL_FLAG_SUBSCRIPTION), "commitOffset": "0",
                "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}

    def _committed_offset(self, queue_id: int) -> int:
        answer = self._call(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": PULL_GROUP, "topic": TOPIC, "queueId": str(queue_id)})
        return int(answer.fields["offset"]) if answer.code == ResponseCode.SUCCESS else 0

    def pop(self, max_count: int | None = None) -> list[str]:
        """Pop up to ``max_count`` (at random when None); the handles popped now (a parked pop's
        messages arrive with its answer)."""
        got: list[str] = []
        fields = {"consumerGroup": POP_GROUP, "topic": TOPIC, "queueId": "-1",
                  "maxMsgNums": str(max_count or self.rng.randint(1, 8)), "invisibleTime": str(INVISIBLE_MS),
                  "pollTime": "0", "order": "false", "exp": "*", "expType": "TAG", "initMode": "0"}
        self._call(RequestCode.POP_MESSAGE, fields, on_reply=lambda reply: got.extend(self._popped(reply)))
        return got

    def _popped(self, reply: Command) -> list[str]:
        if reply.code != ResponseCode.SUCCESS:
            return []
        records = list(fmt.iter_records(reply.body))
        handles = reply.fields["handles"].split(",")
        for record in records:
            uniq = record.properties.get(PROPERTY_UNIQ_KEY)
            self.anomalies += h.delivered(self.history, record.queue_id, record.queue_offset, uniq, record.body, None)
            self.history.popped.add(uniq)
        self.handles += handles
        return handles

    def ack(self, handle: str | None = None) -> None:
        if handle is None:
            if not self.handles:
                return
            handle = self.handles.pop(self.rng.randrange(len(self.handles)))
        elif handle in self.handles:
            self.handles.remove(handle)
        self._call(RequestCode.ACK_MESSAGE, {"consumerGroup": POP_GROUP, "topic": TOPIC, "extraInfo": handle},
                   on_reply=lambda reply: None)

    def reput(self) -> None:
        self.broker.reput.step(self.rng.randint(1, 8))

    def flush(self) -> None:
        """One flush pass; what it made durable is durable from now on, and parked answers go out."""
        self.broker.flush.step()
        flushed = self.broker.booted.control.flushed_pos
        for sent in self.history.sent.values():
            if sent.outcome == h.OK and 0 <= sent.phys < flushed and not sent.lost_in_cut:
                sent.durable = True
        self._timers()

    def tick(self, seconds: float | None = None) -> None:
        self.clock.advance(self.rng.choice((0.05, 0.5, 2.0, 6.0, 15.0)) if seconds is None else seconds)
        self.broker.dispatch()
        self._timers()

    def persist(self) -> None:
        try:
            self.broker.service.offsets.persist()
        except OSError as exc:
            self.history.events.append(f"offset persist: {exc}")
            return
        self.persisted = dict(self.committed)

    def toggle_full(self) -> None:
        self.disk.full = not self.disk.full
        self.history.events.append(f"disk {'full' if self.disk.full else 'has room'}")

    def toggle_slow(self) -> None:
        self.disk.sync_delay_s = self.rng.choice((0.0, 0.2, 2.0))

    def crash(self) -> None:
        self._stop_and_start("crash", lambda: None)

    def power_cut(self) -> None:
        store = self.broker.service.store
        self.history.ends_before_cut.append({q: store.readable_end(TOPIC, q) for q in range(QUEUES)})
        self._stop_and_start("power cut", self.disk.power_cut)

    def restart(self) -> None:
        self.history.events.append("clean restart")
        try:
            self.broker.close()
        except OSError as exc:   # the offsets could not be written: the store stays unmarked, as after a crash
            if exc.errno != errno.ENOSPC:
                raise
            self.history.events.append(f"shutdown failed ({exc.strerror}): a crash")
        self._settle_unanswered()
        self._restarted(after_power_cut=False)

    def _stop_and_start(self, what: str, between) -> None:
        self.history.events.append(what)
        self.broker.crash()
        self._settle_unanswered()
        between()
        self._restarted(after_power_cut=what == "power cut")

    def _restarted(self, *, after_power_cut: bool) -> None:
        try:
            self.broker.start()
        except OSError as exc:   # recovery writes its checkpoint: no boot on a full disk, as a supervisor sees it
            self.history.events.append(f"boot refused ({exc.strerror}); space returns")
            self.disk.full = False
            self.broker.start()
        self._started()
        self._audit(after_power_cut=after_power_cut)
        for queue_id, persisted in self.persisted.items():
            now = self._committed_offset(queue_id)
            if now < min(persisted, self.broker.service.store.max_offset(TOPIC, queue_id)):
                self.anomalies.append(f"offset went back: {PULL_GROUP} queue {queue_id} committed {now} after a "
                                      f"restart, {persisted} was persisted before it")
        self.committed = {q: self._committed_offset(q) for q in range(QUEUES)}

    # ------------------------------------------------------------------ reading the store back

    def _audit(self, *, after_power_cut: bool) -> None:
        """Every queue read back from its start, checked against the history."""
        full, self.disk.full = self.disk.full, False   # reading needs no room; a sync flush's dispatch needs a flush
        if self.flush_mode == SYNC_FLUSH:
            self.flush()
        self.broker.dispatch()
        self.disk.full = full
        stored = []
        for queue_id in range(QUEUES):
            offset = self.broker.service.store.min_offset(TOPIC, queue_id)
            for _ in range(10_000):
                answer = self._call(RequestCode.PULL_MESSAGE, self._pull_fields(AUDIT_GROUP, queue_id, offset, 32))
                if answer.code != ResponseCode.SUCCESS:
                    break
                for record in fmt.iter_records(answer.body):
                    stored.append(h.Stored(queue_id, record.queue_offset, record.phys_offset,
                                           record.properties.get(PROPERTY_UNIQ_KEY), record.body))
                offset = int(answer.fields["nextBeginOffset"])
        self.anomalies += h.audit(self.history, stored, after_power_cut=after_power_cut)
