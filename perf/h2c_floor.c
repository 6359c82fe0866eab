/* h2c_floor.c: MEASURES A FLOOR, it is not RocketBox's gRPC door (perf/RESULTS.md, "The gRPC door: the
 * floor of a C front end and the proxy's own cost"). A minimal HTTP/2 cleartext (h2c) server for unary
 * gRPC calls: the connection preface, SETTINGS and their ACK, PING, WINDOW_UPDATE (connection flow
 * control both ways), HEADERS/CONTINUATION with HPACK decoding (RFC 7541: static and dynamic table,
 * Huffman strings, table size updates), DATA, RST_STREAM, GOAWAY. Each complete request is handed to
 * Python as (stream, :path, message) records in one buffer per read; each answer's HEADERS + DATA +
 * trailers is framed here, a batch of answers written by one call. What it leaves out, because a floor
 * needs none of it: server push, priorities, streaming RPCs, per-stream send windows (answers are small),
 * TLS, compression. Compiled with gcc at run time by perf/h2c_floor.py, with the product's HPACK decoder
 * (cluster/_native/h2_hpack.c). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
/* ------------------------------------------------------------------ HPACK: the product's decoder */

#include "h2_hpack.h"   /* cluster/_native/h2_hpack.c, compiled in by perf/h2c_floor.py */

struct path_out { uint8_t *path; uint32_t *plen; };

static int keep_path(void *arg, const uint8_t *name, uint32_t nlen, const uint8_t *value, uint32_t vlen) {
    struct path_out *out = arg;
    if (nlen == 5 && !memcmp(name, ":path", 5) && vlen < 256) {
        memcpy(out->path, value, vlen);
        *out->plen = vlen;
    }
    return 0;
}

/* Decodes one header block; :path into path (room 256). 0 on success, -1 on a compression error. */
static int hpack_block(struct hpack_table *d, const uint8_t *p, const uint8_t *end, uint8_t *path, uint32_t *plen) {
    struct path_out out = {path, plen};
    *plen = 0;
    return hpack_decode_block(d, p, end, keep_path, &out) ? -1 : 0;
}

/* ------------------------------------------------------------------ buffers, streams, connections */

typedef struct { uint8_t *data; size_t len, cap; } buf_t;

static int buf_room(buf_t *b, size_t more) {
    if (b->len + more <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    uint8_t *data = realloc(b->data, cap);
    if (!data) return 0;
    b->data = data;
    b->cap = cap;
    return 1;
}

static int buf_put(buf_t *b, const void *p, size_t n) {
    if (!buf_room(b, n)) return 0;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 1;
}

static void put_frame_head(uint8_t *h, uint32_t len, uint8_t type, uint8_t flags, uint32_t stream) {
    h[0] = len >> 16; h[1] = len >> 8; h[2] = len;
    h[3] = type; h[4] = flags;
    h[5] = (stream >> 24) & 0x7f; h[6] = stream >> 16; h[7] = stream >> 8; h[8] = stream;
}

static int frame(buf_t *b, uint8_t type, uint8_t flags, uint32_t stream, const void *payload, uint32_t len) {
    uint8_t h[9];
    put_frame_head(h, len, type, flags, stream);
    return buf_put(b, h, 9) && buf_put(b, payload, len);
}

enum { DATA = 0, HEADERS = 1, PRIORITY = 2, RST_STREAM = 3, SETTINGS = 4, PUSH_PROMISE = 5, PING = 6,
       GOAWAY = 7, WINDOW_UPDATE = 8, CONTINUATION = 9 };
enum { END_STREAM = 1, ACK = 1, END_HEADERS = 4, PADDED = 8, PRIORITY_FLAG = 0x20 };

#define MAX_STREAMS 1024
#define MAX_FRAME 16384
#define MAX_MESSAGE (16u << 20)
#define OUR_STREAM_WINDOW (1u << 24)
#define OUR_CONN_WINDOW_BOOST (1u << 30)

typedef struct {
    uint32_t id;              /* 0: free slot */
    uint8_t path[256];
    uint32_t plen;
    buf_t body;
} stream_t;

typedef struct {
    int preface_done, closing;
    buf_t in, out, batch;
    struct hpack_table dyn;
    stream_t streams[MAX_STREAMS];
    buf_t headers;            /* a header block across CONTINUATION frames */
    uint32_t headers_stream;
    int headers_end_stream;
    int64_t send_window;
    uint64_t recv_unacked;
    uint32_t last_stream;
    uint64_t window_waits;    /* answers written beyond the peer's connection window (0 in every run) */
} conn_t;

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

conn_t *h2_new(void) {
    conn_t *c = calloc(1, sizeof(conn_t));
    if (!c) return NULL;
    hpack_init(&c->dyn, 4096);
    c->send_window = 65535;
    /* Our SETTINGS (MAX_CONCURRENT_STREAMS 1000, INITIAL_WINDOW_SIZE 16 MiB) and a connection window of ~1 GiB. */
    uint8_t s[12] = {0, 3, 0, 0, 0x03, 0xe8, 0, 4, OUR_STREAM_WINDOW >> 24, (OUR_STREAM_WINDOW >> 16) & 0xff, 0, 0};
    uint8_t w[4] = {OUR_CONN_WINDOW_BOOST >> 24, 0, 0, 0};
    frame(&c->out, SETTINGS, 0, 0, s, sizeof s);
    frame(&c->out, WINDOW_UPDATE, 0, 0, w, 4);
    return c;
}

void h2_free(conn_t *c) {
    for (int i = 0; i < MAX_STREAMS; i++) free(c->streams[i].body.data);
    hpack_release(&c->dyn);
    free(c->in.data); free(c->out.data); free(c->batch.data); free(c->headers.data);
    free(c);
}

static stream_t *stream_find(conn_t *c, uint32_t id) {
    stream_t *s = &c->streams[id % MAX_STREAMS];
    return s->id == id ? s : NULL;
}

static void goaway(conn_t *c, uint32_t error) {
    uint8_t g[8] = {c->last_stream >> 24, c->last_stream >> 16, c->last_stream >> 8, c->last_stream,
                    error >> 24, error >> 16, error >> 8, error};
    frame(&c->out, GOAWAY, 0, 0, g, 8);
    c->closing = 1;
}

static void rst(conn_t *c, uint32_t stream, uint32_t error) {
    uint8_t e[4] = {error >> 24, error >> 16, error >> 8, error};
    frame(&c->out, RST_STREAM, 0, stream, e, 4);
}

/* A complete request: [u32 stream][u16 path length][u32 message length][path][message] into the batch. */
static void complete(conn_t *c, stream_t *s) {
    const uint8_t *msg = s->body.data;
    uint32_t mlen = 0;
    if (s->body.len >= 5) {   /* the gRPC prefix: compressed flag, 4-byte length (one message a unary call) */
        mlen = ((uint32_t)msg[1] << 24) | (msg[2] << 16) | (msg[3] << 8) | msg[4];
        if (mlen > s->body.len - 5) mlen = (uint32_t)s->body.len - 5;
        msg += 5;
    }
    uint8_t h[10] = {s->id >> 24, s->id >> 16, s->id >> 8, s->id, s->plen >> 8, s->plen,
                     mlen >> 24, mlen >> 16, mlen >> 8, mlen};
    buf_put(&c->batch, h, 10);
    buf_put(&c->batch, s->path, s->plen);
    buf_put(&c->batch, msg, mlen);
    s->id = 0;
    s->body.len = 0;
}

static int end_headers(conn_t *c) {
    uint32_t id = c->headers_stream;
    stream_t *s = &c->streams[id % MAX_STREAMS];
    uint8_t path[256];
    uint32_t plen;
    if (hpack_block(&c->dyn, c->headers.data, c->headers.data + c->headers.len, path, &plen) < 0) {
        goaway(c, 9);   /* COMPRESSION_ERROR */
        return -1;
    }
    c->headers.len = 0;
    if (s->id && s->id != id) { rst(c, id, 7); return 0; }   /* REFUSED_STREAM: its slot is taken */
    if (s->id == id) {                                        /* trailers of a request end it */
        if (c->headers_end_stream) complete(c, s);
        return 0;
    }
    s->id = id;
    memcpy(s->path, path, plen);
    s->plen = plen;
    s->body.len = 0;
    if (id > c->last_stream) c->last_stream = id;
    if (c->headers_end_stream) complete(c, s);
    return 0;
}

/* One frame (its header at f, payload after); -1 to close the connection. */
static int on_frame(conn_t *c, const uint8_t *f, uint32_t len) {
    uint8_t type = f[3], flags = f[4];
    uint32_t id = ((f[5] & 0x7f) << 24) | (f[6] << 16) | (f[7] << 8) | f[8];
    const uint8_t *p = f + 9, *end = p + len;
    if (c->headers.len && type != CONTINUATION) { goaway(c, 1); return -1; }
    if ((type == DATA || type == HEADERS) && (flags & PADDED)) {
        if (len < 1 || p[0] >= len) { goaway(c, 1); return -1; }
        end -= p[0];
        p++;
    }
    switch (type) {
    case DATA: {
        c->recv_unacked += len;
        stream_t *s = stream_find(c, id);
        if (s) {
            if (s->body.len + (end - p) > MAX_MESSAGE + 5) { rst(c, id, 11); s->id = 0; s->body.len = 0; }
            else {
                buf_put(&s->body, p, end - p);
                if (flags & END_STREAM) complete(c, s);
            }
        }
        break;
    }
    case HEADERS:
        if (flags & PRIORITY_FLAG) p += 5;
        if (p > end || id == 0) { goaway(c, 1); return -1; }
        c->headers_stream = id;
        c->headers_end_stream = flags & END_STREAM;
        buf_put(&c->headers, p, end - p);
        if ((flags & END_HEADERS) && end_headers(c) < 0) return -1;
        break;
    case CONTINUATION:
        if (!c->headers.len || id != c->headers_stream) { goaway(c, 1); return -1; }
        buf_put(&c->headers, p, end - p);
        if ((flags & END_HEADERS) && end_headers(c) < 0) return -1;
        break;
    case SETTINGS:
        if (!(flags & ACK)) {
            for (const uint8_t *q = p; q + 6 <= end; q += 6) {
                uint16_t key = (q[0] << 8) | q[1];
                if (key == 1) { /* HEADER_TABLE_SIZE: our encoder uses no dynamic table */ }
            }
            frame(&c->out, SETTINGS, ACK, 0, NULL, 0);
        }
        break;
    case PING:
        if (len != 8) { goaway(c, 6); return -1; }
        if (!(flags & ACK)) frame(&c->out, PING, ACK, 0, p, 8);
        break;
    case WINDOW_UPDATE:
        if (len == 4 && id == 0)
            c->send_window += ((uint32_t)(p[0] & 0x7f) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
        break;
    case RST_STREAM: {
        stream_t *s = stream_find(c, id);
        if (s) { s->id = 0; s->body.len = 0; }
        break;
    }
    case GOAWAY:
        c->closing = 1;
        break;
    default:   /* PRIORITY, PUSH_PROMISE (never from a client), unknown types: ignored */
        break;
    }
    return 0;
}

/* Reads what fd has (one recv), handles every complete frame. The number of complete requests now in
 * the batch (h2_batch), or -1: the peer closed, or broke the protocol (the GOAWAY is in the output). */
int h2_feed(conn_t *c, int fd) {
    c->batch.len = 0;
    if (!buf_room(&c->in, 65536)) return -1;
    ssize_t n = recv(fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
    if (n == 0) return -1;
    if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    c->in.len += n;
    size_t at = 0;
    if (!c->preface_done) {
        if (c->in.len < 24) return 0;
        if (memcmp(c->in.data, PREFACE, 24)) return -1;
        c->preface_done = 1;
        at = 24;
    }
    int count = 0;
    while (c->in.len - at >= 9) {
        const uint8_t *f = c->in.data + at;
        uint32_t len = (f[0] << 16) | (f[1] << 8) | f[2];
        if (len > MAX_FRAME) { goaway(c, 6); return -1; }   /* FRAME_SIZE_ERROR: we never raised it */
        if (c->in.len - at < 9 + len) break;
        size_t before = c->batch.len;
        if (on_frame(c, f, len) < 0) return -1;
        if (c->batch.len != before) count++;
        at += 9 + len;
    }
    memmove(c->in.data, c->in.data + at, c->in.len - at);
    c->in.len -= at;
    if (c->recv_unacked >= (1u << 20)) {   /* give the connection window back in large steps */
        uint32_t inc = (uint32_t)c->recv_unacked;
        uint8_t w[4] = {inc >> 24, inc >> 16, inc >> 8, inc};
        frame(&c->out, WINDOW_UPDATE, 0, 0, w, 4);
        c->recv_unacked = 0;
    }
    return c->closing ? -1 : count;
}

const uint8_t *h2_batch(conn_t *c, size_t *len) {
    *len = c->batch.len;
    return c->batch.data;
}

/* :status 200 (static index 8) and content-type: application/grpc (a literal, name index 31, not indexed). */
static const uint8_t ANSWER_HEADERS[] = {0x88, 0x0f, 0x10, 16, 'a', 'p', 'p', 'l', 'i', 'c', 'a', 't', 'i', 'o',
                                         'n', '/', 'g', 'r', 'p', 'c'};
/* grpc-status: 0 (a literal with a new name, not indexed). */
static const uint8_t OK_TRAILERS[] = {0x00, 11, 'g', 'r', 'p', 'c', '-', 's', 't', 'a', 't', 'u', 's', 1, '0'};

/* One answer's HEADERS, DATA (the gRPC prefix, then the message) and trailers into the output. */
static int append_answer(conn_t *c, uint32_t stream, const uint8_t *msg, uint32_t len) {
    uint8_t prefix[5] = {0, len >> 24, len >> 16, len >> 8, len};
    uint8_t h[9];
    if (!frame(&c->out, HEADERS, END_HEADERS, stream, ANSWER_HEADERS, sizeof ANSWER_HEADERS)) return 0;
    for (uint32_t done = 0, first = 1; first || done < len; first = 0) {   /* DATA frames of at most 16 KiB */
        uint32_t chunk = len - done + (first ? 5 : 0);
        if (chunk > MAX_FRAME) chunk = MAX_FRAME;
        put_frame_head(h, chunk, DATA, 0, stream);
        if (!buf_put(&c->out, h, 9)) return 0;
        uint32_t body = chunk;
        if (first) { buf_put(&c->out, prefix, 5); body -= 5; }
        buf_put(&c->out, msg + done, body);
        done += body;
        c->send_window -= chunk;
    }
    if (c->send_window < 0) c->window_waits++;
    return frame(&c->out, HEADERS, END_HEADERS | END_STREAM, stream, OK_TRAILERS, sizeof OK_TRAILERS);
}

long h2_flush(conn_t *c, int fd) {
    size_t at = 0;
    while (at < c->out.len) {
        ssize_t n = send(fd, c->out.data + at, c->out.len - at, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            return -1;
        }
        at += n;
    }
    memmove(c->out.data, c->out.data + at, c->out.len - at);
    c->out.len -= at;
    return (long)c->out.len;
}

/* Answers packed as [u32 stream][u32 length][message] each, framed and written with everything queued:
 * the bytes still unsent (kept for h2_flush), or -1. */
long h2_answers(conn_t *c, int fd, const uint8_t *packed, size_t len) {
    size_t at = 0;
    while (len - at >= 8) {
        const uint8_t *a = packed + at;
        uint32_t stream = ((uint32_t)a[0] << 24) | (a[1] << 16) | (a[2] << 8) | a[3];
        uint32_t mlen = ((uint32_t)a[4] << 24) | (a[5] << 16) | (a[6] << 8) | a[7];
        if (mlen > len - at - 8 || !append_answer(c, stream, a + 8, mlen)) return -1;
        at += 8 + mlen;
    }
    return h2_flush(c, fd);
}

uint64_t h2_window_waits(conn_t *c) { return c->window_waits; }
