/* The CommitLog record's one encoder: every record the broker writes (a send's, a batch's items, a
 * retry, a delayed or scheduled copy, a transaction's half, commit and op records, a pop's
 * checkpoint, ack and done records) is written here, by write_record; the store's one put
 * (cluster/shm/record_writer.py) calls rb_record_size and rb_encode_record for messages, and
 * rb_measure_batch and rb_encode_batch for a batch body. The Python oracle the golden tests hold it
 * to, byte for byte, is cluster/message/record_format.py (encode, encode_batch). Calls record_crc.c
 * and crc32.c only. */
#define _GNU_SOURCE
#include "helper.h"
#include "bytes.h"
#include "crc32.h"
#include "layouts.h"
#include "ranges.h"
#include "record_crc.h"

#include <string.h>


struct batch_item {
    int32_t flag;
    const uint8_t *body;
    int64_t body_len;
    const uint8_t *properties;
    int64_t properties_len;
    int64_t item_bytes;
    int32_t reconsume_times;   /* a batch item's is 0; a single record's comes with it */
    int64_t prepared_transaction_offset;   /* likewise */
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
    item->reconsume_times = 0;
    item->prepared_transaction_offset = 0;
    /* NUL never occurs in "name\x01value\x02" pairs; recovery reads a trailing NUL as a torn write. */
    if (properties_len > 0 && memchr(item->properties, 0, (size_t)properties_len) != NULL)
        return RB_E_BATCH_MALFORMED;
    return RB_OK;
}

/* The record's properties: the item's, as record_format.stored_properties makes them. */
static int64_t record_properties_bytes(const struct batch_item *item, int record_crc)
{
    return stored_properties_len(item->properties, item->properties_len, record_crc);
}

static int64_t record_bytes(const struct batch_item *item, int64_t topic_len, int record_crc)
{
    return RECORD_FIXED_BYTES + item->body_len + topic_len + record_properties_bytes(item, record_crc);
}

int rb_measure_batch(const uint8_t *batch, size_t batch_len, int64_t topic_len, int record_crc,
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
        int64_t properties_bytes = record_properties_bytes(&item, record_crc);
        int64_t size = RECORD_FIXED_BYTES + item.body_len + topic_len + properties_bytes;
        if (properties_bytes > PROPERTIES_BYTES_MAX || size > INT32_MAX)  /* int16 length; TOTALSIZE an int32 */
            return RB_E_BATCH_MALFORMED;
        total += size;
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
    int record_crc = fields->record_crc != 0;
    int64_t size = record_bytes(item, topic_len, record_crc);
    put_be32(out + OFF_TOTALSIZE, (uint32_t)size);
    put_be32(out + OFF_MAGIC, RECORD_MAGIC);
    uint32_t body_crc = rb_crc32(0, item->body, (size_t)item->body_len);
    put_be32(out + OFF_BODYCRC, body_crc & BODY_CRC_MASK);
    put_be32(out + OFF_QUEUEID, (uint32_t)fields->queue_id);
    put_be32(out + OFF_FLAG, (uint32_t)item->flag);
    put_be64(out + OFF_QUEUEOFFSET, (uint64_t)fields->queue_offset_first + (uint64_t)index);
    put_be64(out + OFF_PHYSICALOFFSET, (uint64_t)fields->phys_offset_first + (uint64_t)bytes_before);
    put_be32(out + OFF_SYSFLAG, (uint32_t)fields->sys_flag);
    put_be64(out + OFF_BORNTIMESTAMP, (uint64_t)fields->born_timestamp_ms);
    memcpy(out + OFF_BORNHOST, fields->born_host, 8);
    put_be64(out + OFF_STORETIMESTAMP, (uint64_t)fields->store_timestamp_ms);
    memcpy(out + OFF_STOREHOST, fields->store_host, 8);
    put_be32(out + OFF_RECONSUMETIMES, (uint32_t)item->reconsume_times);
    put_be64(out + OFF_PREPAREDOFFSET, (uint64_t)item->prepared_transaction_offset);
    put_be32(out + OFF_BODYLEN, (uint32_t)item->body_len);
    uint8_t *p = out + RECORD_HEAD_BYTES;
    memcpy(p, item->body, (size_t)item->body_len);
    p += item->body_len;
    *p++ = (uint8_t)topic_len;
    memcpy(p, topic, (size_t)topic_len);
    p += topic_len;
    put_be16(p, (uint16_t)(out + size - (p + 2)));
    write_stored_properties(p + 2, item->properties, item->properties_len, record_crc);
    if (record_crc)
        seal_record_after_body(out, size, RECORD_HEAD_BYTES, item->body_len, body_crc);
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
        rc = rb_measure_batch(batch, batch_len, topic_len, fields->record_crc != 0, &count, &total);
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

/* A single record's properties, as record_bytes measures them: RB_E_BATCH_MALFORMED for a NUL
 * (never part of "name\x01value\x02" pairs; recovery reads a trailing NUL as a torn write) or
 * stored properties or a record too large for their length fields. */
static int64_t single_record_bytes(const struct batch_item *item, int64_t topic_len, int record_crc)
{
    if (topic_len < 0 || topic_len > TOPIC_BYTES_MAX || item->body_len < 0 || item->properties_len < 0)
        return RB_E_ARGUMENT;
    if (item->properties_len > 0 && memchr(item->properties, 0, (size_t)item->properties_len) != NULL)
        return RB_E_BATCH_MALFORMED;
    int64_t properties_bytes = record_properties_bytes(item, record_crc);
    int64_t size = RECORD_FIXED_BYTES + item->body_len + topic_len + properties_bytes;
    if (properties_bytes > PROPERTIES_BYTES_MAX || size > INT32_MAX)
        return RB_E_BATCH_MALFORMED;
    return size;
}

int64_t rb_record_size(int64_t body_len, const char *properties, int64_t properties_len, int64_t topic_len,
                       int32_t record_crc)
{
    struct batch_item item = {.body_len = body_len, .properties = (const uint8_t *)properties,
                              .properties_len = properties_len};
    return single_record_bytes(&item, topic_len, record_crc != 0);
}

/* A transaction PREPARED or ROLLBACK record never enters a ConsumeQueue: it stores queue offset 0
 * (RocketMQ's CommitLog.doAppend), as record_format.encode_batch writes it. */
static int takes_no_queue_offset(int32_t sys_flag)
{
    int32_t transaction = sys_flag & SYSFLAG_TRANSACTION_MASK;
    return transaction == SYSFLAG_TRANSACTION_PREPARED || transaction == SYSFLAG_TRANSACTION_ROLLBACK;
}

int64_t rb_encode_record(uint8_t *dst, size_t dst_len, int64_t dst_pos, int64_t size_reserved,
                         const char *body, int64_t body_len, const char *properties, int64_t properties_len,
                         const char *topic, int64_t topic_len, int32_t flag, int32_t reconsume_times,
                         int32_t queue_id, int64_t queue_offset, int64_t phys_offset, int32_t sys_flag,
                         int64_t born_timestamp_ms, const char *born_host, int64_t store_timestamp_ms,
                         const char *store_host, int64_t prepared_transaction_offset, int32_t record_crc)
{
    int rc = check_span(dst_len, dst_pos, size_reserved);
    if (rc != RB_OK)
        return rc;
    struct batch_item item = {
        .flag = flag, .body = (const uint8_t *)body, .body_len = body_len,
        .properties = (const uint8_t *)properties, .properties_len = properties_len, .item_bytes = 0,
        .reconsume_times = reconsume_times, .prepared_transaction_offset = prepared_transaction_offset,
    };
    int64_t size = single_record_bytes(&item, topic_len, record_crc != 0);
    if (size < 0)
        return size;
    if (size != size_reserved)
        return RB_E_ARGUMENT;   /* the caller's reservation is wrong: write nothing */
    struct rb_record_fields fields = {
        .queue_id = queue_id, .queue_offset_first = takes_no_queue_offset(sys_flag) ? 0 : queue_offset,
        .phys_offset_first = phys_offset, .sys_flag = sys_flag, .born_timestamp_ms = born_timestamp_ms,
        .store_timestamp_ms = store_timestamp_ms, .record_crc = record_crc,
    };
    memcpy(fields.born_host, born_host, 8);
    memcpy(fields.store_host, store_host, 8);
    return write_record(dst + dst_pos, &item, (const uint8_t *)topic, topic_len, &fields, 0, 0);
}
