/* HPACK (RFC 7541) decoding for the gRPC door's HTTP/2 front end (h2_conn.c): internal to the helper,
 * not part of its cffi surface. */
#ifndef ROCKETBOX_H2_HPACK_H
#define ROCKETBOX_H2_HPACK_H

#include <stddef.h>
#include <stdint.h>

#define HPACK_DYN_SLOTS 512     /* entries the dynamic table holds at most (4096 / 32 is 128) */
#define HPACK_STRING_MAX 16384  /* one name or value, decoded */

struct hpack_entry { uint8_t *name, *value; uint32_t name_len, value_len; };

struct hpack_table {
    struct hpack_entry ring[HPACK_DYN_SLOTS];
    uint32_t newest, count;
    uint32_t size, max_size;    /* RFC 7541 4.1 sizes: name + value + 32 an entry */
    uint32_t limit;             /* our SETTINGS_HEADER_TABLE_SIZE: a size update above it is an error */
};

/* Called with each decoded field; a nonzero return stops the block (the caller's limit). */
typedef int (*hpack_field_fn)(void *arg, const uint8_t *name, uint32_t name_len, const uint8_t *value,
                              uint32_t value_len);

void hpack_init(struct hpack_table *t, uint32_t limit);
void hpack_release(struct hpack_table *t);
/* Decodes one header block: 0, -1 on a compression error (bad index, bad Huffman, a size update over
 * the limit, truncated input), or the callback's nonzero return. */
int hpack_decode_block(struct hpack_table *t, const uint8_t *p, const uint8_t *end, hpack_field_fn on_field,
                       void *arg);

#endif
