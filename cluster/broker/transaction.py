"""Transactional messages on the broker: half messages, END_TRANSACTION, and the check-back.

RocketMQ 4's design (rocketmq-protocol.md §5.8), everything kept in the store so that it
survives a restart:

- A half message (TRAN_MSG=true, sysFlag PREPARED) is stored in RMQ_SYS_TRANS_HALF_TOPIC
  queue 0 with REAL_TOPIC / REAL_QID: consumers of the real topic never see it.
- END_TRANSACTION commit writes it to its real topic (sysFlag COMMIT); commit and rollback
  both write an op record to RMQ_SYS_TRANS_OP_HALF_TOPIC whose body is the half's UNIQ_KEY.
  A half is resolved once an op names it; a second outcome for it is ignored.
- The check service (every ``transaction_check_interval_ms``, 30 s) walks the half queue
  from its committed progress: resolved halves are passed over; halves younger than
  ``transaction_timeout_ms`` stop the walk; others get CHECK_TRANSACTION_STATE sent to a live
  producer of their group and are appended again at the queue's end with
  TRANSACTION_CHECK_TIMES + 1 (so the next walk asks again if no answer comes); after
  ``transaction_check_max`` checks (15) a half is discarded (an op record) and logged.
  The producer answers with END_TRANSACTION (fromTransactionCheck=true).

Resolution is by UNIQ_KEY, not by queue offset: the copies a check appends share it, so an
answer about any copy resolves them all. The resolved set is rebuilt from the op queue at
start.

END_TRANSACTION names its half by offsets (which anyone can enumerate): the half found there must
match the request's producer group, queue offset and msgId (UNIQ_KEY), as RocketMQ checks the first
two, and its topic the one the request names (the proxy's); under access control the caller needs
PUB on that topic (acl/records.py). A mismatch is SYSTEM_ERROR "no half message ...", a missing
permission NO_PERMISSION.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.acl.permissions import PUB
from rocketbox.cluster.acl.records import require_record
from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.offsets import ConsumerOffsetManager
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import ProtocolError, RequestCode, ResponseCode, answers_refusals, field_int
from rocketbox.cluster.message.system_topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import (PROPERTY_DELAY, PROPERTY_PGROUP, PROPERTY_REAL_QID,
                                                  PROPERTY_REAL_TOPIC, PROPERTY_UNIQ_KEY,
                                                  encode_properties)
from rocketbox.cluster.message.sysflags import SYSFLAG_TRANSACTION_COMMIT, SYSFLAG_TRANSACTION_MASK
from rocketbox.cluster.shm.store import MessageToStore, PutMessageStatus, copy_of_record
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

HALF_TOPIC = TRANS_HALF_TOPIC
OP_TOPIC = TRANS_OP_HALF_TOPIC
SYSTEM_TOPICS = (HALF_TOPIC, OP_TOPIC)
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROGRESS_GROUP = "TRANSACTION_CHECK"
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0
OP_READ_BATCH = 1024
HALVES_PER_CHECK = 1024


# An op record marks its half as decided ("d"), as RocketMQ's REMOVETAG.
_OP_PROPERTIES = encode_properties({"TAGS": "d"})


def _check_ending(request: Command, rec: fmt.Record) -> None:
    """The half ``rec`` must be the one END_TRANSACTION describes, and its caller may publish to its
    topic; else ProtocolError (AccessDenied for the permission). The topic (``topic``: the proxy
    names the one it checked) and the permission go beyond RocketMQ, which ends any half whose
    producer group and offsets a request names."""
    props = rec.properties
    where = f"at CommitLog offset {rec.phys_offset}"
    named_topic = request.fields.get("topic")
    if named_topic and named_topic != props.get(PROPERTY_REAL_TOPIC):
        raise ProtocolError(f"no half message of topic {named_topic} {where}", ResponseCode.SYSTEM_ERROR)
    require_record(request, rec, PUB)
    group = request.fields.get("producerGroup", "")
    if group != props.get(PROPERTY_PGROUP):
        raise ProtocolError(f"no half message of producer group {group!r} {where}", ResponseCode.SYSTEM_ERROR)
    if field_int(request, "tranStateTableOffset") != rec.queue_offset:
        raise ProtocolError(f"no half message at transaction state table offset "
                            f"{request.fields['tranStateTableOffset']} {where}", ResponseCode.SYSTEM_ERROR)
    msg_id = request.fields.get("msgId", "")
    # UNIQ_KEY, as clients send it; the C++ client's send result may carry the offset message id.
    if msg_id not in (props.get(PROPERTY_UNIQ_KEY), rec.offset_msg_id):
        raise ProtocolError(f"no half message with msgId {msg_id!r} {where}", ResponseCode.SYSTEM_ERROR)


class TransactionService:
    def __init__(self, ctx: BrokerContext):
        self.cfg = ctx.cfg
        self.store = ctx.store
        self.topics = ctx.topics
        self.clients = ctx.clients
        self.clock = ctx.clock
        self.on_written = ctx.on_written
        self.durability = ctx.durability
        # The check-back goes over the producer's own connection.
        self.notify_peer = ctx.notify_peer
        self.progress = ConsumerOffsetManager(self.cfg.store.store_dir, name="transactionOffset")
        self.resolved: set[str] = set()
        self.committed = self.rolled_back = self.discarded = self.checks_sent = 0
        # Per real topic (metrics): RocketMQ's commit and rollback counters, and the halves still open.
        self.committed_by_topic: dict[str, int] = {}
        self.rolled_back_by_topic: dict[str, int] = {}
        self.open_halves: dict[str, str] = {}   # UNIQ_KEY -> real topic
        self._load_resolved()
        self._load_open_halves()

    def _records(self, topic: str, offset: int):
        """Every record of ``topic``'s queue 0 from ``offset`` on."""
        for _ in range(1 << 40):   # bounded by the queue's length
            entries = self.store.queue_entries(topic, 0, offset, OP_READ_BATCH)
            if not entries:
                return
            for queue_offset, phys, _size, _tag in entries:
                rec = self.store.read_record(phys)
                if rec is not None:
                    yield rec
                offset = queue_offset + 1

    def _load_resolved(self) -> None:
        for rec in self._records(OP_TOPIC, 0):
            self.resolved.add(rec.body.decode("utf-8", "replace"))

    def _load_open_halves(self) -> None:
        """The halves stored but not yet resolved: every one has a copy at or after the check's progress."""
        for rec in self._records(HALF_TOPIC, self.progress.query(PROGRESS_GROUP, HALF_TOPIC, 0) or 0):
            self._note_open(rec.properties)

    def _note_open(self, props: dict[str, str]) -> None:
        uniq = props.get(PROPERTY_UNIQ_KEY, "")
        if uniq and uniq not in self.resolved:
            self.open_halves[uniq] = props.get(PROPERTY_REAL_TOPIC, "")

    def opened(self, topic: str, props: dict[str, str]) -> None:
        """A half message of ``topic`` was stored (its properties as the producer sent them)."""
        self._note_open({**props, PROPERTY_REAL_TOPIC: topic})

    def open_halves_by_topic(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic in self.open_halves.values():
            counts[topic] = counts.get(topic, 0) + 1
        return counts

    # ---------------------------------------------------------------- half messages

    def half_message(self, topic: str, queue_id: int, props: dict[str, str]) -> bytes:
        """The properties a half message is stored with (in HALF_TOPIC queue 0)."""
        if PROPERTY_DELAY in props:
            raise ProtocolError("a message is transactional or delayed, not both", ResponseCode.MESSAGE_ILLEGAL)
        if not props.get(PROPERTY_PGROUP) or not props.get(PROPERTY_UNIQ_KEY):
            raise ProtocolError("a half message needs PGROUP and UNIQ_KEY properties", ResponseCode.MESSAGE_ILLEGAL)
        parked = dict(props)
        parked[PROPERTY_REAL_TOPIC] = topic
        parked[PROPERTY_REAL_QID] = str(queue_id)
        return encode_properties(parked)

    # ---------------------------------------------------------------- outcomes

    @answers_refusals
    def on_end_transaction(self, request: Command, reply=None) -> Command | None:
        """Answered once the commit's copy and the op record are as durable as a send's (durability.py),
        as RocketMQ's EndTransactionProcessor answers after its putMessage."""
        phys = field_int(request, "commitLogOffset")
        outcome = field_int(request, "commitOrRollback")
        rec = self.store.read_record(phys)
        if rec is None or rec.topic != HALF_TOPIC:
            raise ProtocolError(f"no half message at CommitLog offset {phys}", ResponseCode.SYSTEM_ERROR)
        _check_ending(request, rec)
        if outcome == UNKNOWN:
            return request.response(ResponseCode.SUCCESS)
        if outcome not in (COMMIT, ROLLBACK):
            raise ProtocolError(f"commitOrRollback {outcome} is not 8, 12 or 0", ResponseCode.SYSTEM_ERROR)
        end = self.resolve(rec, outcome, from_check=request.fields.get("fromTransactionCheck") == "true")
        response = request.response(ResponseCode.SUCCESS)
        return response if end is None else self.durability.answer(response, end, reply)

    def resolve(self, rec: fmt.Record, outcome: int, *, from_check: bool = False) -> int | None:
        """Commit or roll back the half ``rec``: the CommitLog offset its records end at, None if it
        was resolved already."""
        props = rec.properties
        uniq = props.get(PROPERTY_UNIQ_KEY, "")
        if uniq in self.resolved:
            return None
        if outcome == COMMIT:
            real = {k: v for k, v in props.items()
                    if k not in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QID, PROPERTY_CHECK_TIMES)}
            message = copy_of_record(rec, real, sys_flag=(rec.sys_flag & ~SYSFLAG_TRANSACTION_MASK) |
                                     SYSFLAG_TRANSACTION_COMMIT)
            self._put(props.get(PROPERTY_REAL_TOPIC, ""), int(props.get(PROPERTY_REAL_QID, "0")), message)
            self.committed += 1
        else:
            self.rolled_back += 1
        real_topic = props.get(PROPERTY_REAL_TOPIC, "")
        outcomes = self.committed_by_topic if outcome == COMMIT else self.rolled_back_by_topic
        outcomes[real_topic] = outcomes.get(real_topic, 0) + 1
        end = self._put(OP_TOPIC, 0, MessageToStore(body=uniq.encode(), flag=0, properties=_OP_PROPERTIES, sys_flag=0,
                                              born_timestamp_ms=self.clock.now_ms(), born_host=rec.born_host,
                                              reconsume_times=0))
        self.resolved.add(uniq)
        self.open_halves.pop(uniq, None)
        _limited.info("ended", "transaction %s %s%s", uniq, "committed" if outcome == COMMIT else "rolled back",
                      " (check answer)" if from_check else "")
        self.on_written()
        return end

    def _put(self, topic: str, queue_id: int, message: MessageToStore) -> int:
        """Where the record written ends in the CommitLog."""
        if not topic or (topic not in SYSTEM_TOPICS and self.topics.get(topic) is None):
            raise ProtocolError(f"topic {topic!r} of the transaction does not exist", ResponseCode.SYSTEM_ERROR)
        result = self.store.put_messages(topic, queue_id, [message])
        if result.status != PutMessageStatus.PUT_OK:
            raise ProtocolError(f"the store refused the write: {result.status.name}", ResponseCode.SYSTEM_ERROR)
        return result.end_phys_offset

    # ---------------------------------------------------------------- check-back

    def check(self) -> None:
        """Ask producers about halves left open; see the module docstring."""
        now = self.clock.now_ms()
        offset = start = self.progress.query(PROGRESS_GROUP, HALF_TOPIC, 0) or 0
        for queue_offset, phys, _size, _tag in self.store.queue_entries(HALF_TOPIC, 0, offset, HALVES_PER_CHECK):
            rec = self.store.read_record(phys)
            if rec is None:
                offset = queue_offset + 1
                continue
            props = rec.properties
            uniq = props.get(PROPERTY_UNIQ_KEY, "")
            if uniq in self.resolved:
                offset = queue_offset + 1
                continue
            if now - rec.store_timestamp_ms < self.cfg.transaction_timeout_ms:
                break   # younger halves follow: their producers may still be deciding
            checks = int(props.get(PROPERTY_CHECK_TIMES, "0") or 0)
            if checks >= self.cfg.transaction_check_max:
                _limited.warning("discarded", "transaction %s of group %s for %s discarded after %d checks without "
                                 "an outcome", uniq, props.get(PROPERTY_PGROUP),
                                 props.get(PROPERTY_REAL_TOPIC), checks)
                self.resolve(rec, ROLLBACK)
                self.discarded += 1
                offset = queue_offset + 1
                continue
            if not self._ask(rec, props, checks):
                break   # appending the next copy failed: walk again next time
            offset = queue_offset + 1
        if offset != start:
            self.progress.commit(PROGRESS_GROUP, HALF_TOPIC, 0, offset)

    def _ask(self, rec: fmt.Record, props: dict[str, str], checks: int) -> bool:
        again = dict(props)
        again[PROPERTY_CHECK_TIMES] = str(checks + 1)
        copy = copy_of_record(rec, again)
        result = self.store.put_messages(HALF_TOPIC, 0, [copy])
        if result.status != PutMessageStatus.PUT_OK:
            _limited.warning("check-append", "transaction check: could not append the half again (%s)",
                             result.status.name)
            return False
        self.on_written()
        peers = self.clients.producer_peers(props.get(PROPERTY_PGROUP, ""))
        if not peers:
            _limited.info("check-nobody", "transaction %s: no live producer of group %s to ask",
                          props.get(PROPERTY_UNIQ_KEY), props.get(PROPERTY_PGROUP))
            return True
        # The body is the record as a pull returns it: the client decodes it the same way.
        body = self.store.commitlog.read(result.phys_offset, result.end_phys_offset - result.phys_offset)
        request = Command(RequestCode.CHECK_TRANSACTION_STATE, {
            "tranStateTableOffset": str(result.queue_offset), "commitLogOffset": str(result.phys_offset),
            "msgId": props.get(PROPERTY_UNIQ_KEY, ""), "transactionId": props.get(PROPERTY_UNIQ_KEY, ""),
            "offsetMsgId": result.msg_ids[0] if result.msg_ids else ""}, body or b"")
        self.notify_peer(peers[checks % len(peers)], request)
        self.checks_sent += 1
        return True

    def persist(self, force: bool = False) -> None:
        self.progress.persist(force)
