/* The remoting door's send lane (cluster/broker/send_lane.py): the plain sends of one read, read,
 * stored and answered in a few calls instead of ~25 Python steps a send.
 *
 * rb_lane_scan reads a read's frames (remoting_format.py's layout; their headers by lane_header.c)
 * and, for each SEND_MESSAGE_V2 / SEND_MESSAGE that broker/send.py's _parse_plain would take, its
 * fields and the properties as _route stores them (WAIT cut as message/properties.split_property
 * cuts it, CLUSTER appended). It accepts a strict subset of what the Python path accepts, and only
 * where the Python path would store exactly these bytes: every doubt (an escape beyond ASCII, a
 * fraction or -0 where a text belongs, a null, an odd property text, a mark of a half, delayed, timed, priority or
 * FIFO message) declines the read, which the Python path then serves whole. rb_lane_route picks the
 * queues (the broker's round robin) and groups the sends by queue in order of first arrival, as
 * send._by_queue does; rb_lane_place writes a run of groups' records back to back with rb_encode_record
 * (one append for the queues of a read);
 * rb_lane_answers writes every send's answer frame, as remoting_format.encode_frame writes SEND_OK's
 * (JSON, or wire_format's binary layout). tests/unit/test_send_lane.py holds all four to the Python
 * path, byte for byte. */
#define _GNU_SOURCE
#include "helper.h"
#include "bytes.h"
#include "ranges.h"
#include "lane_header.h"

#include <string.h>
#include <strings.h>

#define PAIRS_MAX 64
#define INT_DIGITS_MAX 18
#define REQUEST_SEND_MESSAGE 10
#define REQUEST_SEND_MESSAGE_V2 310
#define FLAG_RESPONSE_OR_ONEWAY 3

/* An integer as Python's int() reads the lane's subset of texts: -?[0-9]{1,18}. */
static int text_int(const uint8_t *at, int64_t len, int64_t *value)
{
    int64_t i = 0, v = 0;
    int negative = 0;
    if (len > 0 && at[0] == '-') {
        negative = 1;
        i = 1;
    }
    if (len - i < 1 || len - i > INT_DIGITS_MAX)
        return LANE_DECLINE;
    for (; i < len; i++) {
        if (at[i] < '0' || at[i] > '9')
            return LANE_DECLINE;
        v = v * 10 + (at[i] - '0');
    }
    *value = negative ? -v : v;
    return 0;
}

static int field_int(const struct span *raw, uint8_t *tmp, int binary, int64_t *value)
{
    if (raw->at == NULL)
        return LANE_DECLINE;
    int64_t n = lane_field_text(raw, tmp, binary);
    return n < 0 ? LANE_DECLINE : text_int(tmp, n, value);
}

/* The properties text at text (n bytes) rewritten in place as a plain send stores it before CLUSTER:
 * split_property's cut of WAIT when "WAIT\x01" occurs (NULL when the text is not plain), else
 * stored_send_properties' (a closing \x02 added). text has room for one byte more. Returns the new
 * length or LANE_DECLINE. */
static int64_t stored_text(uint8_t *text, int64_t n)
{
    static const uint8_t wait_mark[] = {'W', 'A', 'I', 'T', PROPERTY_NAME_VALUE_SEPARATOR};
    if (memmem(text, (size_t)n, wait_mark, sizeof wait_mark) == NULL) {
        if (n > 0 && text[n - 1] != PROPERTY_SEPARATOR)
            text[n++] = PROPERTY_SEPARATOR;
        return n;
    }
    struct span names[PAIRS_MAX];   /* the kept pairs' names, where they stand once moved */
    int pairs = 0, wait_seen = 0;
    int64_t out = 0, pos = 0;
    int64_t end = n > 0 && text[n - 1] == PROPERTY_SEPARATOR ? n - 1 : n;
    if (n == 0)
        return 0;
    /* text.split(\x02) with one trailing empty piece dropped: end marks where the pieces stop. */
    for (;;) {
        const uint8_t *sep = memchr(text + pos, PROPERTY_SEPARATOR, (size_t)(end - pos));
        int64_t pair_end = sep ? sep - text : end;
        int64_t pair_len = pair_end - pos;
        const uint8_t *eq = memchr(text + pos, PROPERTY_NAME_VALUE_SEPARATOR, (size_t)pair_len);
        if (eq == NULL || pairs == PAIRS_MAX - 1)
            return LANE_DECLINE;
        int64_t name_len = eq - (text + pos);
        if (name_len == 4 && memcmp(text + pos, "WAIT", 4) == 0) {
            if (wait_seen)
                return LANE_DECLINE;
            wait_seen = 1;
        } else {
            for (int k = 0; k < pairs; k++)
                if (names[k].len == name_len && memcmp(names[k].at, text + pos, (size_t)name_len) == 0)
                    return LANE_DECLINE;
            /* Kept pairs move left, never over a kept name nor the pairs still to read. */
            memmove(text + out, text + pos, (size_t)pair_len);
            names[pairs].at = text + out;
            names[pairs].len = name_len;
            pairs++;
            out += pair_len;
            text[out++] = PROPERTY_SEPARATOR;
        }
        if (sep == NULL)
            break;
        pos = pair_end + 1;
    }
    return out;
}

static int has_mark(const uint8_t *text, int64_t n, const struct span *marks, int mark_count)
{
    for (int k = 0; k < mark_count; k++)
        if (memmem(text, (size_t)n, marks[k].at, (size_t)marks[k].len) != NULL)
            return 1;
    return 0;
}

/* NUL-terminated names back to back into spans; returns how many, at most max. */
static int names_of(const uint8_t *buf, size_t len, struct span *out, int max)
{
    int count = 0;
    size_t pos = 0;
    while (pos < len && count < max) {
        const uint8_t *nul = memchr(buf + pos, 0, len - pos);
        if (nul == NULL)
            break;
        out[count].at = buf + pos;
        out[count].len = nul - (buf + pos);
        count++;
        pos = (size_t)(nul - buf) + 1;
    }
    return count;
}

#define MARKS_MAX 16

/* One frame's payload (without its length word): 0 and *send filled when the lane takes it. */
static int scan_frame(const uint8_t *payload, int64_t len, const struct span *v2_names,
                      const struct span *v1_names, const struct span *marks, int mark_count,
                      const uint8_t *cluster_mark, int64_t cluster_mark_len, int64_t size_max,
                      int64_t header_max, int64_t sys_flag_allowed, int32_t record_crc, uint8_t *scratch,
                      int64_t *scratch_pos,
                      int64_t scratch_len, struct rb_lane_send *send)
{
    if (len < 4)
        return LANE_DECLINE;
    uint32_t word = get_be32(payload);
    int64_t header_len = word & 0xFFFFFF;
    int binary = (word >> 24) == SERIALIZE_ROCKETMQ;
    if (((word >> 24) != SERIALIZE_JSON && !binary) || header_len > len - 4 || header_len > header_max)
        return LANE_DECLINE;
    struct lane_header h = {0};
    struct span raw_v2[F_COUNT] = {{0}}, raw_v1[F_COUNT] = {{0}};
    int (*read_header)(const uint8_t *, int64_t, const struct span *, const struct span *, struct lane_header *,
                       struct span *, struct span *) = binary ? lane_binary_header : lane_json_header;
    if (read_header(payload + 4, header_len, v2_names, v1_names, &h, raw_v2, raw_v1) != 0)
        return LANE_DECLINE;
    if (h.flag & FLAG_RESPONSE_OR_ONEWAY)
        return LANE_DECLINE;
    const struct span *raw = h.code == REQUEST_SEND_MESSAGE_V2 ? raw_v2 :
                             h.code == REQUEST_SEND_MESSAGE ? raw_v1 : NULL;
    if (raw == NULL)
        return LANE_DECLINE;
    for (int f = 0; f <= F_RECONSUME_TIMES; f++)
        if (raw[f].at == NULL)
            return LANE_DECLINE;
    /* Room for the decoded texts: each no longer than its raw span, plus a \x02 and CLUSTER. */
    int64_t pos = *scratch_pos;
    if (scratch_len - pos < header_len + 1 + cluster_mark_len)
        return RB_E_DEST_TOO_SMALL;
    uint8_t *tmp = scratch + pos;
    if (raw[F_BATCH].at != NULL) {
        int64_t n = lane_field_text(&raw[F_BATCH], tmp, binary);
        if (n < 0 || (n == 1 && tmp[0] == '1') || (n == 4 && strncasecmp((char *)tmp, "true", 4) == 0))
            return LANE_DECLINE;
    }
    int64_t queue_id, sys_flag, born, flag, reconsume, ignored;
    if (field_int(&raw[F_QUEUE_ID], tmp, binary, &queue_id) || field_int(&raw[F_SYS_FLAG], tmp, binary, &sys_flag)
            || field_int(&raw[F_BORN_TIMESTAMP], tmp, binary, &born) || field_int(&raw[F_FLAG], tmp, binary, &flag)
            || field_int(&raw[F_RECONSUME_TIMES], tmp, binary, &reconsume))
        return LANE_DECLINE;
    if (raw[F_MAX_RECONSUME_TIMES].at != NULL) {   /* int() of it unless empty, as _parse_plain reads it */
        int64_t n = lane_field_text(&raw[F_MAX_RECONSUME_TIMES], tmp, binary);
        if (n < 0 || (n > 0 && text_int(tmp, n, &ignored) != 0))
            return LANE_DECLINE;
    }
    if ((sys_flag & ~sys_flag_allowed) || born < 0 || born >= (int64_t)1 << 62
            || flag < INT32_MIN || flag > INT32_MAX || reconsume < 0 || reconsume > INT32_MAX)
        return LANE_DECLINE;
    int64_t topic_len = lane_field_text(&raw[F_TOPIC], tmp, binary);
    if (topic_len <= 0 || topic_len > TOPIC_BYTES_MAX)
        return LANE_DECLINE;
    send->topic_pos = pos;
    pos += topic_len;
    uint8_t *props = scratch + pos;
    int64_t props_len = lane_field_text(&raw[F_PROPERTIES], props, binary);
    if (props_len < 0 || memchr(props, 0, (size_t)props_len) != NULL || has_mark(props, props_len, marks, mark_count))
        return LANE_DECLINE;
    props_len = stored_text(props, props_len);
    if (props_len < 0)
        return LANE_DECLINE;
    memcpy(props + props_len, cluster_mark, (size_t)cluster_mark_len);
    props_len += cluster_mark_len;
    int64_t body_len = len - 4 - header_len;
    int64_t size = rb_record_size(body_len, (const char *)props, props_len, topic_len, record_crc);
    if (size < 0 || body_len > size_max || size > size_max)
        return LANE_DECLINE;
    send->opaque = h.opaque;
    send->serialize_type = binary ? SERIALIZE_ROCKETMQ : SERIALIZE_JSON;
    send->code = h.code;
    send->topic_len = topic_len;
    send->body_pos = 4 + header_len;   /* from the payload's start: the caller adds where it starts */
    send->body_len = body_len;
    send->props_pos = pos;
    send->props_len = props_len;
    send->queue_id = queue_id;
    send->sys_flag = sys_flag;
    send->born_timestamp_ms = born;
    send->flag = flag;
    send->reconsume_times = reconsume;
    send->record_size = size;
    *scratch_pos = pos + props_len;
    return 0;
}

int64_t rb_lane_scan(const char *blob_text, size_t blob_len, const int64_t *ends, int64_t count,
                     const uint8_t *v2_keys, size_t v2_keys_len, const uint8_t *v1_keys, size_t v1_keys_len,
                     const uint8_t *marks, size_t marks_len, const uint8_t *cluster_mark, size_t cluster_mark_len,
                     int64_t size_max, int64_t header_max, int64_t sys_flag_allowed, int32_t record_crc,
                     uint8_t *scratch, size_t scratch_len, struct rb_lane_send *sends,
                     int64_t *topic_firsts, int64_t *counts_out)
{
    const uint8_t *blob = (const uint8_t *)blob_text;
    struct span v2_names[F_COUNT], v1_names[F_COUNT], mark_spans[MARKS_MAX];
    if (names_of(v2_keys, v2_keys_len, v2_names, F_COUNT) != F_COUNT
            || names_of(v1_keys, v1_keys_len, v1_names, F_COUNT) != F_COUNT)
        return RB_E_ARGUMENT;
    int mark_count = names_of(marks, marks_len, mark_spans, MARKS_MAX);
    int64_t start = 0, scratch_pos = 0, topics = 0;
    counts_out[1] = counts_out[2] = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t end = ends[i];
        if (check_range(blob_len, start, end) != RB_OK)
            return RB_E_RANGE;
        struct rb_lane_send *send = &sends[i];
        int rc = scan_frame(blob + start, end - start, v2_names, v1_names, mark_spans, mark_count, cluster_mark,
                            (int64_t)cluster_mark_len, size_max, header_max, sys_flag_allowed, record_crc, scratch,
                            &scratch_pos,
                            (int64_t)scratch_len, send);
        if (rc == RB_E_DEST_TOO_SMALL)
            return rc;
        if (rc != 0)
            return i;
        send->body_pos += start;
        counts_out[send->code == REQUEST_SEND_MESSAGE_V2 ? 1 : 2]++;
        send->topic_slot = -1;
        for (int64_t k = 0; k < topics; k++) {
            const struct rb_lane_send *first = &sends[topic_firsts[k]];
            if (first->topic_len == send->topic_len
                    && memcmp(scratch + first->topic_pos, scratch + send->topic_pos, (size_t)send->topic_len) == 0) {
                send->topic_slot = k;
                break;
            }
        }
        if (send->topic_slot < 0) {
            send->topic_slot = topics;
            topic_firsts[topics++] = i;
        }
        start = end;
    }
    counts_out[0] = topics;
    return count;
}

int64_t rb_lane_route(struct rb_lane_send *sends, int64_t count, const int64_t *queue_counts,
                      int64_t round_robin_next, int64_t *groups, int64_t *group_count_out)
{
    int64_t picked = 0, group_count = 0;
    for (int64_t i = 0; i < count; i++) {
        struct rb_lane_send *send = &sends[i];
        int64_t queues = queue_counts[send->topic_slot];
        if (queues <= 0 || send->queue_id >= queues)
            return RB_E_LANE_DECLINED;
        if (send->queue_id < 0)
            send->queue_id = (round_robin_next + picked++) % queues;
    }
    for (int64_t i = 0; i < count; i++) {
        struct rb_lane_send *send = &sends[i];
        int64_t g = 0;
        while (g < group_count && !(groups[g * 4] == send->topic_slot && groups[g * 4 + 1] == send->queue_id))
            g++;
        if (g == group_count) {
            groups[g * 4] = send->topic_slot;
            groups[g * 4 + 1] = send->queue_id;
            groups[g * 4 + 2] = 0;
            groups[g * 4 + 3] = 0;
            group_count++;
        }
        send->group = g;
        groups[g * 4 + 2]++;
        groups[g * 4 + 3] += send->record_size;
    }
    *group_count_out = group_count;
    return picked;
}

/* One group's records, in arrival order, at dst[dst_pos, ...): rb_encode_record's records, the first at
 * phys_first and queue_offset_first. Returns the bytes written. */
static int64_t encode_group(uint8_t *dst, size_t dst_len, int64_t dst_pos, int64_t phys_first,
                            const uint8_t *blob, size_t blob_len, const uint8_t *scratch, size_t scratch_len,
                            struct rb_lane_send *sends, int64_t count, int64_t group, int64_t queue_offset_first,
                            const char *born_host, const char *store_host, int64_t store_timestamp_ms,
                            int32_t record_crc)
{
    int64_t pos = dst_pos, queue_offset = queue_offset_first;
    for (int64_t i = 0; i < count; i++) {
        struct rb_lane_send *send = &sends[i];
        if (send->group != group)
            continue;
        if (check_span(blob_len, send->body_pos, send->body_len) != RB_OK
                || check_span(scratch_len, send->props_pos, send->props_len) != RB_OK
                || check_span(scratch_len, send->topic_pos, send->topic_len) != RB_OK)
            return RB_E_RANGE;
        int64_t phys = phys_first + (pos - dst_pos);
        int64_t written = rb_encode_record(
            dst, dst_len, pos, send->record_size, (const char *)blob + send->body_pos, send->body_len,
            (const char *)scratch + send->props_pos, send->props_len, (const char *)scratch + send->topic_pos,
            send->topic_len, (int32_t)send->flag, (int32_t)send->reconsume_times, (int32_t)send->queue_id,
            queue_offset, phys, (int32_t)send->sys_flag, send->born_timestamp_ms, born_host,
            store_timestamp_ms, store_host, 0, record_crc);
        if (written < 0)
            return written;
        send->phys_offset = phys;
        send->queue_offset = queue_offset++;
        pos += written;
    }
    return pos - dst_pos;
}

int64_t rb_lane_place(uint8_t *dst, size_t dst_len, int64_t dst_pos, int64_t phys_first,
                      const char *blob, size_t blob_len, const uint8_t *scratch, size_t scratch_len,
                      struct rb_lane_send *sends, int64_t count, int64_t group_first, int64_t group_end,
                      const int64_t *queue_offsets, const char *born_host, const char *store_host,
                      int64_t store_timestamp_ms, int32_t record_crc)
{
    int64_t pos = dst_pos;
    for (int64_t group = group_first; group < group_end; group++) {
        int64_t written = encode_group(dst, dst_len, pos, phys_first + (pos - dst_pos), (const uint8_t *)blob,
                                       blob_len, scratch, scratch_len, sends, count, group,
                                       queue_offsets[group - group_first], born_host, store_host,
                                       store_timestamp_ms, record_crc);
        if (written < 0)
            return written;
        pos += written;
    }
    return pos - dst_pos;
}

static const char HEX_DIGITS[] = "0123456789ABCDEF";

static uint8_t *put_text(uint8_t *p, const char *text)
{
    size_t n = strlen(text);
    memcpy(p, text, n);
    return p + n;
}

static uint8_t *put_decimal(uint8_t *p, int64_t v)
{
    char digits[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *p++ = '-';
    while (n)
        *p++ = (uint8_t)digits[--n];
    return p;
}

/* The offset message id: store host and phys offset, 32 upper-case hex digits (message/ids.py). */
static uint8_t *put_msg_id(uint8_t *p, const char *store_host, int64_t phys_offset)
{
    uint8_t id[16];
    memcpy(id, store_host, 8);
    put_be64(id + 8, (uint64_t)phys_offset);
    for (int k = 0; k < 16; k++) {
        *p++ = (uint8_t)HEX_DIGITS[id[k] >> 4];
        *p++ = (uint8_t)HEX_DIGITS[id[k] & 15];
    }
    return p;
}

/* One extFields entry of a binary header: key length 2, key, value length 4, value. */
static uint8_t *put_binary_field(uint8_t *p, const char *key, const uint8_t *value, int64_t value_len)
{
    size_t key_len = strlen(key);
    put_be16(p, (uint16_t)key_len);
    memcpy(p + 2, key, key_len);
    p += 2 + key_len;
    put_be32(p, (uint32_t)value_len);
    memcpy(p + 4, value, (size_t)value_len);
    return p + 4 + value_len;
}

/* SEND_OK's binary header (wire_format.encode_header with rocketmq_layout): the fixed fields, no
 * remark, then msgId, queueId, queueOffset. */
static uint8_t *binary_answer(uint8_t *p, const struct rb_lane_send *send, const char *store_host,
                              int64_t language_ordinal, int64_t version)
{
    uint8_t text[24];
    put_be16(p, 0);
    p[2] = (uint8_t)language_ordinal;
    put_be16(p + 3, (uint16_t)version);
    put_be32(p + 5, (uint32_t)send->opaque);
    put_be32(p + 9, 1);   /* the response flag */
    put_be32(p + 13, 0);  /* no remark */
    uint8_t *ext_len_at = p + 17, *ext = p + 21;
    uint8_t *q = ext;
    uint8_t id[32];
    put_msg_id(id, store_host, send->phys_offset);
    q = put_binary_field(q, "msgId", id, 32);
    q = put_binary_field(q, "queueId", text, put_decimal(text, send->queue_id) - text);
    q = put_binary_field(q, "queueOffset", text, put_decimal(text, send->queue_offset) - text);
    put_be32(ext_len_at, (uint32_t)(q - ext));
    return q;
}

int64_t rb_lane_answers(uint8_t *out, size_t out_len, const struct rb_lane_send *sends, int64_t count,
                        const char *store_host, const uint8_t *language, size_t language_len,
                        int64_t language_ordinal, int64_t version)
{
    uint8_t *p = out, *end = out + out_len;
    if (language_len > 32)
        return RB_E_ARGUMENT;
    for (int64_t i = 0; i < count; i++) {
        const struct rb_lane_send *send = &sends[i];
        if (end - p < RB_LANE_ANSWER_BYTES_MAX)
            return RB_E_DEST_TOO_SMALL;
        uint8_t *frame = p;
        p += 8;
        if (send->serialize_type == SERIALIZE_ROCKETMQ) {
            p = binary_answer(p, send, store_host, language_ordinal, version);
            int64_t header_len = p - frame - 8;
            put_be32(frame, (uint32_t)(header_len + 4));
            put_be32(frame + 4, (uint32_t)(SERIALIZE_ROCKETMQ << 24 | header_len));
            continue;
        }
        p = put_text(p, "{\"code\":0,\"extFields\":{\"msgId\":\"");
        p = put_msg_id(p, store_host, send->phys_offset);
        p = put_text(p, "\",\"queueId\":\"");
        p = put_decimal(p, send->queue_id);
        p = put_text(p, "\",\"queueOffset\":\"");
        p = put_decimal(p, send->queue_offset);
        p = put_text(p, "\"},\"flag\":1,\"language\":\"");
        memcpy(p, language, language_len);
        p += language_len;
        p = put_text(p, "\",\"opaque\":");
        p = put_decimal(p, send->opaque);
        p = put_text(p, ",\"remark\":null,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
        p = put_decimal(p, version);
        p = put_text(p, "}");
        int64_t header_len = p - frame - 8;
        put_be32(frame, (uint32_t)(header_len + 4));
        put_be32(frame + 4, (uint32_t)header_len);   /* serialize type JSON (0) in the top byte */
    }
    return p - out;
}
