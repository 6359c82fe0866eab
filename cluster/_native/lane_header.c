/* The send lane's header readers: declared in lane_header.h (its contract is there); used by
 * send_lane.c only. JSON as RocketMQ's clients write it, strictly (any doubt declines the frame),
 * and the binary ROCKETMQ layout. */
#define _GNU_SOURCE
#include "lane_header.h"
#include "bytes.h"

#include <string.h>

#define INT_TEXT_DIGITS_MAX 18

struct cursor {
    const uint8_t *p;
    const uint8_t *end;
};

static void skip_ws(struct cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int hex_digit(uint8_t ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* The length of the valid UTF-8 sequence (2-4 bytes) at p, or 0 (overlong, surrogate, past U+10FFFF,
 * cut short): orjson refuses a document with one. */
static int utf8_sequence(const uint8_t *p, const uint8_t *end)
{
    uint8_t b0 = p[0];
    int n;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF)
        n = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        if (b0 == 0xE0)
            lo = 0xA0;
        else if (b0 == 0xED)
            hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        if (b0 == 0xF0)
            lo = 0x90;
        else if (b0 == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (end - p < n || p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* A JSON string at c->p (its opening quote), decoded into out (NULL: only checked); returns its
 * decoded length, or LANE_DECLINE for what the lane does not read (an escape of a character past
 * ASCII, a raw control character, bad UTF-8). Decoded never longer than the raw text. */
static int64_t json_string(struct cursor *c, uint8_t *out)
{
    if (c->p >= c->end || *c->p != '"')
        return LANE_DECLINE;
    const uint8_t *p = c->p + 1, *end = c->end;
    int64_t n = 0;
    while (p < end) {
        uint8_t ch = *p;
        if (ch == '"') {
            c->p = p + 1;
            return n;
        }
        if (ch < 0x20)
            return LANE_DECLINE;
        if (ch == '\\') {
            if (end - p < 2)
                return LANE_DECLINE;
            uint8_t e = p[1], v;
            switch (e) {
            case '"': v = '"'; break;
            case '\\': v = '\\'; break;
            case '/': v = '/'; break;
            case 'b': v = '\b'; break;
            case 'f': v = '\f'; break;
            case 'n': v = '\n'; break;
            case 'r': v = '\r'; break;
            case 't': v = '\t'; break;
            case 'u': {
                if (end - p < 6)
                    return LANE_DECLINE;
                int code = 0;
                for (int i = 2; i < 6; i++) {
                    int d = hex_digit(p[i]);
                    if (d < 0)
                        return LANE_DECLINE;
                    code = code << 4 | d;
                }
                if (code >= 0x80)
                    return LANE_DECLINE;
                v = (uint8_t)code;
                p += 4;
                break;
            }
            default:
                return LANE_DECLINE;
            }
            if (out)
                out[n] = v;
            n++;
            p += 2;
            continue;
        }
        if (ch >= 0x80) {
            int len = utf8_sequence(p, end);
            if (len == 0)
                return LANE_DECLINE;
            if (out)
                memcpy(out + n, p, (size_t)len);
            n += len;
            p += len;
            continue;
        }
        if (out)
            out[n] = ch;
        n++;
        p++;
    }
    return LANE_DECLINE;
}

/* A JSON integer literal (no fraction or exponent) in int32; 0 on success. */
static int json_int32(struct cursor *c, int64_t *value)
{
    const uint8_t *p = c->p, *end = c->end;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    const uint8_t *digits = p;
    int64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9' && p - digits <= 10)
        v = v * 10 + (*p++ - '0');
    if (p == digits || p - digits > 10 || (p - digits > 1 && *digits == '0'))
        return LANE_DECLINE;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
        return LANE_DECLINE;
    v = negative ? -v : v;
    if (v < INT32_MIN || v > INT32_MAX)
        return LANE_DECLINE;
    *value = v;
    c->p = p;
    return 0;
}

static int literal(struct cursor *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return LANE_DECLINE;
    c->p += n;
    return 0;
}

/* A key without escapes: its raw bytes. */
static int key_span(struct cursor *c, struct span *key)
{
    if (c->p >= c->end || *c->p != '"')
        return LANE_DECLINE;
    const uint8_t *start = c->p + 1, *q = start;
    while (q < c->end && *q != '"' && *q != '\\' && *q >= 0x20 && *q < 0x80)
        q++;
    if (q >= c->end || *q != '"')
        return LANE_DECLINE;
    key->at = start;
    key->len = q - start;
    c->p = q + 1;
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':')
        return LANE_DECLINE;
    c->p++;
    skip_ws(c);
    return 0;
}

static int key_is(const struct span *key, const char *name)
{
    size_t n = strlen(name);
    return (size_t)key->len == n && memcmp(key->at, name, n) == 0;
}

/* After a member: ',' (1, another follows) or the closing '}' (0). */
static int next_member(struct cursor *c)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        skip_ws(c);
        return 1;
    }
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    return LANE_DECLINE;
}

/* A JSON integer an extFields value may be instead of a string (the C++ client writes queueId, sysFlag,
 * flag as numbers): remoting_format's reader keeps its str(), which is this text when it is
 * -?(0|[1-9][0-9]{0,17}) and not -0; anything else (a fraction, an exponent, -0) declines. */
static int ext_int_token(struct cursor *c)
{
    const uint8_t *p = c->p, *end = c->end;
    int negative = p < end && *p == '-';
    if (negative)
        p++;
    const uint8_t *digits = p;
    while (p < end && *p >= '0' && *p <= '9' && p - digits <= INT_TEXT_DIGITS_MAX)
        p++;
    int64_t n = p - digits;
    if (n == 0 || n > INT_TEXT_DIGITS_MAX || (n > 1 && *digits == '0') || (negative && n == 1 && *digits == '0'))
        return LANE_DECLINE;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
        return LANE_DECLINE;
    c->p = p;
    return 0;
}

/* An extFields value as remoting_format's reader turns it into text: a string; an integer (its
 * decimal text); true or false ("true", "false"). null (a key the reader drops), a fraction and
 * anything else decline. */
static int ext_value(struct cursor *c)
{
    if (c->p >= c->end)
        return LANE_DECLINE;
    uint8_t ch = *c->p;
    if (ch == '"')
        return json_string(c, NULL) < 0 ? LANE_DECLINE : 0;
    if (ch == '-' || (ch >= '0' && ch <= '9'))
        return ext_int_token(c);
    return literal(c, "true") == 0 || literal(c, "false") == 0 ? 0 : LANE_DECLINE;
}

/* A scalar value of a header key the lane does not read: a string, an integer, true, false or null. */
static int skip_scalar(struct cursor *c)
{
    if (c->p < c->end && (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) {
        int64_t ignored;
        return json_int32(c, &ignored);
    }
    return literal(c, "null") == 0 || ext_value(c) == 0 ? 0 : LANE_DECLINE;
}

/* The send field a key names, by the code's table (9 NUL-terminated names in lane_field order), or -1. */
static int field_of(const struct span *key, const struct span *names)
{
    for (int f = 0; f < F_COUNT; f++)
        if (names[f].len == key->len && memcmp(names[f].at, key->at, (size_t)key->len) == 0)
            return f;
    return -1;
}

/* extFields: every value one ext_value takes; the fields the lane reads left as raw spans (a field
 * twice declines: which one a JSON reader keeps is not the lane's to guess). */
static int ext_fields(struct cursor *c, const struct span *names, struct span *raw)
{
    if (c->p >= c->end || *c->p != '{')
        return LANE_DECLINE;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        struct span key;
        if (key_span(c, &key) != 0)
            return LANE_DECLINE;
        const uint8_t *value_start = c->p;
        if (ext_value(c) != 0)
            return LANE_DECLINE;
        int f = field_of(&key, names);
        if (f >= 0) {
            if (raw[f].at != NULL)   /* a field twice */
                return LANE_DECLINE;
            raw[f].at = value_start;
            raw[f].len = c->p - value_start;
        }
        int more = next_member(c);
        if (more < 0)
            return LANE_DECLINE;
        if (!more)
            return 0;
    }
}

/* The header object; the send fields' raw spans (by the code's table, known only once "code" is
 * read: both tables' spans are kept). */
int lane_json_header(const uint8_t *at, int64_t len, const struct span *v2_names, const struct span *v1_names,
                       struct lane_header *h, struct span *raw_v2, struct span *raw_v1)
{
    struct cursor c = {at, at + len};
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{')
        return LANE_DECLINE;
    c.p++;
    skip_ws(&c);
    if (c.p < c.end && *c.p == '}')
        return LANE_DECLINE;
    for (;;) {
        struct span key;
        if (key_span(&c, &key) != 0)
            return LANE_DECLINE;
        int rc = 0;
        int bit = key_is(&key, "code") ? 1 : key_is(&key, "opaque") ? 2 : key_is(&key, "flag") ? 4 :
                  key_is(&key, "version") ? 8 : key_is(&key, "language") ? 16 : key_is(&key, "extFields") ? 32 :
                  key_is(&key, "remark") ? 64 : 0;
        if (h->seen & bit)   /* a key twice: which one a JSON reader keeps is not the lane's to guess */
            return LANE_DECLINE;
        h->seen |= bit;
        if (bit == 1) {
            rc = json_int32(&c, &h->code);
        } else if (bit == 2) {
            rc = json_int32(&c, &h->opaque);
        } else if (bit == 4) {
            rc = json_int32(&c, &h->flag);
        } else if (bit == 8) {
            rc = json_int32(&c, &h->version);
        } else if (bit == 16) {
            rc = json_string(&c, NULL) < 0 ? LANE_DECLINE : 0;
        } else if (bit == 32) {
            /* Read against both tables: the code may come after it. */
            const uint8_t *start = c.p;
            rc = ext_fields(&c, v2_names, raw_v2);
            if (rc == 0) {
                struct cursor again = {start, c.end};
                rc = ext_fields(&again, v1_names, raw_v1);
            }
        } else if (bit == 64) {   /* null or a string (the C++ client's ""): a request's remark is unread */
            if (literal(&c, "null") != 0)
                rc = json_string(&c, NULL) < 0 ? LANE_DECLINE : 0;
        } else {
            rc = skip_scalar(&c);
        }
        if (rc != 0)
            return LANE_DECLINE;
        int more = next_member(&c);
        if (more < 0)
            return LANE_DECLINE;
        if (!more)
            break;
    }
    skip_ws(&c);
    return c.p == c.end && (h->seen & 63) == 63 ? 0 : LANE_DECLINE;
}

static int valid_utf8(const uint8_t *at, int64_t len)
{
    const uint8_t *p = at, *end = at + len;
    while (p < end) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        int n = utf8_sequence(p, end);
        if (n == 0)
            return 0;
        p += n;
    }
    return 1;
}

#define BINARY_FIXED_BYTES 13   /* code 2, language 1, version 2, opaque 4, flag 4 (wire_format's ROCKETMQ layout) */

/* A binary (ROCKETMQ) header, as wire_format.decode_header(rocketmq_layout=True) reads one: the send
 * fields' raw bytes (every text valid UTF-8, as Python's decode needs it). */
int lane_binary_header(const uint8_t *at, int64_t len, const struct span *v2_names, const struct span *v1_names,
                         struct lane_header *h, struct span *raw_v2, struct span *raw_v1)
{
    if (len < BINARY_FIXED_BYTES + 8)
        return LANE_DECLINE;
    h->code = (int16_t)get_be16(at);
    h->version = (int16_t)get_be16(at + 3);
    h->opaque = (int32_t)get_be32(at + 5);
    h->flag = (int32_t)get_be32(at + 9);
    int64_t p = BINARY_FIXED_BYTES;
    int64_t remark_len = (int32_t)get_be32(at + p);
    p += 4;
    if (remark_len < 0 || p + remark_len + 4 > len || !valid_utf8(at + p, remark_len))
        return LANE_DECLINE;
    p += remark_len;
    int64_t ext_len = (int32_t)get_be32(at + p);
    p += 4;
    if (ext_len < 0 || p + ext_len != len)
        return LANE_DECLINE;
    while (p < len) {
        if (p + 2 > len)
            return LANE_DECLINE;
        struct span key = {at + p + 2, get_be16(at + p)};
        p += 2 + key.len;
        if (p + 4 > len || !valid_utf8(key.at, key.len))
            return LANE_DECLINE;
        int64_t value_len = (int32_t)get_be32(at + p);
        p += 4;
        if (value_len < 0 || p + value_len > len || !valid_utf8(at + p, value_len))
            return LANE_DECLINE;
        int f2 = field_of(&key, v2_names), f1 = field_of(&key, v1_names);
        if ((f2 >= 0 && raw_v2[f2].at != NULL) || (f1 >= 0 && raw_v1[f1].at != NULL))
            return LANE_DECLINE;   /* a field twice */
        if (f2 >= 0)
            raw_v2[f2] = (struct span){at + p, value_len};
        if (f1 >= 0)
            raw_v1[f1] = (struct span){at + p, value_len};
        p += value_len;
    }
    return 0;
}

/* A field's text decoded into tmp (at most raw length bytes): its length or LANE_DECLINE. */
int64_t lane_field_text(const struct span *raw, uint8_t *tmp, int binary)
{
    if (binary) {   /* checked as UTF-8 already */
        memcpy(tmp, raw->at, (size_t)raw->len);
        return raw->len;
    }
    if (raw->len > 0 && raw->at[0] != '"') {   /* an integer, true or false: its text as the reader's str() */
        memcpy(tmp, raw->at, (size_t)raw->len);
        return raw->len;
    }
    struct cursor c = {raw->at, raw->at + raw->len};
    return json_string(&c, tmp);
}

