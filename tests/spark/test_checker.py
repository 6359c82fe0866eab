"""The checker on tiny histories: a clean one that reports only its explained duplicates, and
one planted anomaly per scenario on top of it, which must be the only case added.

The clean run: key ``a`` goes to queue 0, keys ``b`` and ``c`` to queue 1, one broker.
a-1 timed out (info) but was stored, then its resend stored it again (queue 0 holds
a-0, a-1, a-1, a-2). b-1 was refused once, then stored. c-0 was refused and c-1's task
died before its answer: neither is stored. The DataSource reads each queue once. Push
consumer push-1 reads queue 0 up to offset 2, commits 2, restarts and resumes at 2; it reads
queue 1 up to offset 1 and commits 1, then a rebalance hands queue 1 to push-2, which
resumes at 1 and commits 3 at the end.

A Spark job costs seconds, so every scenario is checked in one ``check_all``: each has its
own broker and its keys and msg_ids carry its name, which keeps them apart in every check.
"""

from __future__ import annotations

import itertools
import zlib
from collections import defaultdict

import pytest

from rocketbox.spark import checker
from rocketbox.spark.schemas import (COMMITS, FAIL, HISTORY, INFO, INVOKE, OK, READER_DATASOURCE, READER_PUSH, READS,
                           encode_body)

QUEUE_OF_KEY = {"a": 0, "b": 1, "c": 1, "z": 1}
DS, PUSH = READER_DATASOURCE, READER_PUSH
SENT = object()   # take this field from what was sent


def crc(key: str, seq: int) -> int:
    return zlib.crc32(encode_body(key, seq, 32))


class Scenario:
    """Builds the three tables row by row, every event one tick after the one before.

    Tests name keys and msg_ids bare (``a``, ``a-1``); the tables hold them prefixed with
    the scenario's name, and its one broker is ``broker-<name>``.
    """

    def __init__(self, name: str):
        self.name, self.broker = name, f"broker-{name}"
        self.history, self.reads, self.commits = [], [], []
        self.power_cuts: list[tuple[str, int, int]] = []
        self._clock = itertools.count(1_000_000, 1_000)
        self._ops: dict[str, itertools.count] = defaultdict(itertools.count)
        self._deliveries: dict[str, itertools.count] = defaultdict(itertools.count)

    def send(self, key: str, seq: int, *outcomes):
        """One attempt per outcome: ``(OK, queue_offset)``, FAIL, INFO, or None (never completed)."""
        process = f"{self.name}/p-{key}"
        for outcome in outcomes:
            head = dict(process=process, op=next(self._ops[process]), key=f"{self.name}/{key}", seq=seq,
                        msg_id=f"{self.name}/{key}-{seq}", body_crc=crc(key, seq))
            self.history.append(dict(head, type=INVOKE, time_ns=next(self._clock), queue_id=QUEUE_OF_KEY[key]))
            if outcome is None:
                continue
            kind, offset = outcome if isinstance(outcome, tuple) else (outcome, None)
            done = dict(head, type=kind, time_ns=next(self._clock))
            if kind == OK:
                done.update(broker=self.broker, queue_id=QUEUE_OF_KEY[key], queue_offset=offset)
            else:
                done.update(error="CODE_14" if kind == FAIL else "timeout")
            self.history.append(done)

    def read(self, reader: str, consumer: str, msg_id: str, offset: int, *, key=SENT, seq=SENT, body_crc=SENT):
        """One delivery of ``msg_id`` from ``offset`` of its key's queue; key, seq and crc as sent unless given."""
        sent_key, sent_seq = msg_id.rsplit("-", 1)
        now = next(self._clock)
        self.reads.append(dict(
            reader=reader, consumer=consumer, delivery_index=next(self._deliveries[consumer]),
            msg_id=f"{self.name}/{msg_id}", key=f"{self.name}/{sent_key}" if key is SENT else key,
            seq=int(sent_seq) if seq is SENT else seq,
            body_crc=crc(sent_key, int(sent_seq)) if body_crc is SENT else body_crc,
            broker=self.broker, queue_id=QUEUE_OF_KEY[sent_key], queue_offset=offset,
            born_ms=now // 1_000_000, store_ms=now // 1_000_000, delivered_ns=now))

    def read_all(self, reader: str, consumer: str, *placed: tuple[str, int]):
        for msg_id, offset in placed:
            self.read(reader, consumer, msg_id, offset)

    def commit(self, consumer: str, queue_id: int, offset: int):
        self.commits.append(dict(consumer=consumer, broker=self.broker, queue_id=queue_id, committed_offset=offset,
                                 time_ns=next(self._clock)))

    def start(self, consumer: str, queue_id: int, offset: int):
        """``consumer`` began reading ``queue_id`` at ``offset`` (what it read from the broker)."""
        self.commits.append(dict(consumer=consumer, broker=self.broker, queue_id=queue_id, committed_offset=offset,
                                 time_ns=next(self._clock), kind="start"))

    def power_cut(self):
        """Its broker's host loses power (two ticks, start and end)."""
        self.power_cuts.append((self.broker, next(self._clock), next(self._clock)))

    def wait(self, seconds: float):
        self._clock = itertools.count(next(self._clock) + int(seconds * 1e9), 1_000)

    def case(self, anomaly, reader, msg_id, offset, *, key=SENT, seq=SENT, queue_id=None, explained=None):
        """An expected ANOMALY row, detail aside; key, seq and queue follow msg_id unless given."""
        if msg_id is not None:
            sent_key, sent_seq = msg_id.rsplit("-", 1)
            key = f"{self.name}/{sent_key}" if key is SENT else key
            seq = int(sent_seq) if seq is SENT else seq
            queue_id, msg_id = QUEUE_OF_KEY[sent_key], f"{self.name}/{msg_id}"
        else:
            key = seq = None
        return anomaly, reader, msg_id, key, seq, self.broker, queue_id, offset, explained


def frames(spark, scenarios):
    """HISTORY, READS and COMMITS DataFrames holding every scenario's rows."""
    return [spark.createDataFrame([tuple(row.get(f.name) for f in schema.fields)
                                   for s in scenarios for row in getattr(s, table)], schema)
            for table, schema in (("history", HISTORY), ("reads", READS), ("commits", COMMITS))]


def clean(name: str = "clean") -> tuple[Scenario, set]:
    """The clean run (module doc) and the cases it must report: its explained duplicates."""
    s = Scenario(name)
    s.send("a", 0, (OK, 0))
    s.send("a", 1, INFO, (OK, 2))           # the timed-out attempt was stored too, at offset 1
    s.send("a", 2, (OK, 3))
    s.send("b", 0, (OK, 0))
    s.send("b", 1, FAIL, (OK, 1))
    s.send("b", 2, (OK, 2))
    s.send("c", 0, FAIL)
    s.send("c", 1, None)
    s.read_all(DS, "ds-0", ("a-0", 0), ("a-1", 1), ("a-1", 2), ("a-2", 3))
    s.read_all(DS, "ds-1", ("b-0", 0), ("b-1", 1), ("b-2", 2))
    s.read_all(PUSH, "push-1", ("a-0", 0), ("a-1", 1), ("b-0", 0), ("a-1", 2), ("b-1", 1))
    s.commit("push-1", 0, 2)
    s.commit("push-1", 1, 1)
    s.read_all(PUSH, "push-1", ("a-1", 2), ("a-2", 3))      # restarted: resumes at the committed offset
    s.read_all(PUSH, "push-2", ("b-1", 1), ("b-2", 2))      # rebalanced: resumes at the committed offset
    s.commit("push-2", 1, 3)
    return s, {s.case(checker.DUPLICATE, DS, "a-1", 2, explained=checker.PRODUCER_RETRY),
               s.case(checker.DUPLICATE, PUSH, "a-1", 2, explained=checker.PRODUCER_RETRY),
               s.case(checker.DUPLICATE, PUSH, "a-1", 2, explained=checker.REDELIVERY),
               s.case(checker.DUPLICATE, PUSH, "b-1", 1, explained=checker.REDELIVERY)}


# Each plant adds one anomaly to a clean run and returns the one case it must add.

def lost(s):
    s.send("a", 3, (OK, 4))
    s.read(DS, "ds-0", "a-3", 4)          # the push consumers never get it
    return s.case(checker.LOST, PUSH, "a-3", 4)


def unexpected_never_sent(s):
    s.read(DS, "ds-1", "z-0", 3)
    return s.case(checker.UNEXPECTED, DS, "z-0", 3)


def unexpected_unparsed(s):
    s.send("b", 3, (OK, 3))
    s.read(PUSH, "push-2", "b-3", 3)
    s.read(DS, "ds-1", "b-3", 3, key=None, seq=None)
    return s.case(checker.UNEXPECTED, DS, "b-3", 3, key=None, seq=None)


def unexpected_other_seq(s):
    s.send("b", 3, (OK, 3))
    s.read(PUSH, "push-2", "b-3", 3)
    s.read(DS, "ds-1", "b-3", 3, seq=7)
    return s.case(checker.UNEXPECTED, DS, "b-3", 3, seq=7)


def aborted_read(s):
    s.read(DS, "ds-1", "c-0", 3)          # c-0's only attempt was refused
    return s.case(checker.ABORTED_READ, DS, "c-0", 3)


def duplicate_stored_twice_without_indeterminate_send(s):
    s.send("b", 3, (OK, 4))               # one attempt, acknowledged, yet stored at 3 and 4
    s.read_all(DS, "ds-1", ("b-3", 3), ("b-3", 4))
    s.read(PUSH, "push-2", "b-3", 4)
    return s.case(checker.DUPLICATE, DS, "b-3", 4)


def duplicate_redelivered_below_committed_offset(s):
    s.read(PUSH, "push-3", "b-0", 0)      # queue 1 is committed up to 3 by now
    return s.case(checker.DUPLICATE, PUSH, "b-0", 0)


def duplicate_redelivered_by_a_session_started_below_the_commit(s):
    s.start("push-3", 1, 0)               # queue 1 is committed up to 3: a start at 0 is a rewind
    s.read(PUSH, "push-3", "b-0", 0)
    return s.case(checker.DUPLICATE, PUSH, "b-0", 0)


def redelivery_from_offsets_a_power_cut_reverted(s):
    # Queue 1's commit of 3 is younger than the broker's offset persisting: the cut may take it
    # back, so push-3 starting at 0 is what the broker told it, and at-least-once allows it.
    s.power_cut()
    s.start("push-3", 1, 0)
    s.read(PUSH, "push-3", "b-0", 0)
    return s.case(checker.DUPLICATE, PUSH, "b-0", 0, explained=checker.REDELIVERY)


def duplicate_from_a_start_below_what_the_broker_had_persisted_before_a_power_cut(s):
    s.wait(7)                             # queue 1's commit of 3 is persisted by the cut
    s.power_cut()
    s.start("push-3", 1, 0)
    s.read(PUSH, "push-3", "b-0", 0)
    return s.case(checker.DUPLICATE, PUSH, "b-0", 0)


def redelivery_from_offsets_a_second_power_cut_reverted_soon_after_the_first(s):
    # The first cut takes queue 1's young commit of 3 back; its consumer commits 3 again, and a
    # second cut strikes 5.5 s after the restart: the broker need not have persisted since, so the
    # commit of 3, though more than 6 s old, may be gone again, and a start at 0 is what it had.
    s.wait(1)
    s.power_cut()
    s.commit("push-2", 1, 3)
    s.wait(5.5)
    s.power_cut()
    s.start("push-3", 1, 0)
    s.read(PUSH, "push-3", "b-0", 0)
    return s.case(checker.DUPLICATE, PUSH, "b-0", 0, explained=checker.REDELIVERY)


def redelivery_while_the_old_owner_still_commits(s):
    # push-3 takes queue 1 over at the committed offset 3; push-2, not yet told, reads b-3
    # and commits past it; push-3 then delivers b-3 again: at-least-once, explained.
    s.start("push-3", 1, 3)
    s.send("b", 3, (OK, 3))
    s.read(PUSH, "push-2", "b-3", 3)
    s.commit("push-2", 1, 4)
    s.read(PUSH, "push-3", "b-3", 3)
    s.read(DS, "ds-1", "b-3", 3)
    return s.case(checker.DUPLICATE, PUSH, "b-3", 3, explained=checker.REDELIVERY)


def duplicate_datasource_position_read_twice(s):
    s.read(DS, "ds-2", "a-2", 3)          # at or after queue 0's committed offset, which binds push only
    return s.case(checker.DUPLICATE, DS, "a-2", 3)


def inconsistent_offset(s):
    s.send("b", 3, (OK, 2))               # acknowledged at b-2's offset; the readers find it at 3
    s.read(DS, "ds-1", "b-3", 3)
    s.read(PUSH, "push-2", "b-3", 3)
    return s.case(checker.INCONSISTENT_OFFSET, None, None, 2, queue_id=1)


def queue_order(s):
    one, two = (r for r in s.reads if r["consumer"] == "ds-1" and r["queue_offset"] in (1, 2))
    one["delivery_index"], two["delivery_index"] = two["delivery_index"], one["delivery_index"]
    return s.case(checker.QUEUE_ORDER, DS, "b-1", 1)


def key_order(s):
    s.send("b", 3, INFO)                  # timed out, yet stored at 4: after b-4
    s.send("b", 4, (OK, 3))
    s.read_all(DS, "ds-1", ("b-4", 3), ("b-3", 4))
    s.read(PUSH, "push-2", "b-4", 3)      # push never reaches b-3, which nobody acknowledged
    return s.case(checker.KEY_ORDER, DS, "b-3", 4)


def checksum_mismatch(s):
    # Stored without an acknowledgement and read by the DataSource alone, so no other
    # reader or ok row at that position disagrees: only the checksum says it is damaged.
    s.send("b", 3, INFO)
    s.read(DS, "ds-1", "b-3", 3, body_crc=crc("b", 3) ^ 1)
    return s.case(checker.CHECKSUM_MISMATCH, DS, "b-3", 3)


PLANTS = (lost, unexpected_never_sent, unexpected_unparsed, unexpected_other_seq, aborted_read,
          duplicate_stored_twice_without_indeterminate_send, duplicate_redelivered_below_committed_offset,
          duplicate_redelivered_by_a_session_started_below_the_commit, redelivery_while_the_old_owner_still_commits,
          redelivery_from_offsets_a_power_cut_reverted,
          redelivery_from_offsets_a_second_power_cut_reverted_soon_after_the_first,
          duplicate_from_a_start_below_what_the_broker_had_persisted_before_a_power_cut,
          duplicate_datasource_position_read_twice, inconsistent_offset, queue_order, key_order, checksum_mismatch)


@pytest.fixture(scope="module")
def checked(spark):
    """Per scenario name: (the cases it must report, the check_all rows found for its broker)."""
    expected, scenarios = {}, []
    for plant in (None, *PLANTS):
        s, cases = clean(plant.__name__ if plant else "clean")
        expected[s.broker] = cases | ({plant(s)} if plant else set())
        scenarios.append(s)
    found = checker.check_all(*frames(spark, scenarios),
                              power_cuts=[cut for s in scenarios for cut in s.power_cuts]).cache()
    rows = defaultdict(set)
    for row in found.collect():
        assert row.detail, row
        rows[row.broker].add(tuple(row)[:-1])
    yield {s.name: (expected[s.broker], rows[s.broker]) for s in scenarios}, found
    found.unpersist()


def test_clean_history_reports_only_its_explained_duplicates(checked):
    by_scenario, found = checked
    expected, rows = by_scenario["clean"]
    assert rows == expected
    counts = {tuple(row) for row in checker.summary(found.filter(found.broker == "broker-clean")).collect()}
    assert counts == {(checker.DUPLICATE, DS, checker.PRODUCER_RETRY, 1),
                      (checker.DUPLICATE, PUSH, checker.PRODUCER_RETRY, 1),
                      (checker.DUPLICATE, PUSH, checker.REDELIVERY, 2)}


@pytest.mark.parametrize("plant", [p.__name__ for p in PLANTS])
def test_one_planted_anomaly_is_the_only_case_added(checked, plant):
    expected, rows = checked[0][plant]
    assert rows == expected


def test_attempts_pairs_invokes_with_completions(spark):
    history = frames(spark, [clean()[0]])[0]
    rows = {(r.msg_id, r.op): r for r in checker.attempts(history).collect()}
    assert len(rows) == 10
    timed_out, stored = rows[("clean/a-1", 1)], rows[("clean/a-1", 2)]   # ops count per key
    assert (timed_out.type, timed_out.queue_offset, timed_out.error) == (INFO, None, "timeout")
    assert (stored.type, stored.broker, stored.queue_id, stored.queue_offset) == (OK, "broker-clean", 0, 2)
    assert stored.complete_ns > stored.invoke_ns
    died = rows[("clean/c-1", 1)]
    assert (died.type, died.complete_ns, died.queue_id) == (INFO, None, 1)


def test_lost_holds_a_reader_that_delivered_nothing_to_account(spark):
    history, reads, _ = frames(spark, [clean()[0]])
    found = checker.lost(history, reads.filter(reads.reader == DS), readers=[DS, PUSH]).collect()
    assert sorted(row.msg_id for row in found) == [f"clean/{m}" for m in ("a-0", "a-1", "a-2", "b-0", "b-1", "b-2")]
    assert {row.reader for row in found} == {PUSH}
