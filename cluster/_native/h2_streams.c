/* The gRPC door's HTTP/2 front end, its lowest layer (h2_conn.h): a frame or an event appended to the
 * connection's buffers, and the table of open streams (linear probing). h2_conn.c (reading) and
 * h2_answer.c (answers) both call down to it, never to each other's upward. */
#include "bytes.h"
#include "h2_conn.h"

void h2_frame(rb_h2 *c, uint8_t type, uint8_t flags, uint32_t stream, const void *payload, uint32_t len)
{
    uint8_t h[9] = {(uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, flags};
    put_be32(h + 5, stream & WINDOW_MAX);
    put(&c->out, h, 9);
    put(&c->out, payload, len);
}

void h2_event(rb_h2 *c, uint8_t kind, uint32_t stream, const void *payload, uint32_t len)
{
    uint8_t h[9] = {kind};
    put_be32(h + 1, stream);
    put_be32(h + 5, len);
    put(&c->events, h, 9);
    put(&c->events, payload, len);
}

/* ------------------------------------------------------------------ the stream table (linear probing) */

static uint32_t home(const rb_h2 *c, uint32_t id) { return (id >> 1) & c->mask; }

struct h2_stream *h2_find(rb_h2 *c, uint32_t id)
{
    if (!id) return NULL;
    for (uint32_t i = home(c, id);; i = (i + 1) & c->mask) {
        if (c->slots[i].id == id) return &c->slots[i];
        if (!c->slots[i].id) return NULL;
    }
}

/* The table doubled (its load kept at most half), every entry placed again; 0 when out of memory. */
static int grow(rb_h2 *c)
{
    uint32_t old_cap = c->mask + 1, cap = 2 * old_cap;
    struct h2_stream *old = c->slots, *slots = calloc(cap, sizeof *slots);
    if (!slots) return 0;
    c->slots = slots;
    c->mask = cap - 1;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (!old[i].id) continue;
        uint32_t j = home(c, old[i].id);
        while (slots[j].id) j = (j + 1) & c->mask;
        slots[j] = old[i];
    }
    free(old);
    return 1;
}

struct h2_stream *h2_insert(rb_h2 *c, uint32_t id)
{
    if (2 * (c->open + 1) > c->mask + 1 && !grow(c)) return NULL;
    uint32_t i = home(c, id);
    while (c->slots[i].id) i = (i + 1) & c->mask;
    struct h2_stream *s = &c->slots[i];
    memset(s, 0, sizeof *s);
    s->id = id;
    s->send_window = c->peer_initial_window;
    c->open++;
    return s;
}

/* Frees s's slot; entries after it in its run move back (no tombstones: ids are never reused). */
void h2_forget(rb_h2 *c, struct h2_stream *s)
{
    c->buffered -= s->body.len;
    c->pending_bytes -= s->pending.len - s->pending_at;
    release(&s->body);
    release(&s->pending);
    release(&s->trailers);
    uint32_t hole = (uint32_t)(s - c->slots);
    c->slots[hole].id = 0;
    c->open--;
    for (uint32_t i = (hole + 1) & c->mask; c->slots[i].id; i = (i + 1) & c->mask) {
        uint32_t want = home(c, c->slots[i].id);
        /* the entry at i may move to the hole when its home does not lie in (hole, i] cyclically */
        if ((i > hole && (want <= hole || want > i)) || (i < hole && want <= hole && want > i)) {
            c->slots[hole] = c->slots[i];
            c->slots[i].id = 0;
            memset(&c->slots[i], 0, sizeof c->slots[i]);
            hole = i;
        }
    }
}
