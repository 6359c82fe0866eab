/* The whole-record CRC property: what record_crc.h declares. It calls crc32.c only; the encoder
 * (record_write.c) and the scan (helper.c) call it. The Python twin is cluster/message/record_format.py. */
#define _GNU_SOURCE
#include "record_crc.h"
#include "bytes.h"
#include "crc32.h"
#include "layouts.h"

#include <string.h>

#define CRC_MASK RECORD_CRC_MASK

static const uint8_t crc_pair_name[] = PROPERTY_CRC32_NAME;   /* MessageConst.PROPERTY_CRC32 */
enum { CRC_PAIR_NAME_BYTES = sizeof(crc_pair_name) - 1, CRC_DIGITS = RECORD_CRC_DIGITS };

/* Is the pair [at, stop) (no \x02 inside) a "__CRC32#" pair: its name, up to the first \x01? */
static int is_crc_pair(const uint8_t *at, const uint8_t *stop)
{
    const uint8_t *sep = memchr(at, PROPERTY_NAME_VALUE_SEPARATOR, (size_t)(stop - at));
    const uint8_t *name_end = sep ? sep : stop;
    return name_end - at == CRC_PAIR_NAME_BYTES && memcmp(at, crc_pair_name, CRC_PAIR_NAME_BYTES) == 0;
}

/* The properties without their "__CRC32#" pairs, as Python's b"\x02".join(pairs kept from
 * split(b"\x02")): written to out when it is not NULL; returns the length. */
static int64_t strip_crc_pairs(uint8_t *out, const uint8_t *props, int64_t len)
{
    const uint8_t *p = props, *end = props + len;
    int64_t n = 0;
    int first = 1;
    for (;;) {
        const uint8_t *stop = memchr(p, PROPERTY_SEPARATOR, (size_t)(end - p));
        if (stop == NULL)
            stop = end;
        if (!is_crc_pair(p, stop)) {
            if (!first) {
                if (out)
                    out[n] = PROPERTY_SEPARATOR;
                n++;
            }
            if (out)
                memcpy(out + n, p, (size_t)(stop - p));
            n += stop - p;
            first = 0;
        }
        if (stop == end)
            return n;
        p = stop + 1;
    }
}

/* memchr of the name's rare last byte first: a search per item on the hot path, where properties
 * almost never hold a '#', and memmem's set-up costs more than the whole scan. */
static int has_crc_pair(const uint8_t *props, int64_t len)
{
    return len >= CRC_PAIR_NAME_BYTES && memchr(props, '#', (size_t)len) != NULL &&
           memmem(props, (size_t)len, crc_pair_name, CRC_PAIR_NAME_BYTES) != NULL;
}

int64_t stored_properties_len(const uint8_t *props, int64_t len, int record_crc)
{
    int64_t n = has_crc_pair(props, len) ? strip_crc_pairs(NULL, props, len) : len;
    if (!record_crc)
        return n;
    /* the kept text ends as props does unless the last pair went: strip again to know */
    int needs_separator;
    if (n == 0)
        needs_separator = 0;
    else if (n == len)
        needs_separator = props[len - 1] != PROPERTY_SEPARATOR;
    else {
        uint8_t last = 0;
        const uint8_t *p = props, *end = props + len;
        for (;;) {   /* the last kept pair's last byte, or the \x02 after it */
            const uint8_t *stop = memchr(p, PROPERTY_SEPARATOR, (size_t)(end - p));
            if (stop == NULL)
                stop = end;
            if (!is_crc_pair(p, stop))
                last = stop > p ? stop[-1] : (p > props ? PROPERTY_SEPARATOR : 0);
            if (stop == end)
                break;
            p = stop + 1;
        }
        needs_separator = last != PROPERTY_SEPARATOR;
    }
    return n + needs_separator + RECORD_CRC_BYTES;
}

void write_stored_properties(uint8_t *out, const uint8_t *props, int64_t len, int record_crc)
{
    int64_t n;
    if (has_crc_pair(props, len))
        n = strip_crc_pairs(out, props, len);
    else {
        memcpy(out, props, (size_t)len);
        n = len;
    }
    if (!record_crc)
        return;
    if (n > 0 && out[n - 1] != PROPERTY_SEPARATOR)
        out[n++] = PROPERTY_SEPARATOR;
    memcpy(out + n, crc_pair_name, CRC_PAIR_NAME_BYTES);
    out[n + CRC_PAIR_NAME_BYTES] = PROPERTY_NAME_VALUE_SEPARATOR;
    memset(out + n + CRC_PAIR_NAME_BYTES + 1, '0', CRC_DIGITS);
    out[n + RECORD_CRC_BYTES - 1] = PROPERTY_SEPARATOR;
}

/* Bodies shorter than this are read again: cheaper than the polynomial products. */
enum { CONCAT_BODY_BYTES_MIN = 256, CONCAT_BODY_BYTES_MAX = 1 << 28 };

static void write_digits(uint8_t *rec, int64_t size, uint32_t crc)
{
    uint8_t *digits = rec + size - 1 - CRC_DIGITS;
    for (int i = 0; i < CRC_DIGITS; i++) {   /* least significant first, as MessageDecoder.createCrc32 */
        digits[i] = (uint8_t)('0' + crc % 10);
        crc /= 10;
    }
}

void seal_record(uint8_t *rec, int64_t size)
{
    write_digits(rec, size, rb_crc32(0, rec, (size_t)(size - RECORD_CRC_BYTES)) & CRC_MASK);
}

void seal_record_after_body(uint8_t *rec, int64_t size, int64_t head_bytes, int64_t body_len, uint32_t body_crc)
{
    if (body_len < CONCAT_BODY_BYTES_MIN || body_len >= CONCAT_BODY_BYTES_MAX) {
        seal_record(rec, size);
        return;
    }
    uint32_t crc = crc32_concat(rb_crc32(0, rec, (size_t)head_bytes), body_crc, (uint64_t)body_len);
    int64_t tail_at = head_bytes + body_len;
    crc = rb_crc32(crc, rec + tail_at, (size_t)(size - RECORD_CRC_BYTES - tail_at));
    write_digits(rec, size, crc & CRC_MASK);
}

int check_record_crc(const uint8_t *rec, int64_t total, int64_t properties_len)
{
    if (properties_len < RECORD_CRC_BYTES)
        return 0;
    const uint8_t *property = rec + total - RECORD_CRC_BYTES;
    if (memcmp(property, crc_pair_name, CRC_PAIR_NAME_BYTES) != 0 ||
        property[CRC_PAIR_NAME_BYTES] != PROPERTY_NAME_VALUE_SEPARATOR)
        return 0;
    if (properties_len > RECORD_CRC_BYTES && property[-1] != PROPERTY_SEPARATOR)
        return 0;   /* "__CRC32#" ends another pair's name: not the CRC property */
    if (property[RECORD_CRC_BYTES - 1] != PROPERTY_SEPARATOR)
        return -1;
    uint64_t stored = 0;
    for (int i = CRC_DIGITS - 1; i >= 0; i--) {
        uint8_t d = property[CRC_PAIR_NAME_BYTES + 1 + i];
        if (d < '0' || d > '9')
            return -1;
        stored = stored * 10 + (uint64_t)(d - '0');
    }
    if (stored > CRC_MASK)
        return -1;
    return (rb_crc32(0, rec, (size_t)(total - RECORD_CRC_BYTES)) & CRC_MASK) == stored ? 1 : -1;
}

/* ---- delivery: records without the property (consumers never see it, as RocketMQ 4's) ---- */

/* Do the last RECORD_CRC_BYTES of props (len bytes) hold the CRC property? */
static int ends_with_crc_property(const uint8_t *props, int64_t len)
{
    if (len < RECORD_CRC_BYTES)
        return 0;
    const uint8_t *pair = props + len - RECORD_CRC_BYTES;
    if ((len > RECORD_CRC_BYTES && pair[-1] != PROPERTY_SEPARATOR) ||
        memcmp(pair, crc_pair_name, CRC_PAIR_NAME_BYTES) != 0 ||
        pair[CRC_PAIR_NAME_BYTES] != PROPERTY_NAME_VALUE_SEPARATOR || pair[RECORD_CRC_BYTES - 1] != PROPERTY_SEPARATOR)
        return 0;
    for (int i = 0; i < CRC_DIGITS; i++)
        if (pair[CRC_PAIR_NAME_BYTES + 1 + i] < '0' || pair[CRC_PAIR_NAME_BYTES + 1 + i] > '9')
            return 0;
    return 1;
}

int64_t rb_delivered_records(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
    int64_t pos = 0, out = 0, len = (int64_t)src_len;
    if (dst_len < src_len)
        return -1;
    while (pos < len) {
        if (len - pos < RECORD_FIXED_BYTES)
            return -1;
        const uint8_t *rec = src + pos;
        int64_t total = (int32_t)get_be32(rec + OFF_TOTALSIZE);
        int64_t body_len = (int32_t)get_be32(rec + OFF_BODYLEN);
        if (total < RECORD_FIXED_BYTES || total > len - pos || body_len < 0 ||
            body_len > total - RECORD_FIXED_BYTES)
            return -1;
        int64_t topic_at = RECORD_HEAD_BYTES + body_len;
        int64_t topic_len = rec[topic_at];
        int64_t props_at = topic_at + 1 + topic_len + 2;
        if (topic_len > TOPIC_BYTES_MAX || props_at > total)
            return -1;
        int64_t props_len = (int64_t)rec[props_at - 2] << 8 | rec[props_at - 1];
        if (props_at + props_len != total)
            return -1;
        if (ends_with_crc_property(rec + props_at, props_len)) {
            int64_t kept = total - RECORD_CRC_BYTES;
            memcpy(dst + out, rec, (size_t)kept);
            put_be32(dst + out + OFF_TOTALSIZE, (uint32_t)kept);
            dst[out + props_at - 2] = (uint8_t)((props_len - RECORD_CRC_BYTES) >> 8);
            dst[out + props_at - 1] = (uint8_t)(props_len - RECORD_CRC_BYTES);
            out += kept;
        } else {
            memcpy(dst + out, rec, (size_t)total);
            out += total;
        }
        pos += total;
    }
    return out;
}
