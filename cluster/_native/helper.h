/* RocketBox native helper: the whole C surface, declarations only.
 *
 * This file is read twice: by the C compiler (helper.c and the cffi wrapper
 * include it) and by cffi's cdef (build.py drops the preprocessor lines and
 * hands it the rest). So: no macros below the includes, only plain C
 * declarations and enums.
 *
 * Contract shared by every function but rb_crc32 (which cannot fail):
 *   - a return value >= 0 is success (a count where the function says so);
 *   - a negative value is -errno from a failed system call, or one of the
 *     rb_status codes below (all < -4095, beyond any errno).
 *   cluster/_native/__init__.py turns them into exceptions in one function.
 *   - positions and lengths are int64_t so that a negative value from Python
 *     is an RB_E_RANGE, checked here, rather than a wrap-around.
 *
 * Byte order: the CommitLog record and the batch items are big-endian, as
 * in RocketMQ. The u64 cursor slots are NATIVE byte order (Python struct
 * format "=Q"): they never leave the machine.
 */
#ifndef ROCKETBOX_HELPER_H
#define ROCKETBOX_HELPER_H

#include <stddef.h>
#include <stdint.h>

/* ---- byte layouts the helper reads and writes ----
 * Mirrored from cluster/shm/commitlog_format.py, batch_format.py, indexfile_format.py and
 * consumequeue_format.py; tests/unit/test_native_layout.py compares every value with the
 * Python constants, so the two cannot drift apart unnoticed. */

/* The CommitLog record (big-endian). */
enum rb_record_layout {
    OFF_TOTALSIZE = 0, OFF_MAGIC = 4, OFF_BODYCRC = 8, OFF_QUEUEID = 12, OFF_FLAG = 16,
    OFF_QUEUEOFFSET = 20, OFF_PHYSICALOFFSET = 28, OFF_SYSFLAG = 36, OFF_BORNTIMESTAMP = 40,
    OFF_BORNHOST = 48, OFF_STORETIMESTAMP = 56, OFF_STOREHOST = 64, OFF_RECONSUMETIMES = 72,
    OFF_PREPAREDOFFSET = 76, OFF_BODYLEN = 84,
    RECORD_HEAD_BYTES = 88,   /* up to and including the body length */
    RECORD_FIXED_BYTES = 91,  /* + topic length byte + properties length */
    BLANK_BYTES_MIN = 8,      /* TOTALSIZE + MAGICCODE */
    TOPIC_BYTES_MAX = 127     /* the topic length is a signed byte */
};

/* The batch item (RocketMQ MessageDecoder.encodeMessages), big-endian. */
enum rb_item_layout {
    ITEM_OFF_TOTALSIZE = 0, ITEM_OFF_FLAG = 12, ITEM_OFF_BODYLEN = 16, ITEM_OFF_BODY = 20,
    ITEM_FIXED_BYTES = 22     /* five int32 + the int16 properties length */
};

/* The IndexFile: header, hash slots, entries. */
enum rb_index_layout {
    IX_HEADER_BYTES = 40, IX_SLOT_BYTES = 4, IX_ENTRY_BYTES = 20,
    IX_OFF_BEGIN_TS = 0, IX_OFF_END_TS = 8, IX_OFF_BEGIN_PHYS = 16, IX_OFF_END_PHYS = 24,
    IX_OFF_SLOTS_USED = 32, IX_OFF_INDEX_COUNT = 36,
    IX_ENTRY_OFF_HASH = 0, IX_ENTRY_OFF_PHYS = 4, IX_ENTRY_OFF_TIME_DIFF = 12, IX_ENTRY_OFF_PREV = 16,
    IX_CHAIN_STEPS_MAX = 1000000   /* indexfile.LOOKUP_CHAIN_STEPS_MAX */
};

/* The ConsumeQueue entry. */
enum rb_cq_layout { CQ_ENTRY_BYTES = 20, CQ_OFF_PHYS = 0, CQ_OFF_SIZE = 8, CQ_OFF_TAG = 12 };

/* The properties string's separators and the transaction bits of SYSFLAG. */
enum rb_record_codes {
    PROPERTY_NAME_VALUE_SEPARATOR = 1, PROPERTY_SEPARATOR = 2,
    SYSFLAG_TRANSACTION_PREPARED = 4, SYSFLAG_TRANSACTION_ROLLBACK = 12, SYSFLAG_TRANSACTION_MASK = 12
};

/* Records as delivered (commitlog_format.delivered_records): the records at src[0, src_len),
 * whole and back to back (a pull's answer), each without the whole-record CRC property that
 * ends its properties where it has one (TOTALSIZE and the properties length 20 less), copied to
 * dst (dst_len >= src_len). Returns the bytes written, or -1 when src does not hold whole records. */
int64_t rb_delivered_records(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);

/* MAGICCODE of a record (blank == 0) or of the blank that ends a segment. */
uint32_t rb_record_magic(int blank);

enum rb_status {
    RB_OK = 0,
    RB_E_RANGE = -10001,           /* [start, end) not inside the buffer */
    RB_E_ARGUMENT = -10003,        /* topic longer than 127 bytes, page size not a power of two */
    RB_E_BATCH_MALFORMED = -10004, /* batch item sizes do not add up */
    RB_E_DEST_TOO_SMALL = -10005   /* the records do not fit: roll to the next file */
};

/* ---- memory: page-aligned in here, so callers pass byte positions ---- */

/* msync the pages covering buf[start, end); sync != 0: MS_SYNC, else MS_ASYNC. */
int rb_msync_range(uint8_t *buf, size_t buf_len, int64_t start, int64_t end, int sync);
int rb_mlock(uint8_t *buf, size_t buf_len, int64_t start, int64_t length);
int rb_munlock(uint8_t *buf, size_t buf_len, int64_t start, int64_t length);

/* Read a byte of every page_bytes page that buf[start, start + length) touches,
 * faulting it into the page cache before an append or a read needs it (reads only:
 * safe while another process appends). Returns pages touched. */
int64_t rb_preheat_read(const uint8_t *buf, size_t buf_len, int64_t start, int64_t length,
                        int64_t page_bytes);

/* ---- cursors shared between processes through one mmap ---- */

/* Acquire load / release store of the native-order u64 slots[index]; slots 8-byte aligned. */
uint64_t rb_slot_load(const uint64_t *slots, int64_t index);
void rb_slot_store(uint64_t *slots, int64_t index, uint64_t value);

/* ---- CRC-32 (zlib's: reflected polynomial 0xEDB88320) ---- */

/* crc32(data, value) as zlib.crc32: value is the running CRC, 0 to start. */
uint32_t rb_crc32(uint32_t value, const uint8_t *data, size_t length);

/* ---- batch -> CommitLog records ----
 *
 * Batch item (RocketMQ MessageDecoder.encodeMessages), big-endian, items
 * back to back; cluster/shm/batch_format.py is the Python twin:
 *   TOTALSIZE 4 | MAGIC 4 (ignored) | BODYCRC 4 (ignored) | FLAG 4 |
 *   BODYLEN 4 | body | PROPERTIESLEN 2 | properties
 * Record layout: cluster/shm/commitlog_format.py.
 */

/* Everything a record takes from the broker rather than from the item. */
struct rb_record_fields {
    int32_t queue_id;
    int64_t queue_offset_first;   /* item i gets queue_offset_first + i */
    int64_t phys_offset_first;    /* item i gets this + bytes written before it */
    int32_t sys_flag;
    int64_t born_timestamp_ms;
    uint8_t born_host[8];         /* IPv4 4 + port 4 */
    int64_t store_timestamp_ms;
    uint8_t store_host[8];
    int32_t record_crc;           /* != 0: the whole-record CRC property ends every record */
};

/* Validate a batch; count its items and the bytes its records will take. A record stores
 * its item's properties without any "__CRC32#" pair and, with record_crc, ends them with
 * the whole-record CRC property (commitlog_format.py's docstring; record_crc.c). */
int rb_measure_batch(const uint8_t *batch, size_t batch_len, int64_t topic_len, int record_crc,
                     int64_t *count_out, int64_t *record_bytes_out);

/* Encode every item of the batch as a record at dst[dst_pos, dst_limit);
 * dst_limit <= dst_len lets the caller keep room for the end-of-file blank.
 * All or nothing: validated and measured before the first byte is written.
 * record_ends receives the dst position after each record (record_ends_max
 * slots, at least the item count). Returns bytes written. */
int64_t rb_encode_batch(uint8_t *dst, size_t dst_len, int64_t dst_pos, int64_t dst_limit,
                        const uint8_t *batch, size_t batch_len,
                        const uint8_t *topic, int64_t topic_len,
                        const struct rb_record_fields *fields,
                        int64_t *record_ends, int64_t record_ends_max, int64_t *count_out);

/* One single send's record at dst[dst_pos, dst_pos + size_reserved), as rb_encode_batch writes
 * an item's (its properties stored the same way), with the send's own flag and reconsume times;
 * the preparedTransactionOffset is 0. born_host and store_host are 8 bytes each. Returns the
 * record's size. Nothing is written on RB_E_ARGUMENT (the record is not size_reserved bytes, or
 * its sysFlag is transaction PREPARED or ROLLBACK: such a record takes no queue offset) or
 * RB_E_BATCH_MALFORMED (a NUL in the properties, a record too large for its fields). */
int64_t rb_encode_record(uint8_t *dst, size_t dst_len, int64_t dst_pos, int64_t size_reserved,
                         const char *body, int64_t body_len, const char *properties, int64_t properties_len,
                         const char *topic, int64_t topic_len, int32_t flag, int32_t reconsume_times,
                         int32_t queue_id, int64_t queue_offset, int64_t phys_offset, int32_t sys_flag,
                         int64_t born_timestamp_ms, const char *born_host, int64_t store_timestamp_ms,
                         const char *store_host, int32_t record_crc);
/* ---- scanning CommitLog records (reput, recovery) ----
 *
 * rb_scan_records fills rows of RB_SCAN_COLUMNS int64 values, one row per
 * record, columns in this order; positions are positions in buf: */
enum rb_scan_column {
    RB_COL_POS = 0,              /* where the record starts */
    RB_COL_TOTAL_SIZE = 1,
    RB_COL_QUEUE_ID = 2,
    RB_COL_QUEUE_OFFSET = 3,
    RB_COL_PHYS_OFFSET = 4,      /* the PHYSICALOFFSET field as stored */
    RB_COL_SYS_FLAG = 5,
    RB_COL_STORE_TIMESTAMP_MS = 6,
    RB_COL_BODY_POS = 7,
    RB_COL_BODY_LEN = 8,
    RB_COL_TOPIC_POS = 9,
    RB_COL_TOPIC_LEN = 10,
    RB_COL_PROPERTIES_POS = 11,
    RB_COL_PROPERTIES_LEN = 12,
    RB_SCAN_COLUMNS = 13
};

/* Why a scan stopped; *next_pos_out is where the next scan starts (the
 * first record not returned). */
enum rb_scan_stop {
    RB_SCAN_END = 0,         /* reached end exactly */
    RB_SCAN_LIMIT = 1,       /* rows_max rows filled */
    RB_SCAN_INCOMPLETE = 2,  /* zeros, or a record that runs past end (not written yet, or torn) */
    RB_SCAN_BLANK = 3,       /* an end-of-file blank at *next_pos_out */
    RB_SCAN_CORRUPT = 4      /* bad magic or sizes; with check_crc a BODYCRC mismatch, or a whole-record
                                CRC property that is garbled or does not match */
};

/* Scan records in buf[start, end) as commitlog_format.decode_at would.
 * Returns an rb_scan_stop (>= 0) or an error. */
int rb_scan_records(const uint8_t *buf, size_t buf_len, int64_t start, int64_t end,
                    int check_crc, int64_t *rows, int64_t rows_max,
                    int64_t *row_count_out, int64_t *next_pos_out);

/* ---- reput dispatch: scanned rows -> ConsumeQueue and IndexFile entries ----
 *
 * The reput worker scans records (rb_scan_records), then in three C calls
 * per batch: extracts what the entries need (rb_dispatch_extract), writes
 * the IndexFile entries (rb_index_put_rows) and the ConsumeQueue entries of
 * each run of rows of one queue (rb_cq_put_rows). Python twins:
 * cluster/shm/reput.py (Dispatcher.dispatch), indexfile.py (put_keys),
 * consumequeue.py (put); the parity tests in tests/unit/test_native_dispatch.py
 * hold them together byte for byte.
 *
 * rb_dispatch_extract fills RB_DISPATCH_COLUMNS int64 values per row: */
enum rb_dispatch_column {
    RB_DCOL_TAG_HASH = 0,   /* Java String.hashCode of the TAGS value, sign-extended; 0 without TAGS */
    RB_DCOL_FLAGS = 1,      /* rb_dispatch_flag bits */
    RB_DCOL_KEY_FIRST = 2,  /* the row's first key hash in key_hashes */
    RB_DCOL_KEY_COUNT = 3,  /* its index keys: topic#UNIQ_KEY, then topic#<each KEYS word> */
    RB_DISPATCH_COLUMNS = 4
};

enum rb_dispatch_flag {
    RB_DISPATCH_PYTHON = 1, /* a topic or property value is not valid UTF-8: Python dispatches the row */
    RB_DISPATCH_CQ = 2,     /* gets a ConsumeQueue entry (sysflag not PREPARED or ROLLBACK) */
    RB_DISPATCH_INDEX = 4   /* gets IndexFile entries (sysflag not ROLLBACK) */
};

/* Offset message ids of consecutive records, comma-joined into out: each id is
   store_host (8 bytes) + phys offset (8), 32 upper-case hex chars. Record 0 is at
   phys_first; record i (i > 0) at phys_first + record_ends[i-1] - pos0. out needs
   33 * count - 1 bytes. Returns the bytes written or a negative error. */
/* A batch body (batch_format items) of count messages that share flag and
   properties: item i is body i (bodies back to back, body_lengths[i] bytes each)
   with properties shared_props + "UNIQ_KEY\x01" + id_prefix + 12 upper-hex digits
   of (counter_first + i) + "\x02". Writes the items to out (out_len bytes) and the
   comma-joined ids to ids_out (ids_len bytes: count * (id_prefix_len + 13) - 1).
   Returns the body bytes written or a negative error. */
int64_t rb_encode_items_shared(const uint8_t *bodies, size_t bodies_len, const int64_t *body_lengths,
                               int64_t count, int32_t flag, const uint8_t *shared_props,
                               size_t shared_len, const uint8_t *id_prefix, size_t id_prefix_len,
                               uint64_t counter_first, uint8_t *out, size_t out_len,
                               uint8_t *ids_out, size_t ids_len);

int64_t rb_offset_msg_ids(const uint8_t *store_host, int64_t phys_first, const int64_t *record_ends,
                          int64_t count, int64_t pos0, uint8_t *out, size_t out_len);

/* For rows[0, row_count) of records in buf: fill info (RB_DISPATCH_COLUMNS a
 * row), key_hashes (IndexFile keyHash = abs(hashCode), abs(-2^31) = 0, of each
 * row's keys, rows after one another), and runs: (first row, row count, last row)
 * triples, in the order of their first rows. A run is the CQ rows (not
 * RB_DISPATCH_PYTHON) of one topic and queue id with consecutive queue offsets,
 * wherever they lie among other queues' rows (a producer round-robins over
 * queues): next_in_run[row] is the run's next row after it, -1 after its last.
 * A Python row ends every run open before it. runs needs room for 3 * row_count,
 * next_in_run for row_count. Stops early (*rows_done_out < row_count) when
 * key_hashes is full. */
int rb_dispatch_extract(const uint8_t *buf, size_t buf_len, const int64_t *rows, int64_t row_count,
                        int64_t *info, uint32_t *key_hashes, int64_t key_hashes_max,
                        int64_t *runs, int64_t *next_in_run, int64_t *run_count_out, int64_t *rows_done_out);

/* Why rb_index_put_rows stopped at *stop_row_out: */
enum rb_index_stop {
    RB_INDEX_DONE = 0,      /* every row up to row_to */
    RB_INDEX_NEW_FILE = 1,  /* the row needs a new IndexFile (this one is full, or buf_len is 0) */
    RB_INDEX_PYTHON = 2     /* an RB_DISPATCH_PYTHON row */
};

/* Write the IndexFile entries of rows[row_from, row_to) into the index file
 * buf (layout: cluster/shm/indexfile_format.py) exactly as IndexService.put_keys
 * does a record at a time: rows at or below *indexed_end_phys (in/out) are
 * skipped, keys beyond entry_count_max - 1 dropped, and per record the
 * entries, then their slots, then the header are written. A record's phys
 * offset is phys_base + its RB_COL_POS. buf_len 0 means no file yet.
 * Returns an rb_index_stop (>= 0) or an error. */
int rb_index_put_rows(uint8_t *buf, size_t buf_len, int64_t slot_count, int64_t entry_count_max,
                      const int64_t *rows, const int64_t *info, int64_t row_count,
                      const uint32_t *key_hashes, int64_t key_hash_count,
                      int64_t row_from, int64_t row_to, int64_t phys_base,
                      int64_t *indexed_end_phys, int64_t *stop_row_out);

/* Write the ConsumeQueue entries of count rows of a run, from row_first along
 * next_in_run, at buf[pos, pos + 20 * count), one after the other: phys offset
 * (phys_base + RB_COL_POS), then the tag hash, and the size last (release
 * store), as ConsumeQueue.put. *next_row_out is the run's row after the last
 * written (-1: none). Returns entries written. */
int64_t rb_cq_put_rows(uint8_t *buf, size_t buf_len, int64_t pos,
                       const int64_t *rows, const int64_t *info, const int64_t *next_in_run, int64_t row_count,
                       int64_t row_first, int64_t count, int64_t phys_base, int64_t *next_row_out);

#endif
