/* The gRPC door's HTTP/2 front end (h2c, RFC 9113; gRPC's framing of messages): one connection's
 * state machine. No I/O: the door (cluster/proxy/native_door.py) feeds the bytes it read and sends
 * what rb_h2_output holds; in between, events (a stream opened with its headers, a whole gRPC
 * message, the client's half-close, a reset) go to Python in one buffer a read, and Python's answers
 * come back as calls that frame them. Flow control both ways (per stream and per connection), PING,
 * SETTINGS, GOAWAY, RST_STREAM; HPACK decoding in h2_hpack.c; the answers framed in h2_answer.c; frames
 * and events written and the stream table in h2_streams.c; the connection's state in h2_conn.h.
 * Bounds, before anything is authenticated: streams open at once (MAX_CONCURRENT_STREAMS; more are
 * refused, too many refusals end the connection), a header block's bytes, a message's size (a
 * larger one is answered RESOURCE_EXHAUSTED), the unfinished messages' bytes of a connection. */
#include <stdarg.h>
#include <stdio.h>

#include "bytes.h"
#include "h2_conn.h"

static void window_update(rb_h2 *c, uint32_t stream, uint32_t increment)
{
    uint8_t w[4];
    put_be32(w, increment);
    h2_frame(c, WINDOW_UPDATE, 0, stream, w, 4);
}

/* A GOAWAY, unless the final one went already (closing 2: nothing more is sent). */
static void goaway(rb_h2 *c, uint32_t last_stream, uint32_t error)
{
    if (c->closing == 2) return;
    uint8_t g[8];
    put_be32(g, last_stream);
    put_be32(g + 4, error);
    h2_frame(c, GOAWAY, 0, 0, g, 8);
}

static int fail(rb_h2 *c, uint32_t error, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, args);
    va_end(args);
    goaway(c, c->last_stream, error);   /* also after the client's own GOAWAY: it is told why we close */
    c->closing = 2;
    return RB_E_H2_CLOSE;
}

/* ------------------------------------------------------------------ reading */

static int on_field(void *arg, const uint8_t *name, uint32_t name_len, const uint8_t *value, uint32_t value_len)
{
    rb_h2 *c = arg;
    if (c->fields.len + 2 + name_len + value_len > RB_H2_HEADER_LIST_MAX) {
        c->fields_refused = "header list larger than 65536 bytes";
        c->fields_refused_status = GRPC_RESOURCE_EXHAUSTED;
        return 0;   /* decoding goes on: the table must stay in step with the peer's */
    }
    if (memchr(name, 0, name_len) || memchr(value, 0, value_len)) {
        c->fields_refused = "a header field holds a NUL byte";   /* RFC 9113 8.2.1: malformed */
        c->fields_refused_status = GRPC_INTERNAL;
        return 0;
    }
    uint8_t nul = 0;
    put(&c->fields, name, name_len);
    put(&c->fields, &nul, 1);
    put(&c->fields, value, value_len);
    put(&c->fields, &nul, 1);
    return 0;
}

static int end_of_block(rb_h2 *c)
{
    uint32_t id = c->block_stream;
    c->fields.len = 0;
    c->fields_refused = NULL;
    if (hpack_decode_block(&c->table, c->block.data, c->block.data + c->block.len, on_field, c) != 0)
        return fail(c, COMPRESSION_ERROR, "a header block HPACK cannot decode (stream %u)", id);
    c->block.len = 0;
    struct h2_stream *s = h2_find(c, id);
    if (s) {                                   /* the request's trailers: they must end it */
        if (!c->block_end_stream || s->remote_closed)
            return fail(c, PROTOCOL_ERROR, "HEADERS on open stream %u without END_STREAM", id);
        s->remote_closed = 1;
        h2_event(c, RB_H2_EVENT_END, id, NULL, 0);
        return 0;
    }
    if (!(id & 1) || id <= c->last_stream)
        return fail(c, PROTOCOL_ERROR, "HEADERS opening stream %u after %u", id, c->last_stream);
    c->last_stream = id;
    if (c->closing || c->open >= c->max_streams) {
        uint8_t e[4];
        put_be32(e, REFUSED_STREAM);
        h2_frame(c, RST_STREAM, 0, id, e, 4);
        if (++c->refused > RB_H2_REFUSED_MAX)
            return fail(c, ENHANCE_YOUR_CALM, "%u streams refused over the limit of %u open", c->refused,
                        c->max_streams);
        return 0;
    }
    s = h2_insert(c, id);
    if (!s) return fail(c, ENHANCE_YOUR_CALM, "out of memory for stream %u", id);
    if (c->fields_refused) {
        h2_end_with_status(c, s, c->fields_refused_status, "%s", c->fields_refused);
        return 0;
    }
    h2_event(c, RB_H2_EVENT_HEADERS, id, c->fields.data, (uint32_t)c->fields.len);
    if (c->block_end_stream) {
        s->remote_closed = 1;
        h2_event(c, RB_H2_EVENT_END, id, NULL, 0);
    }
    return 0;
}

/* The complete gRPC messages at the head of s's body out as events; 1 when s was ended. */
static int messages(rb_h2 *c, struct h2_stream *s)
{
    size_t at = 0;
    while (s->body.len - at >= 5) {
        const uint8_t *m = s->body.data + at;
        uint32_t len = get_be32(m + 1);
        if (len > c->max_message) {
            h2_end_with_status(c, s, GRPC_RESOURCE_EXHAUSTED, "grpc: received message larger than max (%u vs. %u)",
                            len, c->max_message);
            return 1;
        }
        if (m[0] != 0) {
            h2_end_with_status(c, s, GRPC_UNIMPLEMENTED, "compressed messages are not supported");
            return 1;
        }
        if (s->body.len - at - 5 < len) break;
        h2_event(c, RB_H2_EVENT_MESSAGE, s->id, m + 5, len);
        at += 5 + (size_t)len;
    }
    if (at) {
        memmove(s->body.data, s->body.data + at, s->body.len - at);
        s->body.len -= at;
        c->buffered -= at;
    }
    return 0;
}

static int on_data(rb_h2 *c, uint32_t id, uint8_t flags, const uint8_t *p, const uint8_t *end, uint32_t frame_len)
{
    c->recv_unacked += frame_len;
    if (c->recv_unacked >= RB_H2_CONN_WINDOW / 2) {
        window_update(c, 0, (uint32_t)c->recv_unacked);
        c->recv_unacked = 0;
    }
    if (!id) return fail(c, PROTOCOL_ERROR, "DATA on stream 0");
    struct h2_stream *s = h2_find(c, id);
    if (!s || s->remote_closed) return 0;   /* a stream already ended or refused: dropped */
    size_t n = (size_t)(end - p);
    if (c->buffered + n > c->max_buffered) {
        h2_end_with_status(c, s, GRPC_RESOURCE_EXHAUSTED, "the connection holds more than %llu bytes of unfinished "
                        "messages", (unsigned long long)c->max_buffered);
        return 0;
    }
    put(&s->body, p, n);
    c->buffered += n;
    if (messages(c, s)) return 0;
    if (flags & END_STREAM) {
        s->remote_closed = 1;
        h2_event(c, RB_H2_EVENT_END, id, NULL, 0);
        return 0;
    }
    s->recv_unacked += frame_len;
    if (s->recv_unacked >= RB_H2_STREAM_WINDOW / 2) {
        window_update(c, id, s->recv_unacked);
        s->recv_unacked = 0;
    }
    return 0;
}

static int on_settings(rb_h2 *c, uint32_t id, uint8_t flags, const uint8_t *p, uint32_t len)
{
    if (id) return fail(c, PROTOCOL_ERROR, "SETTINGS on stream %u", id);
    if (flags & ACK) return len ? fail(c, FRAME_SIZE_ERROR, "SETTINGS ACK with a payload") : 0;
    if (len % 6) return fail(c, FRAME_SIZE_ERROR, "SETTINGS of %u bytes", len);
    for (uint32_t at = 0; at < len; at += 6) {
        uint16_t key = get_be16(p + at);
        uint32_t value = get_be32(p + at + 2);
        if (key == 4) {                        /* INITIAL_WINDOW_SIZE: every open stream's window moves by the change */
            if (value > WINDOW_MAX) return fail(c, FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE %u", value);
            int64_t delta = (int64_t)value - c->peer_initial_window;
            c->peer_initial_window = value;
            for (uint32_t i = 0; i <= c->mask; i++)
                if (c->slots[i].id) c->slots[i].send_window += delta;
        } else if (key == 5 && (value < 16384 || value > 16777215)) {
            return fail(c, PROTOCOL_ERROR, "MAX_FRAME_SIZE %u", value);
        } else if (key == 6) {
            c->peer_header_list_max = value;
        } else if (key == 2 && value > 1) {
            return fail(c, PROTOCOL_ERROR, "ENABLE_PUSH %u", value);
        }
    }
    h2_frame(c, SETTINGS, ACK, 0, NULL, 0);
    h2_drain_all(c);
    return 0;
}

static int on_frame(rb_h2 *c, const uint8_t *f, uint32_t len)
{
    uint8_t type = f[3], flags = f[4];
    uint32_t id = get_be32(f + 5) & WINDOW_MAX;
    const uint8_t *p = f + 9, *end = p + len;
    if (c->in_block && type != CONTINUATION)
        return fail(c, PROTOCOL_ERROR, "frame type %u inside a header block", type);
    if ((type == DATA || type == HEADERS) && (flags & PADDED)) {
        if (len < 1 || p[0] >= len) return fail(c, PROTOCOL_ERROR, "padding longer than the frame");
        end -= p[0];
        p++;
    }
    switch (type) {
    case DATA:
        return on_data(c, id, flags, p, end, len);
    case HEADERS:
        if (flags & PRIORITY_FLAG) p += 5;
        if (p > end || !id) return fail(c, PROTOCOL_ERROR, "a malformed HEADERS frame");
        c->block_stream = id;
        c->block_end_stream = flags & END_STREAM;
        c->block.len = 0;
        c->in_block = 1;
        /* the block's first fragment */
        __attribute__((fallthrough));
    case CONTINUATION:
        if (type == CONTINUATION && (!c->in_block || id != c->block_stream))
            return fail(c, PROTOCOL_ERROR, "CONTINUATION without a header block");
        if (c->block.len + (size_t)(end - p) > RB_H2_HEADER_BLOCK_MAX)
            return fail(c, ENHANCE_YOUR_CALM, "a header block over %u bytes", RB_H2_HEADER_BLOCK_MAX);
        put(&c->block, p, (size_t)(end - p));
        if (!(flags & END_HEADERS)) return 0;
        c->in_block = 0;
        return end_of_block(c);
    case SETTINGS:
        return on_settings(c, id, flags, p, len);
    case PING:
        if (len != 8) return fail(c, FRAME_SIZE_ERROR, "PING of %u bytes", len);
        if (!(flags & ACK)) h2_frame(c, PING, ACK, 0, p, 8);
        return 0;
    case WINDOW_UPDATE: {
        if (len != 4) return fail(c, FRAME_SIZE_ERROR, "WINDOW_UPDATE of %u bytes", len);
        uint32_t increment = get_be32(p) & WINDOW_MAX;
        if (!id) {
            if (!increment || c->send_window + increment > WINDOW_MAX)
                return fail(c, FLOW_CONTROL_ERROR, "connection WINDOW_UPDATE of %u", increment);
            c->send_window += increment;
            h2_drain_all(c);
            return 0;
        }
        struct h2_stream *s = h2_find(c, id);
        if (s) {
            s->send_window += increment;
            h2_drain_stream(c, s);
        }
        return 0;
    }
    case RST_STREAM: {
        if (len != 4) return fail(c, FRAME_SIZE_ERROR, "RST_STREAM of %u bytes", len);
        struct h2_stream *s = h2_find(c, id);
        if (s) {
            h2_forget(c, s);
            h2_event(c, RB_H2_EVENT_RESET, id, NULL, 0);
        }
        return 0;
    }
    case GOAWAY:
        if (!c->closing) c->closing = 1;   /* the client opens no more streams; open ones are still answered */
        return 0;
    case PUSH_PROMISE:
        return fail(c, PROTOCOL_ERROR, "PUSH_PROMISE from a client");
    default:                               /* PRIORITY and unknown types: ignored (RFC 9113 5.5) */
        return 0;
    }
}

rb_h2 *rb_h2_new(uint32_t max_streams, uint32_t max_message, uint64_t max_buffered)
{
    rb_h2 *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    uint32_t cap = 16;   /* grows with the streams open (grow) */
    c->slots = calloc(cap, sizeof *c->slots);
    if (!c->slots) {
        free(c);
        return NULL;
    }
    c->mask = cap - 1;
    c->max_streams = max_streams;
    c->max_message = max_message;
    c->max_buffered = max_buffered;
    c->send_window = c->peer_initial_window = 65535;
    c->peer_header_list_max = UINT32_MAX;
    hpack_init(&c->table, 4096);
    uint8_t s[18];
    put_be16(s, 3);
    put_be32(s + 2, max_streams);
    put_be16(s + 6, 4);
    put_be32(s + 8, RB_H2_STREAM_WINDOW);
    put_be16(s + 12, 6);
    put_be32(s + 14, RB_H2_HEADER_LIST_MAX);
    h2_frame(c, SETTINGS, 0, 0, s, sizeof s);
    window_update(c, 0, RB_H2_CONN_WINDOW - 65535);
    return c;
}

void rb_h2_free(rb_h2 *c)
{
    if (!c) return;
    for (uint32_t i = 0; i <= c->mask; i++) {
        release(&c->slots[i].body);
        release(&c->slots[i].pending);
        release(&c->slots[i].trailers);
    }
    free(c->slots);
    hpack_release(&c->table);
    release(&c->in); release(&c->out); release(&c->events); release(&c->block); release(&c->fields);
    free(c);
}

int64_t rb_h2_feed(rb_h2 *c, const uint8_t *data, size_t len)
{
    c->events.len = 0;
    if (c->closing == 2) return RB_E_H2_CLOSE;
    if (!put(&c->in, data, len)) return fail(c, ENHANCE_YOUR_CALM, "out of memory");
    size_t at = 0;
    if (!c->preface_done) {
        size_t n = c->in.len < PREFACE_LEN ? c->in.len : PREFACE_LEN;
        if (memcmp(c->in.data, PREFACE, n)) return fail(c, PROTOCOL_ERROR, "not the HTTP/2 connection preface");
        if (c->in.len < PREFACE_LEN) return 0;
        c->preface_done = 1;
        at = PREFACE_LEN;
    }
    int64_t rc = 0;
    while (c->in.len - at >= 9) {
        const uint8_t *f = c->in.data + at;
        uint32_t frame_len = (uint32_t)f[0] << 16 | (uint32_t)f[1] << 8 | f[2];
        if (frame_len > FRAME_MAX) {
            rc = fail(c, FRAME_SIZE_ERROR, "a frame of %u bytes (SETTINGS_MAX_FRAME_SIZE 16384)", frame_len);
            break;
        }
        if (c->in.len - at < 9 + (size_t)frame_len) break;
        if ((rc = on_frame(c, f, frame_len)) < 0) break;
        at += 9 + frame_len;
    }
    memmove(c->in.data, c->in.data + at, c->in.len - at);
    c->in.len -= at;
    return rc < 0 ? rc : (int64_t)c->events.len;
}

const uint8_t *rb_h2_events(rb_h2 *c, size_t *len)
{
    *len = c->events.len;
    return c->events.data;
}

const uint8_t *rb_h2_output(rb_h2 *c, size_t *len)
{
    *len = c->out.len - c->out_at;
    return c->out.data + c->out_at;
}

void rb_h2_sent(rb_h2 *c, size_t n)
{
    c->out_at += n;
    if (c->out_at >= c->out.len) {
        c->out.len = c->out_at = 0;
    } else if (c->out_at > (1u << 20)) {
        memmove(c->out.data, c->out.data + c->out_at, c->out.len - c->out_at);
        c->out.len -= c->out_at;
        c->out_at = 0;
    }
}

void rb_h2_goaway(rb_h2 *c, uint32_t error)
{
    goaway(c, c->last_stream, error);
    c->closing = 2;
}

/* RFC 9113 6.8's graceful shutdown, its first step: GOAWAY with the largest stream id and NO_ERROR, once.
 * The client opens no more streams here (grpc-java and C-core move new calls to a new connection) while
 * the open ones are answered; streams opened after it are refused. rb_h2_goaway ends the connection. */
void rb_h2_drain(rb_h2 *c)
{
    if (c->drain_sent || c->closing == 2) return;
    goaway(c, WINDOW_MAX, NO_ERROR);
    c->drain_sent = 1;
    c->closing = 1;
}

void rb_h2_state(rb_h2 *c, uint64_t *state)
{
    state[0] = c->open;
    state[1] = c->pending_bytes + (c->out.len - c->out_at);
    state[2] = c->buffered;
    state[3] = c->refused;
    state[4] = (uint64_t)c->closing;
    state[5] = (uint64_t)c->preface_done;
}

const char *rb_h2_reason(rb_h2 *c) { return c->reason; }
