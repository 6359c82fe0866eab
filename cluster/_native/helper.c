/* RocketBox native helper: memory, cursors, the record scan, the reput's dispatch, ids. The
 * contract (return codes, byte orders, the scan row layout) is in helper.h; the Python side is
 * cluster/_native/__init__.py. The record encoder is record_write.c; below both, record_crc.c (the
 * whole-record CRC property) and crc32.c, which call nothing above them. */
#define _GNU_SOURCE
#include "helper.h"
#include "bytes.h"
#include "crc32.h"
#include "ranges.h"
#include "record_crc.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>



static int check_page_bytes(int64_t page_bytes)
{
    if (page_bytes <= 0 || (page_bytes & (page_bytes - 1)) != 0)
        return RB_E_ARGUMENT;
    return RB_OK;
}

static int from_syscall(int rc) { return rc == 0 ? RB_OK : -errno; }

/* ---- memory ---- */

/* msync and madvise insist on a page-aligned address, callers think in byte
 * positions; buffers from mmap start on a page, so aligning down stays in
 * the mapping. */
static void page_span(uint8_t *buf, int64_t start, int64_t end, void **addr, size_t *len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = ((uintptr_t)buf + (uintptr_t)start) & ~(page - 1);
    *addr = (void *)first;
    *len = (uintptr_t)buf + (uintptr_t)end - first;
}

int rb_msync_range(uint8_t *buf, size_t buf_len, int64_t start, int64_t end, int sync)
{
    void *addr;
    size_t len;
    int rc = check_range(buf_len, start, end);
    if (rc != RB_OK || start == end)
        return rc;
    page_span(buf, start, end, &addr, &len);
    return from_syscall(msync(addr, len, sync ? MS_SYNC : MS_ASYNC));
}

enum page_op { PAGE_MLOCK, PAGE_MUNLOCK };

/* The pages covering buf[start, start+length), through one memory syscall. */
static int page_range_call(uint8_t *buf, size_t buf_len, int64_t start, int64_t length, enum page_op op)
{
    void *addr;
    size_t len;
    int rc = check_span(buf_len, start, length);
    if (rc != RB_OK || length == 0)
        return rc;
    page_span(buf, start, start + length, &addr, &len);
    switch (op) {
    case PAGE_MLOCK:
        return from_syscall(mlock(addr, len));
    default:
        return from_syscall(munlock(addr, len));
    }
}

int rb_mlock(uint8_t *buf, size_t buf_len, int64_t start, int64_t length)
{
    return page_range_call(buf, buf_len, start, length, PAGE_MLOCK);
}

int rb_munlock(uint8_t *buf, size_t buf_len, int64_t start, int64_t length)
{
    return page_range_call(buf, buf_len, start, length, PAGE_MUNLOCK);
}

/* Read one byte in each page of [start, start + length): the first page at start
 * itself, the others at their first byte. Reading, never writing: another process
 * may be appending to the same file. volatile, so the compiler keeps reads nobody uses. */
int64_t rb_preheat_read(const uint8_t *buf, size_t buf_len, int64_t start, int64_t length,
                        int64_t page_bytes)
{
    const volatile uint8_t *bytes = buf;
    int64_t pages = 0;
    int rc = check_span(buf_len, start, length);
    if (rc == RB_OK)
        rc = check_page_bytes(page_bytes);
    if (rc != RB_OK)
        return rc;
    for (int64_t page = start - start % page_bytes; page < start + length; page += page_bytes) {
        (void)bytes[page < start ? start : page];
        pages++;
    }
    return pages;
}


/* ---- cursors ---- */

/* Acquire pairs with the writer's release: a reader that sees a cursor also
 * sees every byte the writer stored before publishing it, on every CPU (x86-64
 * orders plain stores already; arm64 needs these barriers). No checks here: the
 * caller (cluster._native.U64Slots) checked alignment and bounds once. */
uint64_t rb_slot_load(const uint64_t *slots, int64_t index)
{
    return __atomic_load_n(slots + index, __ATOMIC_ACQUIRE);
}

void rb_slot_store(uint64_t *slots, int64_t index, uint64_t value)
{
    __atomic_store_n(slots + index, value, __ATOMIC_RELEASE);
}

/* ---- scanning ---- */

enum { SCANNED_RECORD = -1 };

/* Check the record at rec (avail bytes readable) as decode_at does; fill
 * row and return SCANNED_RECORD, or return why the scan stops here. */
static int scan_one(const uint8_t *rec, int64_t avail, int64_t pos, int check_crc, int64_t *row)
{
    if (avail < BLANK_BYTES_MIN)
        return RB_SCAN_INCOMPLETE;
    int64_t total = (int32_t)get_be32(rec + OFF_TOTALSIZE);
    uint32_t magic = get_be32(rec + OFF_MAGIC);
    if (total == 0 && magic == 0)
        return RB_SCAN_INCOMPLETE;
    if (magic == BLANK_MAGIC)
        return total < BLANK_BYTES_MIN ? RB_SCAN_CORRUPT : RB_SCAN_BLANK;
    if (magic != RECORD_MAGIC || total < RECORD_FIXED_BYTES)
        return RB_SCAN_CORRUPT;
    if (avail < total)
        return RB_SCAN_INCOMPLETE;
    int64_t body_len = (int32_t)get_be32(rec + OFF_BODYLEN);
    if (body_len < 0 || RECORD_HEAD_BYTES + body_len + 3 > total)
        return RB_SCAN_CORRUPT;
    int64_t topic_len = rec[RECORD_HEAD_BYTES + body_len];
    int64_t topic_at = RECORD_HEAD_BYTES + body_len + 1;
    if (topic_len > TOPIC_BYTES_MAX || topic_at + topic_len + 2 > total)
        return RB_SCAN_CORRUPT;
    int64_t properties_len = get_be16(rec + topic_at + topic_len);
    int64_t properties_at = topic_at + topic_len + 2;
    if (properties_at + properties_len != total)
        return RB_SCAN_CORRUPT;
    if (check_crc && ((rb_crc32(0, rec + RECORD_HEAD_BYTES, (size_t)body_len) & BODY_CRC_MASK)
                          != get_be32(rec + OFF_BODYCRC) ||
                      check_record_crc(rec, total, properties_len) < 0))
        return RB_SCAN_CORRUPT;
    row[RB_COL_POS] = pos;
    row[RB_COL_TOTAL_SIZE] = total;
    row[RB_COL_QUEUE_ID] = (int32_t)get_be32(rec + OFF_QUEUEID);
    row[RB_COL_QUEUE_OFFSET] = (int64_t)get_be64(rec + OFF_QUEUEOFFSET);
    row[RB_COL_PHYS_OFFSET] = (int64_t)get_be64(rec + OFF_PHYSICALOFFSET);
    row[RB_COL_SYS_FLAG] = (int32_t)get_be32(rec + OFF_SYSFLAG);
    row[RB_COL_STORE_TIMESTAMP_MS] = (int64_t)get_be64(rec + OFF_STORETIMESTAMP);
    row[RB_COL_BODY_POS] = pos + RECORD_HEAD_BYTES;
    row[RB_COL_BODY_LEN] = body_len;
    row[RB_COL_TOPIC_POS] = pos + topic_at;
    row[RB_COL_TOPIC_LEN] = topic_len;
    row[RB_COL_PROPERTIES_POS] = pos + properties_at;
    row[RB_COL_PROPERTIES_LEN] = properties_len;
    return SCANNED_RECORD;
}

int rb_scan_records(const uint8_t *buf, size_t buf_len, int64_t start, int64_t end,
                    int check_crc, int64_t *rows, int64_t rows_max,
                    int64_t *row_count_out, int64_t *next_pos_out)
{
    int64_t pos = start, count = 0;
    int stop;
    int rc = check_range(buf_len, start, end);
    if (rc != RB_OK)
        return rc;
    if (rows_max < 0)
        return RB_E_ARGUMENT;
    for (;;) {
        if (pos == end) {
            stop = RB_SCAN_END;
            break;
        }
        if (count == rows_max) {
            stop = RB_SCAN_LIMIT;
            break;
        }
        int64_t *row = rows + count * RB_SCAN_COLUMNS;
        stop = scan_one(buf + pos, end - pos, pos, check_crc, row);
        if (stop != SCANNED_RECORD)
            break;
        pos += row[RB_COL_TOTAL_SIZE];
        count++;
    }
    *row_count_out = count;
    *next_pos_out = pos;
    return stop;
}

/* ---- reput dispatch ---- */




/* h = 31 * h + unit over the UTF-16 code units of UTF-8 text, as Java's
 * String.hashCode (mod 2^32). Strict UTF-8 as Python's decoder: no overlong
 * forms, no surrogates, nothing above U+10FFFF; -1 when the text breaks a rule. */
static int hash_utf8(uint32_t *hash, const uint8_t *s, int64_t n)
{
    uint32_t h = *hash;
    int64_t i = 0;
    while (i < n) {
        uint32_t c = s[i];
        if (c < 0x80) {
            h = 31 * h + c;
            i++;
            continue;
        }
        int len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return -1;
        }
        if (n - i < len)
            return -1;
        for (int k = 1; k < len; k++) {
            uint32_t b = s[i + k];
            if ((b & 0xC0) != 0x80)
                return -1;
            cp = cp << 6 | (b & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return -1;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
        i += len;
    }
    *hash = h;
    return 0;
}

/* indexfile_format.key_hash: abs(hashCode), with abs(-2^31) counted as 0. */
static uint32_t index_key_hash(uint32_t h)
{
    int32_t v = (int32_t)h;
    if (v == INT32_MIN)
        return 0;
    return (uint32_t)(v < 0 ? -v : v);
}

struct span {
    const uint8_t *at;
    int64_t len;
};

/* The TAGS, UNIQ_KEY and KEYS values of name \1 value \2 pairs, as
 * message/properties.decode_properties reads them: a pair without \1 has an
 * empty value, empty pairs are skipped, a later pair of the same name wins.
 * (\1, \2 and the ASCII names never occur inside a multi-byte UTF-8
 * sequence, valid or not, so matching bytes equals matching decoded text.) */
static void find_properties(const uint8_t *p, int64_t len, struct span *tags, struct span *uniq,
                            struct span *keys)
{
    const uint8_t *end = p + len;
    tags->len = uniq->len = keys->len = 0;
    tags->at = uniq->at = keys->at = p;
    while (p < end) {
        const uint8_t *stop = memchr(p, PROPERTY_SEPARATOR, (size_t)(end - p));
        if (stop == NULL)
            stop = end;
        if (stop > p) {
            const uint8_t *sep = memchr(p, PROPERTY_NAME_VALUE_SEPARATOR, (size_t)(stop - p));
            const uint8_t *name_end = sep ? sep : stop;
            struct span value = {sep ? sep + 1 : stop, sep ? stop - (sep + 1) : 0};
            int64_t name_len = name_end - p;
            if (name_len == 4 && memcmp(p, "TAGS", 4) == 0)
                *tags = value;
            else if (name_len == 8 && memcmp(p, "UNIQ_KEY", 8) == 0)
                *uniq = value;
            else if (name_len == 4 && memcmp(p, "KEYS", 4) == 0)
                *keys = value;
        }
        p = stop + 1;
    }
}

/* One row's info and key hashes; -1 when key_hashes has no room left. */
static int extract_row(const uint8_t *buf, const int64_t *row, int64_t wants, int64_t *info,
                       uint32_t *key_hashes, int64_t key_hashes_max, int64_t *key_n)
{
    int64_t tran = row[RB_COL_SYS_FLAG] & SYSFLAG_TRANSACTION_MASK;
    int64_t flags = 0, tag_hash = 0, first = *key_n, n = first;
    if (tran != SYSFLAG_TRANSACTION_ROLLBACK)
        flags |= RB_DISPATCH_INDEX;
    if (tran != SYSFLAG_TRANSACTION_ROLLBACK && tran != SYSFLAG_TRANSACTION_PREPARED)
        flags |= RB_DISPATCH_CQ;
    flags &= wants;
    struct span tags, uniq, keys;
    find_properties(buf + row[RB_COL_PROPERTIES_POS], row[RB_COL_PROPERTIES_LEN], &tags, &uniq, &keys);
    if ((flags & RB_DISPATCH_CQ) && tags.len > 0) {
        uint32_t h = 0;
        if (hash_utf8(&h, tags.at, tags.len) != 0)
            flags |= RB_DISPATCH_PYTHON;
        tag_hash = (int32_t)h;
    }
    if ((flags & RB_DISPATCH_INDEX) && !(flags & RB_DISPATCH_PYTHON) && (uniq.len > 0 || keys.len > 0)) {
        uint32_t prefix = 0;
        if (hash_utf8(&prefix, buf + row[RB_COL_TOPIC_POS], row[RB_COL_TOPIC_LEN]) != 0) {
            flags |= RB_DISPATCH_PYTHON;
            goto done;
        }
        prefix = 31 * prefix + '#';
        if (uniq.len > 0) {
            uint32_t h = prefix;
            if (hash_utf8(&h, uniq.at, uniq.len) != 0) {
                flags |= RB_DISPATCH_PYTHON;
                goto done;
            }
            if (n == key_hashes_max)
                return -1;
            key_hashes[n++] = index_key_hash(h);
        }
        const uint8_t *p = keys.at, *end = keys.at + keys.len;
        while (p < end) {  /* str.split(" "), empty words dropped */
            const uint8_t *space = memchr(p, ' ', (size_t)(end - p));
            if (space == NULL)
                space = end;
            if (space > p) {
                uint32_t h = prefix;
                if (hash_utf8(&h, p, space - p) != 0) {
                    flags |= RB_DISPATCH_PYTHON;
                    goto done;
                }
                if (n == key_hashes_max)
                    return -1;
                key_hashes[n++] = index_key_hash(h);
            }
            p = space + 1;
        }
    }
done:
    if (flags & RB_DISPATCH_PYTHON)
        n = first;  /* Python redoes the whole row */
    info[RB_DCOL_TAG_HASH] = tag_hash;
    info[RB_DCOL_FLAGS] = flags;
    info[RB_DCOL_KEY_FIRST] = first;
    info[RB_DCOL_KEY_COUNT] = n - first;
    *key_n = n;
    return 0;
}

static int check_row(size_t buf_len, const int64_t *row)
{
    int rc = check_span(buf_len, row[RB_COL_TOPIC_POS], row[RB_COL_TOPIC_LEN]);
    if (rc == RB_OK)
        rc = check_span(buf_len, row[RB_COL_PROPERTIES_POS], row[RB_COL_PROPERTIES_LEN]);
    return rc;
}

/* How far back rb_dispatch_extract looks for the run a row continues: enough for the queues a
 * producer round-robins over; a queue not found there starts a new run (still correct). */
enum { RUN_SEARCH_MAX = 64 };

static int same_queue(const uint8_t *buf, const int64_t *a, const int64_t *b)
{
    return a[RB_COL_QUEUE_ID] == b[RB_COL_QUEUE_ID] && a[RB_COL_TOPIC_LEN] == b[RB_COL_TOPIC_LEN] &&
           memcmp(buf + a[RB_COL_TOPIC_POS], buf + b[RB_COL_TOPIC_POS], (size_t)a[RB_COL_TOPIC_LEN]) == 0;
}

int rb_dispatch_extract(const uint8_t *buf, size_t buf_len, const int64_t *rows, int64_t row_count,
                        int64_t wants, int64_t *info, uint32_t *key_hashes, int64_t key_hashes_max,
                        int64_t *runs, int64_t *next_in_run, int64_t *run_count_out, int64_t *rows_done_out)
{
    int64_t key_n = 0, run_count = 0, open_from = 0, i;
    if (row_count < 0 || key_hashes_max < 0 || (wants & ~(int64_t)(RB_DISPATCH_CQ | RB_DISPATCH_INDEX)) != 0)
        return RB_E_ARGUMENT;
    for (i = 0; i < row_count; i++) {
        const int64_t *row = rows + i * RB_SCAN_COLUMNS;
        int64_t *row_info = info + i * RB_DISPATCH_COLUMNS;
        int rc = check_row(buf_len, row);
        if (rc != RB_OK)
            return rc;
        if (extract_row(buf, row, wants, row_info, key_hashes, key_hashes_max, &key_n) != 0)
            break;
        int64_t flags = row_info[RB_DCOL_FLAGS];
        next_in_run[i] = -1;
        if (flags & RB_DISPATCH_PYTHON) {
            open_from = run_count;   /* Python puts this row's entry: no run may go on across it */
            continue;
        }
        if (!(flags & RB_DISPATCH_CQ))
            continue;
        int64_t joined = -1, stop = run_count - RUN_SEARCH_MAX;
        if (stop < open_from)
            stop = open_from;
        for (int64_t r = run_count - 1; r >= stop; r--) {
            const int64_t *last = rows + runs[3 * r + 2] * RB_SCAN_COLUMNS;
            if (same_queue(buf, row, last)) {
                if (row[RB_COL_QUEUE_OFFSET] == last[RB_COL_QUEUE_OFFSET] + 1)
                    joined = r;   /* else a gap in the queue's offsets: a new run */
                break;
            }
        }
        if (joined >= 0) {
            next_in_run[runs[3 * joined + 2]] = i;
            runs[3 * joined + 1]++;
            runs[3 * joined + 2] = i;
        } else {
            runs[3 * run_count] = i;
            runs[3 * run_count + 1] = 1;
            runs[3 * run_count + 2] = i;
            run_count++;
        }
    }
    *run_count_out = run_count;
    *rows_done_out = i;
    return RB_OK;
}

/* IndexFile.newest_valid: from entry number back through prev links to the
 * first one below `below`; 0 when the chain is damaged. */
static int64_t index_newest_valid(const uint8_t *entries, int64_t entry_count_max, int64_t number,
                                  int64_t below)
{
    int64_t steps = 0;
    while (number >= below && steps < IX_CHAIN_STEPS_MAX) {
        if (number >= entry_count_max)
            return 0;
        int64_t prev = (int32_t)get_be32(entries + number * IX_ENTRY_BYTES + IX_ENTRY_OFF_PREV);
        if (prev >= number)
            return 0;
        number = prev;
        steps++;
    }
    return number > 0 ? number : 0;
}

/* indexfile_format.time_diff_seconds */
static int64_t index_time_diff(int64_t store_ts, int64_t begin_ts)
{
    if (begin_ts <= 0 || store_ts <= begin_ts)
        return 0;
    uint64_t diff = ((uint64_t)store_ts - (uint64_t)begin_ts) / 1000;
    return diff > INT32_MAX ? INT32_MAX : (int64_t)diff;
}

int rb_index_put_rows(uint8_t *buf, size_t buf_len, int64_t slot_count, int64_t entry_count_max,
                      const int64_t *rows, const int64_t *info, int64_t row_count,
                      const uint32_t *key_hashes, int64_t key_hash_count,
                      int64_t row_from, int64_t row_to, int64_t phys_base,
                      int64_t *indexed_end_phys, int64_t *stop_row_out)
{
    if (slot_count <= 0 || entry_count_max < 2 || slot_count > (INT64_MAX / 4) / IX_SLOT_BYTES ||
        entry_count_max > INT32_MAX)
        return RB_E_ARGUMENT;
    if (row_from < 0 || row_to < row_from || row_to > row_count)
        return RB_E_RANGE;
    int64_t entries_at = IX_HEADER_BYTES + slot_count * IX_SLOT_BYTES;
    int have_file = buf_len > 0;
    if (have_file && (uint64_t)(entries_at + entry_count_max * IX_ENTRY_BYTES) > buf_len)
        return RB_E_RANGE;
    uint8_t *slots = have_file ? buf + IX_HEADER_BYTES : NULL;
    uint8_t *entries = have_file ? buf + entries_at : NULL;
    int64_t end_phys = *indexed_end_phys, i;
    int stop = RB_INDEX_DONE;
    for (i = row_from; i < row_to; i++) {
        const int64_t *row = rows + i * RB_SCAN_COLUMNS;
        const int64_t *row_info = info + i * RB_DISPATCH_COLUMNS;
        int64_t flags = row_info[RB_DCOL_FLAGS];
        if (flags & RB_DISPATCH_PYTHON) {
            stop = RB_INDEX_PYTHON;
            break;
        }
        int64_t nkeys = row_info[RB_DCOL_KEY_COUNT], key_first = row_info[RB_DCOL_KEY_FIRST];
        int64_t phys = phys_base + row[RB_COL_POS];
        if (!(flags & RB_DISPATCH_INDEX) || nkeys <= 0 || phys <= end_phys)
            continue;
        if (key_first < 0 || key_first > key_hash_count - nkeys)
            return RB_E_RANGE;
        if (nkeys > entry_count_max - 1)
            nkeys = entry_count_max - 1;
        if (!have_file) {
            stop = RB_INDEX_NEW_FILE;
            break;
        }
        int64_t count = (int32_t)get_be32(buf + IX_OFF_INDEX_COUNT);
        int64_t first = count > 1 ? count : 1;
        if (first + nkeys > entry_count_max) {
            stop = RB_INDEX_NEW_FILE;
            break;
        }
        int64_t store_ts = row[RB_COL_STORE_TIMESTAMP_MS];
        int64_t begin_ts = first > 1 ? (int64_t)get_be64(buf + IX_OFF_BEGIN_TS) : store_ts;
        int64_t begin_phys = first > 1 ? (int64_t)get_be64(buf + IX_OFF_BEGIN_PHYS) : phys;
        int64_t slots_used = (int32_t)get_be32(buf + IX_OFF_SLOTS_USED);
        int64_t time_diff = index_time_diff(store_ts, begin_ts);
        int64_t number = first;
        for (int64_t k = 0; k < nkeys; k++, number++) {
            uint32_t khash = key_hashes[key_first + k];
            uint8_t *slot = slots + (int64_t)(khash % (uint64_t)slot_count) * IX_SLOT_BYTES;
            int64_t prev = (int32_t)get_be32(slot);
            if (prev >= number || prev < 0)  /* left by a writer that died before its header */
                prev = prev > 0 ? index_newest_valid(entries, entry_count_max, prev, number) : 0;
            if (prev == 0)
                slots_used++;
            uint8_t *e = entries + number * IX_ENTRY_BYTES;
            put_be32(e + IX_ENTRY_OFF_HASH, khash);
            put_be64(e + IX_ENTRY_OFF_PHYS, (uint64_t)phys);
            put_be32(e + IX_ENTRY_OFF_TIME_DIFF, (uint32_t)time_diff);
            put_be32(e + IX_ENTRY_OFF_PREV, (uint32_t)prev);
            __atomic_thread_fence(__ATOMIC_RELEASE);
            put_be32(slot, (uint32_t)number);
        }
        __atomic_thread_fence(__ATOMIC_RELEASE);
        put_be64(buf + IX_OFF_BEGIN_TS, (uint64_t)begin_ts);
        put_be64(buf + IX_OFF_END_TS, (uint64_t)store_ts);
        put_be64(buf + IX_OFF_BEGIN_PHYS, (uint64_t)begin_phys);
        put_be64(buf + IX_OFF_END_PHYS, (uint64_t)phys);
        put_be32(buf + IX_OFF_SLOTS_USED, (uint32_t)slots_used);
        put_be32(buf + IX_OFF_INDEX_COUNT, (uint32_t)number);
        end_phys = phys;
    }
    *indexed_end_phys = end_phys;
    *stop_row_out = i;
    return stop;
}

int64_t rb_cq_put_rows(uint8_t *buf, size_t buf_len, int64_t pos,
                       const int64_t *rows, const int64_t *info, const int64_t *next_in_run, int64_t row_count,
                       int64_t row_first, int64_t count, int64_t phys_base, int64_t *next_row_out)
{
    if (row_first < 0 || count < 0 || row_first >= row_count)
        return RB_E_RANGE;
    if (count > INT64_MAX / CQ_ENTRY_BYTES)
        return RB_E_RANGE;
    int rc = check_span(buf_len, pos, count * CQ_ENTRY_BYTES);
    if (rc != RB_OK)
        return rc;
    /* The chain must hold count rows, each after the one before: checked before any write. */
    int64_t row = row_first;
    for (int64_t i = 1; i < count; i++) {
        int64_t next = next_in_run[row];
        if (next <= row || next >= row_count)
            return RB_E_RANGE;
        row = next;
    }
    row = row_first;
    for (int64_t i = 0; i < count; i++) {
        const int64_t *r = rows + row * RB_SCAN_COLUMNS;
        uint8_t *e = buf + pos + i * CQ_ENTRY_BYTES;
        uint8_t size_be[4];
        uint32_t size_word;
        put_be64(e + CQ_OFF_PHYS, (uint64_t)(phys_base + r[RB_COL_POS]));
        put_be64(e + CQ_OFF_TAG, (uint64_t)info[row * RB_DISPATCH_COLUMNS + RB_DCOL_TAG_HASH]);
        put_be32(size_be, (uint32_t)r[RB_COL_TOTAL_SIZE]);
        memcpy(&size_word, size_be, 4);
        if (((uintptr_t)(e + CQ_OFF_SIZE) & 3) == 0) {
            /* a nonzero size marks the entry complete: it goes last */
            __atomic_store_n((uint32_t *)(void *)(e + CQ_OFF_SIZE), size_word, __ATOMIC_RELEASE);
        } else {
            __atomic_thread_fence(__ATOMIC_RELEASE);
            memcpy(e + CQ_OFF_SIZE, size_be, 4);
        }
        row = next_in_run[row];
    }
    *next_row_out = row;
    return count;
}


static void put_hex(uint8_t *out, const uint8_t *bytes, int n)
{
    static const char digits[] = "0123456789ABCDEF";
    for (int i = 0; i < n; i++) {
        out[2 * i] = (uint8_t)digits[bytes[i] >> 4];
        out[2 * i + 1] = (uint8_t)digits[bytes[i] & 15];
    }
}

int64_t rb_offset_msg_ids(const uint8_t *store_host, int64_t phys_first, const int64_t *record_ends,
                          int64_t count, int64_t pos0, uint8_t *out, size_t out_len)
{
    if (count <= 0)
        return 0;
    if (count > INT64_MAX / 33 || (uint64_t)(33 * count - 1) > out_len)
        return RB_E_RANGE;
    uint8_t host_hex[16];
    put_hex(host_hex, store_host, 8);
    uint8_t *p = out;
    for (int64_t i = 0; i < count; i++) {
        int64_t phys = i == 0 ? phys_first : phys_first + record_ends[i - 1] - pos0;
        uint8_t phys_be[8];
        put_be64(phys_be, (uint64_t)phys);
        if (i > 0)
            *p++ = ',';
        memcpy(p, host_hex, 16);
        put_hex(p + 16, phys_be, 8);
        p += 32;
    }
    return (int64_t)(p - out);
}


int64_t rb_encode_items_shared(const uint8_t *bodies, size_t bodies_len, const int64_t *body_lengths,
                               int64_t count, int32_t flag, const uint8_t *shared_props,
                               size_t shared_len, const uint8_t *id_prefix, size_t id_prefix_len,
                               uint64_t counter_first, uint8_t *out, size_t out_len,
                               uint8_t *ids_out, size_t ids_len)
{
    static const char digits[] = "0123456789ABCDEF";
    static const char uniq_name[] = "UNIQ_KEY\x01";
    const size_t uniq_name_len = sizeof(uniq_name) - 1;
    const size_t id_len = id_prefix_len + 12;
    const size_t props_len = shared_len + uniq_name_len + id_len + 1;
    if (count <= 0)
        return 0;
    if (props_len > PROPERTIES_BYTES_MAX || id_prefix_len > 64)
        return RB_E_ARGUMENT;
    if ((uint64_t)count > (uint64_t)INT64_MAX / (id_len + 1) || (size_t)count * (id_len + 1) - 1 > ids_len)
        return RB_E_RANGE;
    size_t body_pos = 0, pos = 0;
    uint8_t *ids = ids_out;
    for (int64_t i = 0; i < count; i++) {
        int64_t body_len = body_lengths[i];
        if (body_len < 0 || (uint64_t)body_len > bodies_len - body_pos)
            return RB_E_RANGE;
        size_t item = ITEM_FIXED_BYTES + (size_t)body_len + props_len;
        if (item > INT32_MAX || item > out_len - pos)
            return RB_E_DEST_TOO_SMALL;
        uint8_t *p = out + pos;
        put_be32(p, (uint32_t)item);
        put_be32(p + 4, 0);
        put_be32(p + 8, 0);
        put_be32(p + 12, (uint32_t)flag);
        put_be32(p + 16, (uint32_t)body_len);
        memcpy(p + 20, bodies + body_pos, (size_t)body_len);
        p += 20 + body_len;
        p[0] = (uint8_t)(props_len >> 8);
        p[1] = (uint8_t)(props_len & 0xFF);
        p += 2;
        memcpy(p, shared_props, shared_len);
        p += shared_len;
        memcpy(p, uniq_name, uniq_name_len);
        p += uniq_name_len;
        uint8_t *id = p;
        memcpy(p, id_prefix, id_prefix_len);
        p += id_prefix_len;
        uint64_t counter = counter_first + (uint64_t)i;
        for (int d = 11; d >= 0; d--) {
            p[d] = (uint8_t)digits[counter & 15];
            counter >>= 4;
        }
        p += 12;
        *p++ = 0x02;
        if (i > 0)
            *ids++ = ',';
        memcpy(ids, id, id_len);
        ids += id_len;
        body_pos += (size_t)body_len;
        pos += item;
    }
    if (body_pos != bodies_len)
        return RB_E_RANGE;
    return (int64_t)pos;
}

uint32_t rb_record_magic(int blank)
{
    return blank ? BLANK_MAGIC : RECORD_MAGIC;
}
