/* RocketBox native helper. The contract (return codes, byte orders, the scan
 * row layout) is in helper.h; the Python side is cluster/_native/__init__.py. */
#define _GNU_SOURCE
#include "helper.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The CommitLog record, mirrored from cluster/shm/commitlog_format.py (the
 * parity tests in tests/unit/test_native.py hold the two together). */
#define MAGIC_MESSAGE 0xDAA320A7u
#define MAGIC_BLANK 0xCBD43194u
#define BODY_CRC_MASK 0x7FFFFFFFu
enum record_offset {
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
enum item_offset {
    ITEM_OFF_TOTALSIZE = 0, ITEM_OFF_FLAG = 12, ITEM_OFF_BODYLEN = 16, ITEM_OFF_BODY = 20,
    ITEM_FIXED_BYTES = 22     /* five int32 + the int16 properties length */
};

/* ---- small helpers ---- */

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const uint8_t *p)
{
    return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

static uint16_t get_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static void put_be16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = (uint8_t)v; }

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

/* 0 <= start <= end <= buf_len */
static int check_range(size_t buf_len, int64_t start, int64_t end)
{
    if (start < 0 || end < start || (uint64_t)end > buf_len)
        return RB_E_RANGE;
    return RB_OK;
}

static int check_span(size_t buf_len, int64_t start, int64_t length)
{
    if (start < 0 || length < 0 || start > INT64_MAX - length)
        return RB_E_RANGE;
    return check_range(buf_len, start, start + length);
}

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

int rb_mlock(uint8_t *buf, size_t buf_len, int64_t start, int64_t length)
{
    void *addr;
    size_t len;
    int rc = check_span(buf_len, start, length);
    if (rc != RB_OK || length == 0)
        return rc;
    page_span(buf, start, start + length, &addr, &len);
    return from_syscall(mlock(addr, len));
}

int rb_munlock(uint8_t *buf, size_t buf_len, int64_t start, int64_t length)
{
    void *addr;
    size_t len;
    int rc = check_span(buf_len, start, length);
    if (rc != RB_OK || length == 0)
        return rc;
    page_span(buf, start, start + length, &addr, &len);
    return from_syscall(munlock(addr, len));
}

int rb_madvise_willneed(uint8_t *buf, size_t buf_len, int64_t start, int64_t length)
{
    void *addr;
    size_t len;
    int rc = check_span(buf_len, start, length);
    if (rc != RB_OK || length == 0)
        return rc;
    page_span(buf, start, start + length, &addr, &len);
    return from_syscall(madvise(addr, len, MADV_WILLNEED));
}

/* One byte in each page of [start, start + length): the first page from
 * start itself, the others from their first byte. volatile, so the compiler
 * keeps writes of a value that is already there and reads nobody uses. */
int64_t rb_preheat_write(uint8_t *buf, size_t buf_len, int64_t start, int64_t length,
                         int64_t page_bytes)
{
    volatile uint8_t *bytes = buf;
    int64_t pages = 0;
    int rc = check_span(buf_len, start, length);
    if (rc == RB_OK)
        rc = check_page_bytes(page_bytes);
    if (rc != RB_OK)
        return rc;
    for (int64_t page = start - start % page_bytes; page < start + length; page += page_bytes) {
        bytes[page < start ? start : page] = 0;
        pages++;
    }
    return pages;
}

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

/* An 8-byte atomic must be 8-byte aligned in memory, not just in the buffer. */
static int check_u64_slot(const uint8_t *buf, size_t buf_len, int64_t offset)
{
    int rc = check_span(buf_len, offset, 8);
    if (rc != RB_OK)
        return rc;
    if ((uintptr_t)(buf + offset) % 8 != 0)
        return RB_E_ALIGNMENT;
    return RB_OK;
}

/* Acquire pairs with the writer's release: a reader that sees a cursor also
 * sees every byte the writer stored before publishing it. */
int rb_load_u64(const uint8_t *buf, size_t buf_len, int64_t offset, uint64_t *value_out)
{
    int rc = check_u64_slot(buf, buf_len, offset);
    if (rc != RB_OK)
        return rc;
    *value_out = __atomic_load_n((const uint64_t *)(buf + offset), __ATOMIC_ACQUIRE);
    return RB_OK;
}

int rb_store_u64(uint8_t *buf, size_t buf_len, int64_t offset, uint64_t value)
{
    int rc = check_u64_slot(buf, buf_len, offset);
    if (rc != RB_OK)
        return rc;
    __atomic_store_n((uint64_t *)(buf + offset), value, __ATOMIC_RELEASE);
    return RB_OK;
}

/* ---- CRC-32, slice-by-8 ---- */

/* crc_tables[0] is the classic byte-at-a-time table; crc_tables[k][b] is the
 * CRC of byte b followed by k zero bytes, so eight lookups consume 8 bytes. */
static uint32_t crc_tables[8][256];

/* Filled when the shared library is loaded, before any thread can call in. */
__attribute__((constructor)) static void crc_tables_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t crc = b;
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 1) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
        crc_tables[0][b] = crc;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            crc_tables[k][b] = (crc_tables[k - 1][b] >> 8) ^ crc_tables[0][crc_tables[k - 1][b] & 0xFF];
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t rb_crc32(uint32_t value, const uint8_t *data, size_t length)
{
    uint32_t crc = ~value;
    for (; length >= 8; data += 8, length -= 8) {
        uint32_t lo = get_le32(data) ^ crc;
        uint32_t hi = get_le32(data + 4);
        crc = crc_tables[7][lo & 0xFF] ^ crc_tables[6][(lo >> 8) & 0xFF]
            ^ crc_tables[5][(lo >> 16) & 0xFF] ^ crc_tables[4][lo >> 24]
            ^ crc_tables[3][hi & 0xFF] ^ crc_tables[2][(hi >> 8) & 0xFF]
            ^ crc_tables[1][(hi >> 16) & 0xFF] ^ crc_tables[0][hi >> 24];
    }
    for (; length > 0; data++, length--)
        crc = (crc >> 8) ^ crc_tables[0][(crc ^ *data) & 0xFF];
    return ~crc;
}

/* ---- batch -> records ---- */

struct batch_item {
    int32_t flag;
    const uint8_t *body;
    int64_t body_len;
    const uint8_t *properties;
    int64_t properties_len;
    int64_t item_bytes;
};

/* The item at batch[pos], or RB_E_BATCH_MALFORMED if its sizes do not add up. */
static int parse_item(const uint8_t *batch, size_t batch_len, size_t pos, struct batch_item *item)
{
    const uint8_t *at = batch + pos;
    size_t left = batch_len - pos;
    if (left < ITEM_FIXED_BYTES)
        return RB_E_BATCH_MALFORMED;
    int64_t total = (int32_t)get_be32(at + ITEM_OFF_TOTALSIZE);
    int64_t body_len = (int32_t)get_be32(at + ITEM_OFF_BODYLEN);
    if (total < ITEM_FIXED_BYTES || (uint64_t)total > left)
        return RB_E_BATCH_MALFORMED;
    if (body_len < 0 || body_len > total - ITEM_FIXED_BYTES)
        return RB_E_BATCH_MALFORMED;
    int64_t properties_len = (int16_t)get_be16(at + ITEM_OFF_BODY + body_len);
    if (properties_len < 0 || ITEM_FIXED_BYTES + body_len + properties_len != total)
        return RB_E_BATCH_MALFORMED;
    item->flag = (int32_t)get_be32(at + ITEM_OFF_FLAG);
    item->body = at + ITEM_OFF_BODY;
    item->body_len = body_len;
    item->properties = at + ITEM_OFF_BODY + body_len + 2;
    item->properties_len = properties_len;
    item->item_bytes = total;
    return RB_OK;
}

static int64_t record_bytes(const struct batch_item *item, int64_t topic_len)
{
    return RECORD_FIXED_BYTES + item->body_len + topic_len + item->properties_len;
}

int rb_measure_batch(const uint8_t *batch, size_t batch_len, int64_t topic_len,
                     int64_t *count_out, int64_t *record_bytes_out)
{
    int64_t count = 0, total = 0;
    if (topic_len < 0 || topic_len > TOPIC_BYTES_MAX)
        return RB_E_ARGUMENT;
    for (size_t pos = 0; pos < batch_len; count++) {
        struct batch_item item;
        int rc = parse_item(batch, batch_len, pos, &item);
        if (rc != RB_OK)
            return rc;
        if (record_bytes(&item, topic_len) > INT32_MAX)  /* TOTALSIZE is an int32 */
            return RB_E_BATCH_MALFORMED;
        total += record_bytes(&item, topic_len);
        pos += (size_t)item.item_bytes;
    }
    *count_out = count;
    *record_bytes_out = total;
    return RB_OK;
}

/* Write one record at out; the caller made room. Returns its size. */
static int64_t write_record(uint8_t *out, const struct batch_item *item,
                            const uint8_t *topic, int64_t topic_len,
                            const struct rb_record_fields *fields,
                            int64_t index, int64_t bytes_before)
{
    int64_t size = record_bytes(item, topic_len);
    put_be32(out + OFF_TOTALSIZE, (uint32_t)size);
    put_be32(out + OFF_MAGIC, MAGIC_MESSAGE);
    put_be32(out + OFF_BODYCRC, rb_crc32(0, item->body, (size_t)item->body_len) & BODY_CRC_MASK);
    put_be32(out + OFF_QUEUEID, (uint32_t)fields->queue_id);
    put_be32(out + OFF_FLAG, (uint32_t)item->flag);
    put_be64(out + OFF_QUEUEOFFSET, (uint64_t)fields->queue_offset_first + (uint64_t)index);
    put_be64(out + OFF_PHYSICALOFFSET, (uint64_t)fields->phys_offset_first + (uint64_t)bytes_before);
    put_be32(out + OFF_SYSFLAG, (uint32_t)fields->sys_flag);
    put_be64(out + OFF_BORNTIMESTAMP, (uint64_t)fields->born_timestamp_ms);
    memcpy(out + OFF_BORNHOST, fields->born_host, 8);
    put_be64(out + OFF_STORETIMESTAMP, (uint64_t)fields->store_timestamp_ms);
    memcpy(out + OFF_STOREHOST, fields->store_host, 8);
    put_be32(out + OFF_RECONSUMETIMES, 0);
    put_be64(out + OFF_PREPAREDOFFSET, 0);
    put_be32(out + OFF_BODYLEN, (uint32_t)item->body_len);
    uint8_t *p = out + RECORD_HEAD_BYTES;
    memcpy(p, item->body, (size_t)item->body_len);
    p += item->body_len;
    *p++ = (uint8_t)topic_len;
    memcpy(p, topic, (size_t)topic_len);
    p += topic_len;
    put_be16(p, (uint16_t)item->properties_len);
    memcpy(p + 2, item->properties, (size_t)item->properties_len);
    return size;
}

int64_t rb_encode_batch(uint8_t *dst, size_t dst_len, int64_t dst_pos, int64_t dst_limit,
                        const uint8_t *batch, size_t batch_len,
                        const uint8_t *topic, int64_t topic_len,
                        const struct rb_record_fields *fields,
                        int64_t *record_ends, int64_t record_ends_max, int64_t *count_out)
{
    int64_t count, total;
    int rc = check_range(dst_len, dst_pos, dst_limit);
    if (rc == RB_OK)
        rc = rb_measure_batch(batch, batch_len, topic_len, &count, &total);
    if (rc != RB_OK)
        return rc;
    if (count > record_ends_max)
        return RB_E_ARGUMENT;
    if (total > dst_limit - dst_pos)
        return RB_E_DEST_TOO_SMALL;
    /* Measured and validated above: from here on nothing can fail. */
    int64_t pos = dst_pos;
    size_t item_pos = 0;
    for (int64_t i = 0; i < count; i++) {
        struct batch_item item;
        parse_item(batch, batch_len, item_pos, &item);
        pos += write_record(dst + pos, &item, topic, topic_len, fields, i, pos - dst_pos);
        record_ends[i] = pos;
        item_pos += (size_t)item.item_bytes;
    }
    *count_out = count;
    return total;
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
    if (magic == MAGIC_BLANK)
        return total < BLANK_BYTES_MIN ? RB_SCAN_CORRUPT : RB_SCAN_BLANK;
    if (magic != MAGIC_MESSAGE || total < RECORD_FIXED_BYTES)
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
    if (check_crc && (rb_crc32(0, rec + RECORD_HEAD_BYTES, (size_t)body_len) & BODY_CRC_MASK)
                         != get_be32(rec + OFF_BODYCRC))
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
