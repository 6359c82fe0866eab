/* h2c_floor.c: MEASURES A FLOOR, it is not RocketBox's gRPC door (perf/RESULTS.md, "The gRPC door: the
 * floor of a C front end and the proxy's own cost"). A minimal HTTP/2 cleartext (h2c) server for unary
 * gRPC calls: the connection preface, SETTINGS and their ACK, PING, WINDOW_UPDATE (connection flow
 * control both ways), HEADERS/CONTINUATION with HPACK decoding (RFC 7541: static and dynamic table,
 * Huffman strings, table size updates), DATA, RST_STREAM, GOAWAY. Each complete request is handed to
 * Python as (stream, :path, message) records in one buffer per read; each answer's HEADERS + DATA +
 * trailers is framed here, a batch of answers written by one call. What it leaves out, because a floor
 * needs none of it: server push, priorities, streaming RPCs, per-stream send windows (answers are small),
 * TLS, compression. Compiled with gcc at run time by perf/h2c_floor.py; the Huffman code and the static
 * table are RFC 7541's Appendices A and B. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
static const uint32_t HUFF_CODE[257] = {
0x1ff8,0x7fffd8,0xfffffe2,0xfffffe3,0xfffffe4,0xfffffe5,0xfffffe6,0xfffffe7,0xfffffe8,0xffffea,0x3ffffffc,0xfffffe9,0xfffffea,0x3ffffffd,0xfffffeb,0xfffffec,0xfffffed,0xfffffee,0xfffffef,0xffffff0,0xffffff1,0xffffff2,0x3ffffffe,0xffffff3,0xffffff4,0xffffff5,0xffffff6,0xffffff7,0xffffff8,0xffffff9,0xffffffa,0xffffffb,0x14,0x3f8,0x3f9,0xffa,0x1ff9,0x15,0xf8,0x7fa,0x3fa,0x3fb,0xf9,0x7fb,0xfa,0x16,0x17,0x18,0x0,0x1,0x2,0x19,0x1a,0x1b,0x1c,0x1d,0x1e,0x1f,0x5c,0xfb,0x7ffc,0x20,0xffb,0x3fc,0x1ffa,0x21,0x5d,0x5e,0x5f,0x60,0x61,0x62,0x63,0x64,0x65,0x66,0x67,0x68,0x69,0x6a,0x6b,0x6c,0x6d,0x6e,0x6f,0x70,0x71,0x72,0xfc,0x73,0xfd,0x1ffb,0x7fff0,0x1ffc,0x3ffc,0x22,0x7ffd,0x3,0x23,0x4,0x24,0x5,0x25,0x26,0x27,0x6,0x74,0x75,0x28,0x29,0x2a,0x7,0x2b,0x76,0x2c,0x8,0x9,0x2d,0x77,0x78,0x79,0x7a,0x7b,0x7ffe,0x7fc,0x3ffd,0x1ffd,0xffffffc,0xfffe6,0x3fffd2,0xfffe7,0xfffe8,0x3fffd3,0x3fffd4,0x3fffd5,0x7fffd9,0x3fffd6,0x7fffda,0x7fffdb,0x7fffdc,0x7fffdd,0x7fffde,0xffffeb,0x7fffdf,0xffffec,0xffffed,0x3fffd7,0x7fffe0,0xffffee,0x7fffe1,0x7fffe2,0x7fffe3,0x7fffe4,0x1fffdc,0x3fffd8,0x7fffe5,0x3fffd9,0x7fffe6,0x7fffe7,0xffffef,0x3fffda,0x1fffdd,0xfffe9,0x3fffdb,0x3fffdc,0x7fffe8,0x7fffe9,0x1fffde,0x7fffea,0x3fffdd,0x3fffde,0xfffff0,0x1fffdf,0x3fffdf,0x7fffeb,0x7fffec,0x1fffe0,0x1fffe1,0x3fffe0,0x1fffe2,0x7fffed,0x3fffe1,0x7fffee,0x7fffef,0xfffea,0x3fffe2,0x3fffe3,0x3fffe4,0x7ffff0,0x3fffe5,0x3fffe6,0x7ffff1,0x3ffffe0,0x3ffffe1,0xfffeb,0x7fff1,0x3fffe7,0x7ffff2,0x3fffe8,0x1ffffec,0x3ffffe2,0x3ffffe3,0x3ffffe4,0x7ffffde,0x7ffffdf,0x3ffffe5,0xfffff1,0x1ffffed,0x7fff2,0x1fffe3,0x3ffffe6,0x7ffffe0,0x7ffffe1,0x3ffffe7,0x7ffffe2,0xfffff2,0x1fffe4,0x1fffe5,0x3ffffe8,0x3ffffe9,0xffffffd,0x7ffffe3,0x7ffffe4,0x7ffffe5,0xfffec,0xfffff3,0xfffed,0x1fffe6,0x3fffe9,0x1fffe7,0x1fffe8,0x7ffff3,0x3fffea,0x3fffeb,0x1ffffee,0x1ffffef,0xfffff4,0xfffff5,0x3ffffea,0x7ffff4,0x3ffffeb,0x7ffffe6,0x3ffffec,0x3ffffed,0x7ffffe7,0x7ffffe8,0x7ffffe9,0x7ffffea,0x7ffffeb,0xffffffe,0x7ffffec,0x7ffffed,0x7ffffee,0x7ffffef,0x7fffff0,0x3ffffee,0x3fffffff};
static const uint8_t HUFF_LEN[257] = {13,23,28,28,28,28,28,28,28,24,30,28,28,30,28,28,28,28,28,28,28,28,30,28,28,28,28,28,28,28,28,28,6,10,10,12,13,6,8,11,10,10,8,11,8,6,6,6,5,5,5,6,6,6,6,6,6,6,7,8,15,6,12,10,13,6,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,8,7,8,13,19,13,14,6,15,5,6,5,6,5,6,6,6,5,7,7,6,6,6,5,6,7,6,5,5,6,7,7,7,7,7,15,11,14,13,28,20,22,20,20,22,22,22,23,22,23,23,23,23,23,24,23,24,24,22,23,24,23,23,23,23,21,22,23,22,23,23,24,22,21,20,22,22,23,23,21,23,22,22,24,21,22,23,23,21,21,22,21,23,22,23,23,20,22,22,22,23,22,22,23,26,26,20,19,22,23,22,25,26,26,26,27,27,26,24,25,19,21,26,27,27,26,27,24,21,21,26,26,28,27,27,27,20,24,20,21,22,21,21,23,22,22,25,25,24,24,26,23,26,27,26,26,27,27,27,27,27,28,27,27,27,27,27,26,30};
static const char *const STATIC_NAME[62] = {"",":authority",":method",":method",":path",":path",":scheme",":scheme",":status",":status",":status",":status",":status",":status",":status","accept-charset","accept-encoding","accept-language","accept-ranges","accept","access-control-allow-origin","age","allow","authorization","cache-control","content-disposition","content-encoding","content-language","content-length","content-location","content-range","content-type","cookie","date","etag","expect","expires","from","host","if-match","if-modified-since","if-none-match","if-range","if-unmodified-since","last-modified","link","location","max-forwards","proxy-authenticate","proxy-authorization","range","referer","refresh","retry-after","server","set-cookie","strict-transport-security","transfer-encoding","user-agent","vary","via","www-authenticate"};
static const char *const STATIC_VALUE[62] = {"","","GET","POST","/","/index.html","http","https","200","204","206","304","400","404","500","","gzip, deflate","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","",""};

/* ------------------------------------------------------------------ Huffman (canonical decode) */

static int huff_ready;
static uint32_t huff_first[32], huff_count[32], huff_offset[32];
static uint16_t huff_sorted[257];

static void huff_init(void) {
    uint32_t n = 0;
    for (int len = 1; len < 32; len++) {
        huff_offset[len] = n;
        huff_count[len] = 0;
        for (int s = 0; s < 257; s++)
            if (HUFF_LEN[s] == len) {
                if (!huff_count[len]) huff_first[len] = HUFF_CODE[s];
                huff_sorted[n++] = (uint16_t)s;
                huff_count[len]++;
            }
    }
    huff_ready = 1;
}

/* Decodes len bytes into out (room: cap); the decoded length, or -1 (bad padding, EOS, too long). */
static long huff_decode(const uint8_t *in, size_t len, uint8_t *out, size_t cap) {
    size_t n = 0;
    uint32_t code = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        for (int b = 7; b >= 0; b--) {
            code = (code << 1) | ((in[i] >> b) & 1);
            bits++;
            if (bits > 30) return -1;
            if (huff_count[bits] && code >= huff_first[bits] && code - huff_first[bits] < huff_count[bits]) {
                uint16_t sym = huff_sorted[huff_offset[bits] + code - huff_first[bits]];
                if (sym == 256 || n >= cap) return -1;
                out[n++] = (uint8_t)sym;
                code = 0;
                bits = 0;
            }
        }
    }
    /* What is left must be a prefix of EOS (all ones), shorter than a byte. */
    if (bits > 7 || code != (1u << bits) - 1) return -1;
    return (long)n;
}

/* ------------------------------------------------------------------ HPACK decoder */

typedef struct { uint8_t *name, *value; uint32_t nlen, vlen; } entry_t;

#define DYN_MAX_ENTRIES 512
typedef struct {
    entry_t ring[DYN_MAX_ENTRIES];
    uint32_t head, count;     /* head: the newest entry's slot */
    uint32_t size, max_size, limit;
} dyn_t;

static void dyn_evict_one(dyn_t *d) {
    uint32_t oldest = (d->head + DYN_MAX_ENTRIES - d->count + 1) % DYN_MAX_ENTRIES;
    entry_t *e = &d->ring[oldest];
    d->size -= e->nlen + e->vlen + 32;
    free(e->name);
    e->name = e->value = NULL;
    d->count--;
}

static void dyn_fit(dyn_t *d, uint32_t room) {
    while (d->count && (d->size + room > d->max_size || d->count == DYN_MAX_ENTRIES)) dyn_evict_one(d);
}

static void dyn_add(dyn_t *d, const uint8_t *name, uint32_t nlen, const uint8_t *value, uint32_t vlen) {
    uint32_t need = nlen + vlen + 32;
    dyn_fit(d, need);
    if (need > d->max_size) return;   /* RFC 7541 4.4: the table is left empty */
    uint8_t *mem = malloc(nlen + vlen + 1);
    if (!mem) return;
    memcpy(mem, name, nlen);
    memcpy(mem + nlen, value, vlen);
    d->head = (d->head + 1) % DYN_MAX_ENTRIES;
    d->ring[d->head] = (entry_t){mem, mem + nlen, nlen, vlen};
    d->count++;
    d->size += need;
}

/* Index 1..61 static, 62.. dynamic (62 the newest); 0 when out of range. */
static int table_get(dyn_t *d, uint64_t index, const uint8_t **name, uint32_t *nlen, const uint8_t **value,
                     uint32_t *vlen) {
    if (index >= 1 && index <= 61) {
        *name = (const uint8_t *)STATIC_NAME[index];
        *nlen = (uint32_t)strlen(STATIC_NAME[index]);
        *value = (const uint8_t *)STATIC_VALUE[index];
        *vlen = (uint32_t)strlen(STATIC_VALUE[index]);
        return 1;
    }
    if (index < 62 || index - 62 >= d->count) return 0;
    entry_t *e = &d->ring[(d->head + DYN_MAX_ENTRIES - (uint32_t)(index - 62)) % DYN_MAX_ENTRIES];
    *name = e->name; *nlen = e->nlen; *value = e->value; *vlen = e->vlen;
    return 1;
}

static int read_int(const uint8_t **p, const uint8_t *end, int prefix, uint64_t *out) {
    if (*p >= end) return 0;
    uint64_t mask = (1u << prefix) - 1, v = **p & mask;
    (*p)++;
    if (v < mask) { *out = v; return 1; }
    for (int shift = 0; shift < 56; shift += 7) {
        if (*p >= end) return 0;
        uint8_t b = *(*p)++;
        v += (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *out = v; return 1; }
    }
    return 0;
}

#define STR_MAX 8192
/* A string literal into buf (room STR_MAX); its length or -1. */
static long read_str(const uint8_t **p, const uint8_t *end, uint8_t *buf) {
    if (*p >= end) return -1;
    int huffman = **p & 0x80;
    uint64_t len;
    if (!read_int(p, end, 7, &len) || len > (uint64_t)(end - *p)) return -1;
    const uint8_t *s = *p;
    *p += len;
    if (huffman) return huff_decode(s, len, buf, STR_MAX);
    if (len > STR_MAX) return -1;
    memcpy(buf, s, len);
    return (long)len;
}

/* Decodes one header block; :path into path (room 256). 0 on success, -1 on a compression error. */
static int hpack_block(dyn_t *d, const uint8_t *p, const uint8_t *end, uint8_t *path, uint32_t *plen) {
    static uint8_t nbuf[STR_MAX], vbuf[STR_MAX];
    *plen = 0;
    while (p < end) {
        const uint8_t *name, *value;
        uint32_t nlen, vlen;
        uint64_t index;
        uint8_t b = *p;
        if (b & 0x80) {                                   /* indexed field */
            if (!read_int(&p, end, 7, &index) || !table_get(d, index, &name, &nlen, &value, &vlen)) return -1;
        } else if ((b & 0xe0) == 0x20) {                  /* dynamic table size update */
            if (!read_int(&p, end, 5, &index) || index > d->limit) return -1;
            d->max_size = (uint32_t)index;
            dyn_fit(d, 0);
            continue;
        } else {                                          /* literal: 01 indexed, 0000 not, 0001 never */
            int incremental = (b & 0xc0) == 0x40;
            if (!read_int(&p, end, incremental ? 6 : 4, &index)) return -1;
            long n, v;
            if (index) {
                const uint8_t *in; uint32_t il; const uint8_t *iv; uint32_t ivl;
                if (!table_get(d, index, &in, &il, &iv, &ivl) || il > STR_MAX) return -1;
                memcpy(nbuf, in, il);
                n = il;
            } else if ((n = read_str(&p, end, nbuf)) < 0) return -1;
            if ((v = read_str(&p, end, vbuf)) < 0) return -1;
            if (incremental) dyn_add(d, nbuf, (uint32_t)n, vbuf, (uint32_t)v);
            name = nbuf; nlen = (uint32_t)n; value = vbuf; vlen = (uint32_t)v;
        }
        if (nlen == 5 && !memcmp(name, ":path", 5) && vlen < 256) {
            memcpy(path, value, vlen);
            *plen = vlen;
        }
    }
    return 0;
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
    dyn_t dyn;
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
    if (!huff_ready) huff_init();
    conn_t *c = calloc(1, sizeof(conn_t));
    if (!c) return NULL;
    c->dyn.max_size = c->dyn.limit = 4096;
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
    for (uint32_t i = 0; i < DYN_MAX_ENTRIES; i++) free(c->dyn.ring[i].name);
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
