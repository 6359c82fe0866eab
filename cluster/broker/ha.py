"""High availability: a master streams its CommitLog to its slaves (SPEC §1, §4 replication).

The HA channel is one ZeroMQ connection per slave: the slave's broker main process
(``HAClient``, a DEALER with identity ``<broker-name>-<id>``) connects to its master's HA
endpoint (``HAServer``, a ROUTER on ``BrokerConfig.ha_address``, in the master's broker main
process). Every message is two frames after the identity (their bytes: `ha_format.py`):

| direction | frames | meaning |
| --- | --- | --- |
| slave -> master | ``R``, u64 offset | "I have the log up to here; send from here" (start, gap) |
| slave -> master | ``A``, u64 offset | "I have the log up to here" (after each receive; every second) |
| master -> slave | ``D``, u64 offset, bytes | CommitLog bytes at that physical offset |

The master keeps, per slave, what it acknowledged and what was sent, and sends from
there in chunks of up to ``ha_chunk_bytes`` cut at record boundaries inside one segment
(``MessageStore.replication_chunk``), with at most ``ha_window_bytes`` unacknowledged.
It pushes once per loop turn, right after the turn's writes. The slave appends each chunk
verbatim at the same offset through its store (``append_replicated``: its own write_pos,
published in its control block), so its flush and reput workers run on it as on a
master's writes, and its files match the master's byte for byte. A chunk that does not
continue its log is either a duplicate (ignored) or past a gap (the slave reports its
offset again; the master rewinds). A master also rewinds, once per silence, a slave that
acknowledged nothing for ``RETRANSMIT_S`` while bytes were in flight, so a lost message costs
time, never data, and a stopped slave's queue stays bounded.

In sync: heard from within ``ha_slave_expiry_ms`` and no more than
``ha_slave_fall_behind_max_bytes`` behind. The master publishes the highest offset an
in-sync slave acknowledged as ``confirm_pos`` in its control block. A SYNC_MASTER send
is parked in ``replica_waiters`` (group commit, as FlushWaiters for the disk: many sends wait
at once, one acknowledgement releases all it covers) until confirm_pos passes its end:
SEND_OK then, FLUSH_SLAVE_TIMEOUT after ``sync_replication_timeout_ms``, and
SLAVE_NOT_AVAILABLE at once when no slave is in sync (the message is stored either way,
as in RocketMQ). In controller mode a master keeps a SyncStateSet instead (``sync_state.py``,
RocketMQ 5): a gone slave leaves it, and the wait is for its members (or ``in_sync_replicas``).
"""

from __future__ import annotations

import logging
import time

import zmq

from rocketbox.cluster.acl.curve import secure_client, secure_server, server_key_pair
from rocketbox.cluster.acl.zap import HA_DOMAIN
from rocketbox.cluster.broker.ha_format import (ACK, REPORT, DataHeader, HAFrameError, data_header, parse_data_header,
                                      parse_slave_message, parse_truncate, slave_message, truncate_message)
from rocketbox.cluster.broker.stats import Rate
from rocketbox.cluster.broker.sync_state import SyncStateSet, replicated_to
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.shm.epoch_format import replica_keep
from rocketbox.cluster.broker.waiters import FlushWaiters
from rocketbox.cluster.protocol import ResponseCode, to_json_bytes
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_frames import NOBLOCK, recv_parts, send_parts
from rocketbox.cluster.zmq_transport import CONTEXT

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

TICK_S = 0.05
HEARTBEAT_S = 1.0
RETRANSMIT_S = 1.0
REPORT_INTERVAL_S = 0.05
# HARuntimeInfo's transferredByteInSecond: bytes over the last second, from samples kept this long.
TRANSFER_RATE_HORIZON_S = 2.0


def _wall_ms() -> int:
    return int(time.time() * 1000)


def broker_id_of(identity: bytes) -> int:
    """A slave's broker id from its HA identity ``<broker-name>-<id>`` (-1 when it has none)."""
    tail = identity.rpartition(b"-")[2]
    return int(tail) if tail.isdigit() else -1


def _peer_address(frame) -> str:
    """The remote IP of the connection a message came by (ZeroMQ's Peer-Address), or "" when unknown."""
    try:
        return frame.get("Peer-Address") or ""
    except zmq.ZMQError:
        return ""


class _AnswersHAStatus:
    def on_ha_status(self, request: Command, reply=None) -> Command:
        """GET_BROKER_HA_STATUS (mqadmin haStatus): this side's ``ha_runtime_info``."""
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(self.ha_runtime_info()))


class SlaveState:
    __slots__ = ("identity", "broker_id", "acked", "sent", "heard_s", "diverged", "rewound_s", "reachable", "addr",
                 "transfer_from", "transferred", "transfer_rate", "last_transfer_pos", "last_transfer_s")

    def __init__(self, identity: bytes, offset: int, now_s: float, addr: str):
        self.identity = identity
        self.broker_id = broker_id_of(identity)
        self.addr = addr   # the slave's IP as its connection shows it (haStatus' #SlaveAddr)
        self.acked = offset
        self.sent = offset
        self.transfer_from = offset   # where it asked the stream to start, last time it asked
        self.transferred = 0          # bytes sent to it, resends included
        self.transfer_rate = Rate(TRANSFER_RATE_HORIZON_S)
        self.heard_s = now_s
        self.diverged = False   # it has bytes this master does not: never streamed to
        self.rewound_s = -1.0   # heard_s when it was last rewound: once per silence, not once a tick
        self.reachable = True   # logged once when it is not
        # The master's end when it last sent to it, and when: acknowledging that much is catching up.
        self.last_transfer_pos = offset
        self.last_transfer_s = now_s


class HAServer(_AnswersHAStatus):
    """The master side, on the broker's event loop."""

    def __init__(self, cfg, store, control, epoch: int, epochs, sync_state: SyncStateSet | None = None):
        """``epoch``: the epoch this master serves (0 without a controller); ``epochs``: its epoch file;
        ``sync_state``: its SyncStateSet in controller mode."""
        self.cfg = cfg
        self.store = store
        self.control = control
        self.epoch = epoch
        self.epochs = epochs
        self.slaves: dict[bytes, SlaveState] = {}
        self.replica_waiters = FlushWaiters()
        self.in_sync = False
        self.in_sync_ids: set[int] = set()   # broker ids of the slaves in sync (read-from-slave steering)
        self.sync_state = sync_state
        # Controller mode: the end offset up to which a sync write may be answered (sync_state.py).
        self.replicated_pos = -1
        self.socket = None

    def serve(self, loop) -> None:
        sock = self.socket = CONTEXT.get().socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)   # a full or unknown peer raises instead of dropping
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)    # a restarted slave takes its identity back
        if self.cfg.acl_enable:   # the whole CommitLog streams out here: the cluster's own key only
            secure_server(sock, server_key_pair(self.cfg.acl_file), HA_DOMAIN)
        sock.bind(f"tcp://{self.cfg.ha_address}")
        loop.add_reader(sock, self.on_readable)
        loop.after_each_batch(self.pump)
        loop.call_every(TICK_S, self.on_tick)

    def on_readable(self) -> None:
        now = time.monotonic()
        write_pos = self.control.write_pos
        for _ in range(256):
            try:
                frames = recv_parts(self.socket, NOBLOCK, False)
            except zmq.Again:
                break
            identity = frames[0].bytes
            try:
                message = parse_slave_message([frame.bytes for frame in frames[1:]])
            except HAFrameError as exc:
                _limited.warning("malformed", "malformed HA message from %r ignored: %s", identity[:64], exc)
                continue
            kind, offset = message.kind, message.offset
            slave = self.slaves.get(identity)
            if slave is None:
                slave = self.slaves[identity] = SlaveState(identity, offset, now, _peer_address(frames[0]))
                _limited.info("slave-connected", "slave %s connected from %s at offset %d (master at %d)",
                              identity.decode(errors="replace"), slave.addr, offset, write_pos)
            elif kind == REPORT or offset < slave.acked:
                slave.acked = slave.sent = offset   # it restarted, or saw a gap: send from there
                slave.transfer_from = offset
            else:
                slave.acked = offset
                slave.sent = max(slave.sent, offset)
            slave.heard_s = now
            self._judge(slave, message, write_pos)
            if self.sync_state is not None and not slave.diverged and slave.broker_id >= 1:
                self._caught_up(slave, write_pos, now)
        self._update_confirm(now)
        self.pump()

    def _judge(self, slave: SlaveState, message, write_pos: int) -> None:
        """Is the slave's log a prefix of this master's? A diverged slave is neither streamed to nor
        counted in sync (its acknowledgements name bytes this master does not hold)."""
        if self.cfg.controller_mode or message.last_epoch is None:
            keep = min(message.offset, write_pos)   # with a controller the epochs settle it at the replica's boot
        else:
            # Without a controller this master's log is the one that counts (RocketMQ's classic mode):
            # a power cut can take from it bytes its slave copied, and it then writes new ones there.
            keep = replica_keep(message.offset, message.last_epoch, message.last_epoch_start, self.epochs.entries,
                                write_pos)
        diverged = keep < message.offset
        if diverged and not slave.diverged:
            _limited.error("diverged", "slave %s holds bytes up to %d this master's log (at %d) does not share past "
                           "%d: not replicating to it%s", slave.identity.decode(errors="replace"), message.offset,
                           write_pos, keep, "" if self.cfg.controller_mode else "; told to drop what lies past it")
        slave.diverged = diverged
        if diverged and not self.cfg.controller_mode:
            try:
                send_parts(self.socket, [slave.identity, *truncate_message(keep)], NOBLOCK)
            except zmq.ZMQError:
                pass   # gone, or its queue is full: its next message asks again

    def _caught_up(self, slave: SlaveState, write_pos: int, now: float) -> None:
        """RocketMQ 5's AutoSwitchHAConnection: a slave that acknowledged the master's end as of its last
        transfer has caught up (then); one that did so within the master's epoch joins the SyncStateSet."""
        if slave.acked >= write_pos:
            when = now
        elif slave.acked >= slave.last_transfer_pos:
            when = slave.last_transfer_s
        else:
            return
        epoch_start = self.epochs.entries[-1].start_offset if self.epochs.entries else 0
        if self.sync_state.acknowledged(slave.broker_id, slave.acked, when, epoch_start):
            _limited.info("sync-expand", "slave %s caught up at %d: SyncStateSet now %s",
                          slave.identity.decode(errors="replace"), slave.acked, sorted(self.sync_state.local))

    def pump(self) -> None:
        """Send every slave what it lacks, within its window (once per loop turn, after the writes)."""
        if not self.slaves:
            return
        write_pos = self.control.write_pos
        chunk_max = self.cfg.ha_chunk_bytes
        window = self.cfg.ha_window_bytes
        master_epoch = self.epoch
        record_crc_from = self.store.record_crc_from
        for slave in list(self.slaves.values()):
            if slave.diverged:
                continue
            while slave.sent < write_pos and slave.sent - slave.acked < window:
                # A chunk stays inside one epoch, so the slave's epoch file can say where each begins.
                epoch, epoch_start, next_epoch_start = self.epochs.epoch_at(slave.sent)
                limit = chunk_max if next_epoch_start is None else min(chunk_max, next_epoch_start - slave.sent)
                chunk = self.store.replication_chunk(slave.sent, limit)
                if chunk is None:
                    break
                header = DataHeader(slave.sent, master_epoch, epoch, epoch_start, record_crc_from)
                try:
                    send_parts(self.socket, [slave.identity, *data_header(header), chunk], NOBLOCK, False)
                except zmq.Again:
                    break   # its queue is full: the next turn tries again
                except zmq.ZMQError as exc:   # EHOSTUNREACH: it disconnected
                    if slave.reachable:
                        _limited.info("unreachable", "slave %s unreachable (%s)",
                                      slave.identity.decode(errors="replace"), exc)
                    slave.reachable = False
                    break
                slave.reachable = True
                slave.sent += len(chunk)
                slave.last_transfer_pos, slave.last_transfer_s = write_pos, time.monotonic()
                slave.transferred += len(chunk)

    def on_tick(self) -> None:
        now = time.monotonic()
        expiry_s = self.cfg.ha_slave_expiry_ms / 1000
        for identity, slave in list(self.slaves.items()):
            slave.transfer_rate.sample(now, slave.transferred)
            if now - slave.heard_s > expiry_s:
                _limited.warning("silent", "slave %s silent for %.1f s: dropped", identity.decode(errors="replace"),
                                 expiry_s)
                del self.slaves[identity]
            elif slave.sent > slave.acked and now - slave.heard_s > RETRANSMIT_S and slave.rewound_s != slave.heard_s:
                # Nothing acknowledged for a while: send it again, once (a stopped slave's queue stays bounded).
                slave.rewound_s = slave.heard_s
                slave.sent = slave.acked
        if self.sync_state is not None:
            gone = self.sync_state.shrink(now)
            if gone:
                _limited.warning("sync-shrink", "replicas %s have not caught up for %d ms: SyncStateSet now %s",
                                 sorted(gone), self.cfg.ha_max_time_slave_not_catchup_ms,
                                 sorted(self.sync_state.local))
        self._update_confirm(now)
        self.pump()

    def _in_sync(self, slave: SlaveState, now: float, write_pos: int) -> bool:
        return (not slave.diverged and now - slave.heard_s <= self.cfg.ha_slave_expiry_ms / 1000
                and write_pos - slave.acked <= self.cfg.ha_slave_fall_behind_max_bytes)

    def _update_confirm(self, now: float) -> None:
        write_pos = self.control.write_pos
        best = -1
        in_sync_ids = set()
        for slave in self.slaves.values():
            if self._in_sync(slave, now, write_pos):
                best = max(best, slave.acked)
                if slave.broker_id >= 1:
                    in_sync_ids.add(slave.broker_id)
        self.in_sync = best >= 0
        self.in_sync_ids = in_sync_ids
        if best >= 0 and best != self.control.confirm_pos:
            self.control.confirm_pos = best
        if self.sync_state is not None:
            acks = {s.broker_id: s.acked for s in self.slaves.values() if not s.diverged and s.broker_id >= 1}
            self.replicated_pos = replicated_to(self.sync_state, acks, self.cfg.all_ack_in_sync_state_set,
                                                self.cfg.in_sync_replicas)
            released_to = self.replicated_pos
        else:
            released_to = self.control.confirm_pos if self.in_sync else -1
        if len(self.replica_waiters):
            self.replica_waiters.release(released_to, now)

    def refusal(self) -> str | None:
        """Why a sync write may not even be stored now (RocketMQ 5's minInSyncReplicas), or None."""
        if self.sync_state is None or self.sync_state.size() >= self.cfg.min_in_sync_replicas:
            return None
        return (f"in-sync replicas not enough: the SyncStateSet {sorted(self.sync_state.members())} has "
                f"{self.sync_state.size()} of the {self.cfg.min_in_sync_replicas} minInSyncReplicas")

    def await_replica(self, end_phys_offset: int, response, reply):
        """A SYNC_MASTER send's answer: returned when known now, else parked and sent by ``reply``."""
        if self.sync_state is not None:
            if end_phys_offset <= self.replicated_pos:
                return response
        elif not self.in_sync:
            response.code = ResponseCode.SLAVE_NOT_AVAILABLE
            response.remark = "no slave is in sync with this master"
            return response
        elif end_phys_offset <= self.control.confirm_pos:
            return response
        timeout_ms = self.cfg.sync_replication_timeout_ms

        def on_timeout():
            response.code = ResponseCode.FLUSH_SLAVE_TIMEOUT
            response.remark = f"no slave confirmed it within {timeout_ms} ms"
            reply(response)

        self.replica_waiters.park(end_phys_offset, time.monotonic() + timeout_ms / 1000,
                                  lambda: reply(response), on_timeout)
        return None

    def info(self) -> dict:
        now = time.monotonic()
        sync = self.sync_state
        return {"confirmPos": self.control.confirm_pos, "inSync": self.in_sync,
                "syncStateSet": sorted(sync.local) if sync else None,
                "controllerSyncStateSet": sorted(sync.confirmed) if sync else None,
                "parkedReplicaWaiters": len(self.replica_waiters),
                "slaves": [{"identity": s.identity.decode(errors="replace"), "brokerId": s.broker_id,
                            "ackedPos": s.acked, "sentPos": s.sent, "silentMs": int((now - s.heard_s) * 1000),
                            "diverged": s.diverged} for s in self.slaves.values()]}

    def ha_runtime_info(self) -> dict:
        """RocketMQ's HARuntimeInfo of a master: each slave's acknowledged offset, how far behind it is
        (``diff``), whether it is in sync, bytes sent to it in the last second and where its stream
        started; ``brokerId`` is ours (from its HA identity)."""
        now = time.monotonic()
        write_pos = self.control.write_pos
        connections = [{"addr": s.addr, "brokerId": s.broker_id, "slaveAckOffset": s.acked,
                        "diff": write_pos - s.acked, "inSync": self._in_sync(s, now, write_pos),
                        "transferredByteInSecond": int(s.transfer_rate.per_second(1.0)),
                        "transferFromWhere": s.transfer_from} for s in self.slaves.values()]
        return {"master": True, "masterCommitLogMaxOffset": write_pos, "haConnectionInfo": connections,
                "inSyncSlaveNums": sum(1 for c in connections if c["inSync"])}

    def close(self) -> None:
        self.replica_waiters.fail_all()
        if self.socket is not None:
            self.socket.close(0)


class HAClient(_AnswersHAStatus):
    """The slave side, on the slave broker's event loop: the only writer of its CommitLog."""

    def __init__(self, cfg, store, epoch: int, epochs, on_written, on_truncate=None):
        """``epoch``: the master epoch it was named for; ``on_written()``: replicated bytes were appended;
        ``on_truncate(offset)``: the master says this log is longer than its own (a restart follows)."""
        self.cfg = cfg
        self.on_truncate = on_truncate
        self.store = store
        self.epochs = epochs
        self.on_written = on_written
        self.socket = None
        self.received_bytes = 0
        self.received_rate = Rate(TRANSFER_RATE_HORIZON_S)
        self.last_read_ms = 0    # wall time of the last bytes appended (haStatus' #LastReadTime)
        self.last_write_ms = 0   # wall time of the last report or acknowledgement sent
        self._reported_s = 0.0
        self.heard_s = 0.0
        # With a controller: the epoch of the master it named; bytes of any other epoch are refused.
        self.master_epoch: int | None = epoch if cfg.controller_mode else None
        self.refused_chunks = 0
        self._refusal_logged_s = 0.0

    def serve(self, loop) -> None:
        sock = self.socket = CONTEXT.get().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IDENTITY, f"{self.cfg.broker_name}-{self.cfg.broker_id}".encode())
        secure_client(sock)   # the cluster's own key when access control is on
        sock.connect(f"tcp://{self.cfg.ha_master_address}")
        self._send(REPORT)
        loop.add_reader(sock, self.on_readable)
        loop.call_every(HEARTBEAT_S, self._heartbeat)

    def _heartbeat(self) -> None:
        self.received_rate.sample(time.monotonic(), self.received_bytes)
        self._send(ACK)

    def _send(self, kind: bytes) -> None:
        try:
            last = self.epochs.entries[-1] if self.epochs.entries else None
            send_parts(self.socket, slave_message(kind, self.store.commitlog.write_pos,
                                                  last.epoch if last else 0, last.start_offset if last else 0),
                       NOBLOCK)
            self.last_write_ms = _wall_ms()
        except zmq.Again:
            pass   # not connected and the queue is full: the heartbeat says it again

    def on_readable(self) -> None:
        appended = gap = False
        commitlog = self.store.commitlog
        for _ in range(64):
            try:
                frames = recv_parts(self.socket, NOBLOCK, False)
            except zmq.Again:
                break
            try:
                keep = parse_truncate([frame.bytes for frame in frames]) if len(frames) == 2 else None
                if keep is not None:
                    self._truncate(keep)
                    break
                if len(frames) != 3:
                    raise HAFrameError(f"a DATA message has 3 frames, not {len(frames)}")
                header = parse_data_header(frames[0].bytes, frames[1].bytes)
            except HAFrameError as exc:
                log.warning("malformed HA message from the master ignored: %s", exc)
                continue
            if self.master_epoch is not None and header.master_epoch != self.master_epoch:
                self._refuse_stale(header)
                continue
            offset = header.offset
            data = frames[2].buffer
            pos = commitlog.write_pos
            if offset == pos:
                if header.epoch > self.epochs.last_epoch:
                    self.epochs.begin(header.epoch, header.epoch_start)
                if not self.store.append_replicated(offset, data, header.record_crc_from):
                    log.error("cannot append replicated bytes at %d (disk full?)", offset)
                    gap = True
                    break
                appended = True
                self.received_bytes += len(data)
            elif offset > pos or offset + len(data) > pos:
                gap = True
        if appended:
            self.heard_s = time.monotonic()
            self.last_read_ms = _wall_ms()
            self.on_written()
        now = time.monotonic()
        if gap and now - self._reported_s >= REPORT_INTERVAL_S:
            self._reported_s = now
            self._send(REPORT)
        elif appended:
            self._send(ACK)

    def _truncate(self, keep: int) -> None:
        end = self.store.commitlog.write_pos
        if keep >= end or self.on_truncate is None or self.master_epoch is not None:
            return   # not longer than the master's (any more), or a controller's epochs decide
        log.warning("the master's log ends at %d, this one at %d: dropping the %d bytes past it "
                    "(copied before the master flushed them, then lost there: under SYNC_FLUSH never "
                    "acknowledged)",
                    keep, end, end - keep)
        self.on_truncate(keep)

    def _refuse_stale(self, header: DataHeader) -> None:
        self.refused_chunks += 1
        now = time.monotonic()
        if now - self._refusal_logged_s >= 1.0:
            self._refusal_logged_s = now
            log.warning("refused replicated bytes at %d from a master of epoch %d (this replica follows "
                        "epoch %d)", header.offset, header.master_epoch, self.master_epoch)

    def info(self) -> dict:
        return {"masterHaAddress": self.cfg.ha_master_address, "masterAddress": self.cfg.master_address,
                "masterEpoch": self.master_epoch, "refusedChunks": self.refused_chunks,
                "receivedBytes": self.received_bytes, "writePos": self.store.commitlog.write_pos}

    def ha_runtime_info(self) -> dict:
        """RocketMQ's HARuntimeInfo of a slave: its master's HA address, its own CommitLog end, when it
        last read from and wrote to that connection, and bytes received in the last second."""
        return {"master": False, "haConnectionInfo": [], "inSyncSlaveNums": 0,
                "haClientRuntimeInfo": {
                    "masterAddr": self.cfg.ha_master_address, "maxOffset": self.store.commitlog.write_pos,
                    "lastReadTimestamp": self.last_read_ms, "lastWriteTimestamp": self.last_write_ms,
                    "transferredByteInSecond": int(self.received_rate.per_second(1.0))}}

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close(0)
