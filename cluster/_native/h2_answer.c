/* The gRPC door's HTTP/2 front end: Python's answers framed (h2_conn.c reads; h2_conn.h the shared
 * state). Response headers and trailers are HPACK-encoded without the dynamic table (static indexes and
 * literals only), so the peer's table size does not matter; DATA goes out as far as the stream's and the
 * connection's windows allow, the rest waits in the stream for WINDOW_UPDATE or SETTINGS; trailers wait
 * behind it. */
#include <stdarg.h>
#include <stdio.h>

#include "bytes.h"
#include "h2_conn.h"

/* :status 200 (static 8), content-type: application/grpc (literal, name static 31, not indexed). */
static const uint8_t RESPONSE_HEADERS[] = {0x88, 0x0f, 0x10, 16, 'a', 'p', 'p', 'l', 'i', 'c', 'a', 't', 'i',
                                           'o', 'n', '/', 'g', 'r', 'p', 'c'};

static void literal(struct h2_buf *b, const char *name, const uint8_t *value, size_t len)
{
    /* a literal without indexing, new name; lengths below 127 fit the 7-bit prefix, longer ones take more bytes */
    size_t name_len = strlen(name);
    uint8_t zero = 0, byte;
    put(b, &zero, 1);
    byte = (uint8_t)name_len;
    put(b, &byte, 1);
    put(b, name, name_len);
    if (len < 127) {
        byte = (uint8_t)len;
        put(b, &byte, 1);
    } else {
        byte = 127;
        put(b, &byte, 1);
        for (size_t rest = len - 127;; rest >>= 7) {
            byte = (uint8_t)(rest & 0x7f) | (rest >= 128 ? 0x80 : 0);
            put(b, &byte, 1);
            if (rest < 128) break;
        }
    }
    put(b, value, len);
}

/* gRPC's trailers: grpc-status, and grpc-message percent-encoded (bytes outside 0x20-0x7e, and '%'), cut
 * to encoded_max bytes. Without response headers sent, a trailers-only response (:status and content-type
 * first). */
static void trailer_block(struct h2_buf *b, int headers_sent, uint32_t status, const uint8_t *message, size_t len,
                          size_t encoded_max)
{
    char digits[12];
    int n = snprintf(digits, sizeof digits, "%u", status);
    if (!headers_sent) put(b, RESPONSE_HEADERS, sizeof RESPONSE_HEADERS);
    literal(b, "grpc-status", (const uint8_t *)digits, (size_t)n);
    if (len) {
        static const char HEX[] = "0123456789ABCDEF";
        struct h2_buf encoded = {0};
        for (size_t i = 0; i < len && i < 4096; i++) {
            uint8_t ch = message[i];
            int escaped = ch < 0x20 || ch > 0x7e || ch == '%';
            if (encoded.len + (escaped ? 3 : 1) > encoded_max) break;   /* cut whole: never half an escape */
            if (escaped) {
                uint8_t e[3] = {'%', (uint8_t)HEX[ch >> 4], (uint8_t)HEX[ch & 15]};
                put(&encoded, e, 3);
            } else {
                put(&encoded, &ch, 1);
            }
        }
        literal(b, "grpc-message", encoded.data, encoded.len);
        release(&encoded);
    }
}

/* How long a grpc-message may be: the trailer list must fit the client's SETTINGS_MAX_HEADER_LIST_SIZE
 * (grpc-java says 8192; over it, it drops the trailers and sees a protocol error, not our status). RFC
 * 9113 6.5.2 counts a field as name + value + 32: MESSAGE_ROOM holds the other fields of a
 * trailers-only response (:status, content-type, grpc-status) and grpc-message's name. */
#define MESSAGE_ROOM 256u
#define MESSAGE_MAX (3u * 4096u)
static size_t message_max(const rb_h2 *c)
{
    if (c->peer_header_list_max <= MESSAGE_ROOM) return 0;
    size_t room = c->peer_header_list_max - MESSAGE_ROOM;
    return room < MESSAGE_MAX ? room : MESSAGE_MAX;
}

/* The block as HEADERS (+ CONTINUATION when longer than a frame), END_STREAM when ending. */
static void header_frames(rb_h2 *c, uint32_t stream, const uint8_t *block, size_t len, int end_stream)
{
    size_t first = len > FRAME_MAX ? FRAME_MAX : len;
    h2_frame(c, HEADERS, (uint8_t)((first == len ? END_HEADERS : 0) | (end_stream ? END_STREAM : 0)), stream, block,
          (uint32_t)first);
    for (size_t at = first; at < len;) {
        size_t chunk = len - at > FRAME_MAX ? FRAME_MAX : len - at;
        h2_frame(c, CONTINUATION, at + chunk == len ? END_HEADERS : 0, stream, block + at, (uint32_t)chunk);
        at += chunk;
    }
}

/* The stream's trailers out and the stream forgotten; a client still sending is told to stop. */
static void finish(rb_h2 *c, struct h2_stream *s)
{
    header_frames(c, s->id, s->trailers.data, s->trailers.len, 1);
    if (!s->remote_closed) {
        uint8_t e[4] = {0};
        h2_frame(c, RST_STREAM, 0, s->id, e, 4);
    }
    h2_forget(c, s);
}

/* DATA frames of s's pending bytes as far as both windows go; 1 when that finished (and forgot) s. */
int h2_drain_stream(rb_h2 *c, struct h2_stream *s)
{
    while (s->pending.len > s->pending_at && s->send_window > 0 && c->send_window > 0) {
        uint64_t chunk = s->pending.len - s->pending_at;
        if (chunk > FRAME_MAX) chunk = FRAME_MAX;
        if ((int64_t)chunk > s->send_window) chunk = (uint64_t)s->send_window;
        if ((int64_t)chunk > c->send_window) chunk = (uint64_t)c->send_window;
        h2_frame(c, DATA, 0, s->id, s->pending.data + s->pending_at, (uint32_t)chunk);
        s->pending_at += chunk;
        s->send_window -= (int64_t)chunk;
        c->send_window -= (int64_t)chunk;
        c->pending_bytes -= chunk;
    }
    if (s->pending.len == s->pending_at) {
        s->pending.len = s->pending_at = 0;
        if (s->trailers_waiting) {
            finish(c, s);
            return 1;
        }
    }
    return 0;
}

void h2_drain_all(rb_h2 *c)
{
    for (uint32_t i = 0; c->pending_bytes && i <= c->mask; i++) {
        struct h2_stream *s = &c->slots[i];
        if (s->id && s->pending.len > s->pending_at && h2_drain_stream(c, s)) i--;   /* a later entry may have moved to i */
        if (c->send_window <= 0) break;
    }
}

/* The stream ended by the front end itself (gRPC status and message), Python told with a reset event. */
void h2_end_with_status(rb_h2 *c, struct h2_stream *s, uint32_t status, const char *fmt, ...)
{
    char message[160];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    uint32_t id = s->id;
    c->pending_bytes -= s->pending.len - s->pending_at;
    s->pending.len = s->pending_at = 0;
    s->trailers.len = 0;
    trailer_block(&s->trailers, s->headers_sent, status, (const uint8_t *)message,
                  n < 0 ? 0 : n >= (int)sizeof message ? sizeof message - 1 : (size_t)n, message_max(c));
    finish(c, s);
    h2_event(c, RB_H2_EVENT_RESET, id, NULL, 0);
}

int64_t rb_h2_headers(rb_h2 *c, uint32_t stream)
{
    struct h2_stream *s = h2_find(c, stream);
    if (!s || s->headers_sent || s->trailers_waiting) return 0;
    h2_frame(c, HEADERS, END_HEADERS, stream, RESPONSE_HEADERS, sizeof RESPONSE_HEADERS);
    s->headers_sent = 1;
    return 1;
}

int64_t rb_h2_message(rb_h2 *c, uint32_t stream, const uint8_t *message, size_t len)
{
    struct h2_stream *s = h2_find(c, stream);
    if (!s || s->trailers_waiting || len > WINDOW_MAX) return 0;
    if (!s->headers_sent) rb_h2_headers(c, stream);
    uint8_t prefix[5] = {0};
    put_be32(prefix + 1, (uint32_t)len);
    if (!put(&s->pending, prefix, 5) || !put(&s->pending, message, len)) return RB_E_ARGUMENT;
    c->pending_bytes += 5 + len;
    h2_drain_stream(c, s);
    return 1;
}

int64_t rb_h2_messages(rb_h2 *c, uint32_t stream, const uint8_t *framed, size_t len)
{
    /* Every 5-byte prefix checked first (flag 0, a length that fits the block): a bad block frames nothing. */
    for (size_t at = 0; at < len;) {
        if (len - at < 5 || framed[at] != 0 || get_be32(framed + at + 1) > len - at - 5) return RB_E_ARGUMENT;
        at += 5 + (size_t)get_be32(framed + at + 1);
    }
    struct h2_stream *s = h2_find(c, stream);
    if (!s || s->trailers_waiting || len > WINDOW_MAX) return 0;
    if (!s->headers_sent) rb_h2_headers(c, stream);
    if (!put(&s->pending, framed, len)) return RB_E_ARGUMENT;
    c->pending_bytes += len;
    h2_drain_stream(c, s);
    return 1;
}

int64_t rb_h2_trailers(rb_h2 *c, uint32_t stream, uint32_t status, const uint8_t *message, size_t len)
{
    struct h2_stream *s = h2_find(c, stream);
    if (!s || s->trailers_waiting) return 0;
    s->trailers.len = 0;
    trailer_block(&s->trailers, s->headers_sent, status, message, len, message_max(c));
    s->trailers_waiting = 1;
    if (s->pending.len == s->pending_at) finish(c, s);
    return 1;
}

int64_t rb_h2_answers(rb_h2 *c, const uint8_t *packed, size_t len)
{
    int64_t answered = 0;
    for (size_t at = 0; len - at >= 8;) {
        uint32_t stream = get_be32(packed + at), message_len = get_be32(packed + at + 4);
        if (message_len > len - at - 8) return RB_E_ARGUMENT;
        if (rb_h2_message(c, stream, packed + at + 8, message_len) == 1) {
            rb_h2_trailers(c, stream, 0, NULL, 0);
            answered++;
        }
        at += 8 + (size_t)message_len;
    }
    return answered;
}
