/* A popped record as the gRPC ReceiveMessageResponse{message} the proxy streams (issue 33 item 2):
 * the protobuf bytes proxy/messages.incoming + SerializeToString would give, written in one pass from
 * the record's fields and its raw properties (no properties dict, no protobuf objects: those were ~8 us
 * of the proxy's ~60-100 us a message received + acked). proxy/received_wire.py calls it and falls
 * back to messages.incoming for any record this does not cover; tests/unit/test_received_wire.py pins
 * the bytes against the protobuf library's own serialization.
 *
 * Protobuf's wire format (https://protobuf.dev/programming-guides/encoding/): a field is the varint
 * key number << 3 | wire type, then a varint (wire type 0) or a varint length and that many bytes
 * (wire type 2: strings, bytes, messages). Fields in number order, as the library writes them; a
 * field without presence at its default (0, "") is left out, one with presence (proto3 optional, a
 * message) is written when set, as messages.incoming sets it. Message fields, from apache.rocketmq.v2's
 * definition.proto: Message {topic = 1 (Resource {name = 2}), user_properties = 2 (map entries
 * {key = 1, value = 2}), system_properties = 3, body = 4}; SystemProperties below. */
#include <string.h>

#include "helper.h"

/* LENGTH_ROOM: a nested message's length varint (< 2^35); HOST_TEXT_MAX: "255.255.255.255:4294967295". */
enum { WIRE_VARINT = 0, WIRE_BYTES = 2, LENGTH_ROOM = 5, PAIRS_MAX = 64, DIGITS_MAX = 18, HOST_TEXT_MAX = 27 };

/* SystemProperties' field numbers. */
enum {
    SP_TAG = 1, SP_KEYS = 2, SP_MESSAGE_ID = 3, SP_BODY_DIGEST = 4, SP_BODY_ENCODING = 5, SP_MESSAGE_TYPE = 6,
    SP_BORN_TIMESTAMP = 7, SP_BORN_HOST = 8, SP_STORE_TIMESTAMP = 9, SP_STORE_HOST = 10, SP_RECEIPT_HANDLE = 12,
    SP_QUEUE_ID = 13, SP_QUEUE_OFFSET = 14, SP_DELIVERY_ATTEMPT = 16, SP_MESSAGE_GROUP = 17, SP_TRACE_CONTEXT = 18
};
/* Enum values: DigestType MD5, Encoding IDENTITY, MessageType NORMAL / FIFO / TRANSACTION. */
enum { DIGEST_MD5 = 2, ENCODING_IDENTITY = 1, TYPE_NORMAL = 1, TYPE_FIFO = 2, TYPE_TRANSACTION = 4 };

/* What the record gives the response besides its properties. */
struct record {
    const uint8_t *topic;
    size_t topic_len;
    const uint8_t *body;
    size_t body_len;
    const uint8_t *handle;
    size_t handle_len;
    const uint8_t *born_host, *store_host;   /* 8 bytes each: IPv4, port */
    int64_t store_ms, phys_offset, queue_offset;
    int32_t queue_id, delivery_attempt;
};

struct out {
    uint8_t *at, *end;
    int full;          /* a write did not fit: the caller gets RB_E_DEST_TOO_SMALL */
};

static void put(struct out *o, const void *data, size_t len)
{
    if (o->full || (size_t)(o->end - o->at) < len) {
        o->full = 1;
        return;
    }
    memcpy(o->at, data, len);
    o->at += len;
}

static size_t varint_into(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v & 0x7f) | 0x80;
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void varint(struct out *o, uint64_t v)
{
    uint8_t bytes[10];
    put(o, bytes, varint_into(bytes, v));
}

static void key(struct out *o, unsigned number, unsigned wire) { varint(o, (uint64_t)number << 3 | wire); }

static void bytes_field(struct out *o, unsigned number, const void *data, size_t len)
{
    key(o, number, WIRE_BYTES);
    varint(o, len);
    put(o, data, len);
}

/* A string field without presence: left out when empty. */
static void text_field(struct out *o, unsigned number, const void *data, size_t len)
{
    if (len) bytes_field(o, number, data, len);
}

/* An int32 or int64 field (a negative value is ten bytes, sign-extended, as the library writes it). */
static void int_field(struct out *o, unsigned number, int64_t value)
{
    key(o, number, WIRE_VARINT);
    varint(o, (uint64_t)value);
}

/* A nested message: begin writes its key and leaves room for its length; end writes the length and
 * moves the (small) content back over the room it did not need. */
static uint8_t *begin(struct out *o, unsigned number)
{
    key(o, number, WIRE_BYTES);
    uint8_t *start = o->at;
    if (o->full || o->end - o->at < LENGTH_ROOM) {
        o->full = 1;
        return start;
    }
    o->at += LENGTH_ROOM;
    return start;
}

static void end(struct out *o, uint8_t *start)
{
    if (o->full) return;
    size_t len = (size_t)(o->at - start - LENGTH_ROOM);
    size_t n = varint_into(start, len);
    memmove(start + n, start + LENGTH_ROOM, len);
    o->at = start + n + len;
}

/* A google.protobuf.Timestamp of milliseconds (seconds floored, as messages._set_millis). */
static void timestamp_field(struct out *o, unsigned number, int64_t ms)
{
    int64_t seconds = ms / 1000, rest = ms % 1000;
    if (rest < 0) {
        rest += 1000;
        seconds -= 1;
    }
    uint8_t *start = begin(o, number);
    if (seconds) int_field(o, 1, seconds);
    if (rest) int_field(o, 2, rest * 1000000);
    end(o, start);
}

static const char HEX_UPPER[] = "0123456789ABCDEF";

/* "ip:port" of a record's 8-byte host (IPv4, then the port as a big-endian u32): messages._host. */
static size_t host_text(char *text, const uint8_t *host)
{
    uint32_t port = (uint32_t)host[4] << 24 | (uint32_t)host[5] << 16 | (uint32_t)host[6] << 8 | host[7];
    size_t n = 0;
    uint32_t parts[5] = {host[0], host[1], host[2], host[3], port};
    for (int i = 0; i < 5; i++) {
        char digits[10];
        size_t d = 0;
        uint32_t v = parts[i];
        do {
            digits[d++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (d) text[n++] = digits[--d];
        text[n++] = i < 3 ? '.' : ':';
    }
    return n - 1;   /* the last separator written is not part of it */
}

/* ---- the record's properties: name \x01 value \x02 pairs, classified by the caller's name table */

struct pair {
    const uint8_t *name, *value;
    size_t name_len, value_len;
    int role;
};

/* The role of a name in the table ([u8 role][u8 length][name] back to back), 0 for a user property. */
static int role_of(const uint8_t *table, size_t table_len, const uint8_t *name, size_t len)
{
    for (size_t at = 0; at + 2 <= table_len; at += 2 + table[at + 1]) {
        if (table[at + 1] == len && at + 2 + len <= table_len && memcmp(table + at + 2, name, len) == 0)
            return table[at];
    }
    return 0;
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), what Python's decoder
 * takes as it is: text that is not would read differently through decode_properties' "replace". */
static int utf8_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) { need = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { need = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { need = 3; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (len - i <= need) return 0;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += need + 1;
    }
    return 1;
}

/* The pairs decode_properties would give, in order; -1 for properties whose dict it would not read
 * as they are (a name twice, more than PAIRS_MAX pairs). Empty pairs are skipped as it skips them. */
static int64_t split_pairs(const uint8_t *props, size_t len, const uint8_t *table, size_t table_len,
                           struct pair *pairs)
{
    int64_t count = 0;
    size_t at = 0;
    while (at < len) {
        const uint8_t *stop = memchr(props + at, PROPERTY_SEPARATOR, len - at);
        size_t pair_len = stop ? (size_t)(stop - (props + at)) : len - at;
        if (pair_len) {
            if (count == PAIRS_MAX) return -1;
            struct pair *p = &pairs[count];
            const uint8_t *sep = memchr(props + at, PROPERTY_NAME_VALUE_SEPARATOR, pair_len);
            p->name = props + at;
            p->name_len = sep ? (size_t)(sep - p->name) : pair_len;
            p->value = sep ? sep + 1 : props + at + pair_len;
            p->value_len = sep ? pair_len - p->name_len - 1 : 0;
            for (int64_t k = 0; k < count; k++) {
                if (pairs[k].name_len == p->name_len && memcmp(pairs[k].name, p->name, p->name_len) == 0) return -1;
            }
            p->role = role_of(table, table_len, p->name, p->name_len);
            if (p->role >= RB_GRPC_ROLES) return -1;
            count++;
        }
        at += pair_len + 1;
    }
    return count;
}

/* BORN_TIMESTAMP's value as int() reads it when it is plain decimal; 0 otherwise (left to Python). */
static int plain_integer(const uint8_t *text, size_t len, int64_t *value)
{
    size_t i = 0;
    int negative = len && text[0] == '-';
    i = (size_t)negative;
    if (len == i || len - i > DIGITS_MAX) return 0;
    int64_t v = 0;
    for (; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return 0;
        v = v * 10 + (text[i] - '0');
    }
    *value = negative ? -v : v;
    return 1;
}

/* ---- MD5 (RFC 1321): the body digest the 5.x clients check */

static const uint32_t MD5_K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
static const uint8_t MD5_S[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                  5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                  4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                  6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static void md5_block(uint32_t h[4], const uint8_t *block)
{
    uint32_t m[16], a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)block[4 * i] | (uint32_t)block[4 * i + 1] << 8 | (uint32_t)block[4 * i + 2] << 16 |
               (uint32_t)block[4 * i + 3] << 24;
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) { f = (b & c) | (~b & d); g = i; }
        else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) % 16; }
        else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) % 16; }
        else { f = c ^ (b | ~d); g = (7 * i) % 16; }
        uint32_t t = a + f + MD5_K[i] + m[g];
        a = d;
        d = c;
        c = b;
        b = b + (t << MD5_S[i] | t >> (32 - MD5_S[i]));
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
}

/* The digest of data as 32 upper-case hex digits (hashlib.md5(data).hexdigest().upper()). */
static void md5_hex(const uint8_t *data, size_t len, char *hex)
{
    uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    size_t whole = len & ~(size_t)63;
    for (size_t at = 0; at < whole; at += 64) md5_block(h, data + at);
    uint8_t tail[128] = {0};
    size_t rest = len - whole;
    memcpy(tail, data + whole, rest);
    tail[rest] = 0x80;
    size_t tail_len = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) tail[tail_len - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(h, tail);
    if (tail_len == 128) md5_block(h, tail + 64);
    for (int i = 0; i < 16; i++) {
        uint8_t byte = (uint8_t)(h[i / 4] >> (8 * (i % 4)));
        hex[2 * i] = HEX_UPPER[byte >> 4];
        hex[2 * i + 1] = HEX_UPPER[byte & 15];
    }
}

/* ---- the response */

static void system_properties(struct out *o, const struct record *r, int type, int64_t born_ms,
                              const struct pair *found[])
{
    const struct pair *p;
    if ((p = found[RB_GRPC_TAGS])) bytes_field(o, SP_TAG, p->value, p->value_len);   /* set even empty */
    if ((p = found[RB_GRPC_KEYS]) && p->value_len) {
        /* str.split(" "): every piece, empty ones too, a repeated string each */
        const uint8_t *piece = p->value, *stop = p->value + p->value_len;
        for (;;) {
            const uint8_t *space = memchr(piece, ' ', (size_t)(stop - piece));
            const uint8_t *piece_end = space ? space : stop;
            bytes_field(o, SP_KEYS, piece, (size_t)(piece_end - piece));
            if (!space) break;
            piece = space + 1;
        }
    }
    if ((p = found[RB_GRPC_UNIQ_KEY]) && p->value_len) {
        bytes_field(o, SP_MESSAGE_ID, p->value, p->value_len);
    } else {   /* the offset message id: store host (8 bytes) + physical offset (8, big-endian), in hex */
        char id[32];
        for (int i = 0; i < 16; i++) {
            uint8_t byte = i < 8 ? r->store_host[i] : (uint8_t)((uint64_t)r->phys_offset >> (8 * (15 - i)));
            id[2 * i] = HEX_UPPER[byte >> 4];
            id[2 * i + 1] = HEX_UPPER[byte & 15];
        }
        bytes_field(o, SP_MESSAGE_ID, id, sizeof id);
    }
    char digest[32];
    md5_hex(r->body, r->body_len, digest);
    uint8_t *start = begin(o, SP_BODY_DIGEST);
    int_field(o, 1, DIGEST_MD5);
    bytes_field(o, 2, digest, sizeof digest);
    end(o, start);
    int_field(o, SP_BODY_ENCODING, ENCODING_IDENTITY);
    int_field(o, SP_MESSAGE_TYPE, type);
    timestamp_field(o, SP_BORN_TIMESTAMP, born_ms);
    char host[HOST_TEXT_MAX];
    if ((p = found[RB_GRPC_BORN_HOST]) && p->value_len) text_field(o, SP_BORN_HOST, p->value, p->value_len);
    else text_field(o, SP_BORN_HOST, host, host_text(host, r->born_host));
    timestamp_field(o, SP_STORE_TIMESTAMP, r->store_ms);
    text_field(o, SP_STORE_HOST, host, host_text(host, r->store_host));
    text_field(o, SP_RECEIPT_HANDLE, r->handle, r->handle_len);
    if (r->queue_id) int_field(o, SP_QUEUE_ID, r->queue_id);
    int_field(o, SP_QUEUE_OFFSET, r->queue_offset);              /* optional: written even at 0 */
    int_field(o, SP_DELIVERY_ATTEMPT, r->delivery_attempt);      /* likewise */
    if ((p = found[RB_GRPC_SHARDING_KEY]) && p->value_len) bytes_field(o, SP_MESSAGE_GROUP, p->value, p->value_len);
    if ((p = found[RB_GRPC_TRACE_CONTEXT]) && p->value_len) bytes_field(o, SP_TRACE_CONTEXT, p->value, p->value_len);
}

int64_t rb_grpc_received(uint8_t *out, size_t out_len, const uint8_t *names, size_t names_len,
                         const uint8_t *topic, size_t topic_len, const uint8_t *body, size_t body_len,
                         const uint8_t *properties, size_t properties_len, const uint8_t *handle, size_t handle_len,
                         const uint8_t *born_host, const uint8_t *store_host, int64_t born_ms, int64_t store_ms,
                         int64_t phys_offset, int32_t queue_id, int64_t queue_offset, int32_t delivery_attempt)
{
    const struct record r = {topic, topic_len, body, body_len, handle, handle_len, born_host, store_host,
                             store_ms, phys_offset, queue_offset, queue_id, delivery_attempt};
    struct pair pairs[PAIRS_MAX];
    const struct pair *found[RB_GRPC_ROLES] = {0};
    if (!utf8_valid(properties, properties_len)) return RB_E_GRPC_UNCOVERED;
    int64_t count = split_pairs(properties, properties_len, names, names_len, pairs);
    if (count < 0) return RB_E_GRPC_UNCOVERED;
    for (int64_t i = 0; i < count; i++) {
        if (pairs[i].role == RB_GRPC_UNCOVERED) return RB_E_GRPC_UNCOVERED;
        found[pairs[i].role] = &pairs[i];
    }
    const struct pair *born_text = found[RB_GRPC_BORN_TIMESTAMP];
    if (born_text && !plain_integer(born_text->value, born_text->value_len, &born_ms)) return RB_E_GRPC_UNCOVERED;
    if (phys_offset < 0 && !(found[RB_GRPC_UNIQ_KEY] && found[RB_GRPC_UNIQ_KEY]->value_len))
        return RB_E_GRPC_UNCOVERED;   /* Python's offset_msg_id refuses it */
    /* topic_attributes.message_type_of, less the types left to Python (LITE, DELAY, PRIORITY) */
    const struct pair *tran = found[RB_GRPC_TRANSACTION];
    int type = tran && tran->value_len == 4 && memcmp(tran->value, "true", 4) == 0 ? TYPE_TRANSACTION
               : found[RB_GRPC_SHARDING_KEY] ? TYPE_FIFO : TYPE_NORMAL;

    /* Everything before the body is written at out + 2 * LENGTH_ROOM, then moved behind the two
     * lengths once they are known; the body goes last, in place, never moved. */
    struct out o = {out + 2 * LENGTH_ROOM, out + out_len, out_len < 2 * LENGTH_ROOM};
    if (o.full) return RB_E_DEST_TOO_SMALL;
    uint8_t *head = o.at;
    uint8_t *start = begin(&o, 1);   /* topic: Resource{name = 2}, set even when empty */
    text_field(&o, 2, topic, topic_len);
    end(&o, start);
    for (int64_t i = 0; i < count; i++) {
        if (pairs[i].role) continue;
        start = begin(&o, 2);
        bytes_field(&o, 1, pairs[i].name, pairs[i].name_len);   /* a map entry writes both, even empty */
        bytes_field(&o, 2, pairs[i].value, pairs[i].value_len);
        end(&o, start);
    }
    start = begin(&o, 3);
    system_properties(&o, &r, type, born_ms, found);
    end(&o, start);
    if (o.full) return RB_E_DEST_TOO_SMALL;
    size_t head_len = (size_t)(o.at - head);
    size_t body_field = body_len ? 1 + varint_size(body_len) + body_len : 0;
    uint8_t prefix[16];
    size_t prefix_len = 0;
    prefix[prefix_len++] = 2 << 3 | WIRE_BYTES;   /* ReceiveMessageResponse.message = 2 */
    prefix_len += varint_into(prefix + prefix_len, head_len + body_field);
    memmove(out + prefix_len, head, head_len);
    memcpy(out, prefix, prefix_len);
    o.at = out + prefix_len + head_len;
    if (body_len) bytes_field(&o, 4, body, body_len);
    return o.full ? RB_E_DEST_TOO_SMALL : (int64_t)(o.at - out);
}
