/* The gRPC door's HTTP/2 front end, inside the helper (not its cffi surface): one connection's state
 * (struct rb_h2) shared by h2_conn.c (reading, the stream table, the connection) and h2_answer.c (what
 * Python's answers become: headers, DATA as the windows allow, trailers). */
#ifndef ROCKETBOX_H2_CONN_H
#define ROCKETBOX_H2_CONN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h2_hpack.h"
#include "helper.h"

enum { DATA = 0, HEADERS = 1, PRIORITY = 2, RST_STREAM = 3, SETTINGS = 4, PUSH_PROMISE = 5, PING = 6,
       GOAWAY = 7, WINDOW_UPDATE = 8, CONTINUATION = 9 };
enum { END_STREAM = 1, ACK = 1, END_HEADERS = 4, PADDED = 8, PRIORITY_FLAG = 0x20 };
enum { NO_ERROR = 0, PROTOCOL_ERROR = 1, FLOW_CONTROL_ERROR = 3, FRAME_SIZE_ERROR = 6, REFUSED_STREAM = 7,
       COMPRESSION_ERROR = 9, ENHANCE_YOUR_CALM = 11 };
enum { GRPC_RESOURCE_EXHAUSTED = 8, GRPC_UNIMPLEMENTED = 12, GRPC_INTERNAL = 13 };

#define FRAME_MAX 16384u
#define WINDOW_MAX 0x7fffffffu
#define PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define PREFACE_LEN 24

struct h2_buf { uint8_t *data; size_t len, cap; };

struct h2_stream {
    uint32_t id;                      /* 0: a free slot */
    uint8_t remote_closed, headers_sent, trailers_waiting;
    int64_t send_window;
    uint32_t recv_unacked;
    struct h2_buf body;               /* what has come of the message being received */
    struct h2_buf pending;            /* DATA payload waiting for window */
    size_t pending_at;
    struct h2_buf trailers;           /* a trailer block waiting behind pending */
};

struct rb_h2 {
    int preface_done, closing;        /* closing 1: no new streams (a GOAWAY either way); 2: ended */
    int drain_sent;                   /* our GOAWAY of 2^31-1 (rb_h2_drain) went */
    struct h2_buf in, out, events, block, fields;
    size_t out_at;
    struct hpack_table table;
    struct h2_stream *slots;
    uint32_t mask, open, max_streams, refused;
    uint32_t block_stream, block_end_stream, in_block;
    int64_t send_window, peer_initial_window;
    uint32_t peer_header_list_max;    /* the client's SETTINGS_MAX_HEADER_LIST_SIZE (none said: unbounded) */
    uint64_t recv_unacked;
    uint32_t last_stream;
    uint32_t max_message;
    uint64_t max_buffered, buffered, pending_bytes;
    const char *fields_refused;   /* why this block's request is refused (NULL: it is not) */
    uint32_t fields_refused_status;
    char reason[128];
};

static inline int put(struct h2_buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n) cap *= 2;
        uint8_t *data = realloc(b->data, cap);
        if (!data) return 0;
        b->data = data;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    return 1;
}

static inline void release(struct h2_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* h2_conn.c */
void h2_frame(rb_h2 *c, uint8_t type, uint8_t flags, uint32_t stream, const void *payload, uint32_t len);
void h2_event(rb_h2 *c, uint8_t kind, uint32_t stream, const void *payload, uint32_t len);
struct h2_stream *h2_find(rb_h2 *c, uint32_t id);
struct h2_stream *h2_insert(rb_h2 *c, uint32_t id);   /* NULL when out of memory */
void h2_forget(rb_h2 *c, struct h2_stream *s);
/* h2_answer.c */
int h2_drain_stream(rb_h2 *c, struct h2_stream *s);
void h2_drain_all(rb_h2 *c);
void h2_end_with_status(rb_h2 *c, struct h2_stream *s, uint32_t status, const char *fmt, ...);

#endif
