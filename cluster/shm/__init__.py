"""The store: shared-memory files that several processes of one broker map at once, and their
on-disk layouts. JSON state beside it lives in ``json_files.py`` and ``live_settings.py``, its test
harness in ``tests/store_harness.py``.

The message record itself and the batch body a producer sends are not the store's: the client and
the proxy read them too (``cluster/message/record_format.py``, ``batch_format.py``, as RocketMQ's
MessageDecoder lives in ``common``); the store imports them.

Map (pure layouts first; nothing here opens a socket):

| module | what |
| --- | --- |
| commitlog_format | a segment besides its records: the end-of-file blank, a position read, torn records |
| consumequeue_format | the 20-byte ConsumeQueue entry, Java String.hashCode, tag hash |
| indexfile_format | IndexFile header, slots, entries, key hash |
| mapped_file | preallocated (fallocate), atomically created, mmap'ed fixed-size files |
| commitlog | segments, append with roll-over, read/walk, flush, truncate |
| consumequeue | one queue's entry files; the set of all queues |
| indexfile | key -> phys offsets lookup files |
| control | the shared u64 cursors (write/flushed/dispatched/confirm) and heartbeats |
| checkpoint | durable positions for recovery |
| reput, flush, allocate | the steppable services the worker processes run |
| recovery | start-up repair, with its report |
| store | MessageStore, the broker's facade: put/get statuses, queries |

Who writes what: the broker appends records and ``write_pos``; the flush worker owns
``flushed_pos`` and the checkpoint; the reput worker owns ConsumeQueue/IndexFile files
and ``dispatched_pos``; the allocate worker only creates segments. Recovery runs in
the broker before the workers start and may touch everything (control.py has the table).

Three offsets: ``phys_offset`` is a byte position in the whole CommitLog;
``queue_offset`` is an entry number in one ConsumeQueue (what consumers commit);
``pos`` is a byte position inside one file.
"""
