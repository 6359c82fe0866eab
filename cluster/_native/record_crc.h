/* The whole-record CRC property (RocketMQ's enabledAppendPropCRC), for the encoder (record_write.c)
 * and the scan (helper.c): not part of helper.h, so cffi never sees it, but for rb_delivered_records.
 * The layout is cluster/message/record_format.py's (module docstring), the Python twin of every
 * function here; RECORD_CRC_BYTES and the rest come from layouts.h, generated from it. */
#ifndef ROCKETBOX_RECORD_CRC_H
#define ROCKETBOX_RECORD_CRC_H

#include <stddef.h>
#include <stdint.h>

#include "layouts.h"

/* The length of what a record stores for these properties (record_format.stored_properties):
 * every "__CRC32#" pair dropped; with record_crc, a closing \x02 if the rest lacks one and the
 * 20 reserved bytes. */
int64_t stored_properties_len(const uint8_t *props, int64_t len, int record_crc);

/* Write those stored properties at out (stored_properties_len bytes, the reserved 20 bytes
 * as a placeholder). */
void write_stored_properties(uint8_t *out, const uint8_t *props, int64_t len, int record_crc);

/* Fill the reserved 20 bytes at the end of the record at rec (size bytes) with the CRC of
 * every byte before them (record_format.seal_record). */
void seal_record(uint8_t *rec, int64_t size);

/* The same for a record whose body (body_len bytes after its first head_bytes) has the CRC
 * body_crc (zlib's, unmasked): a long body is not read again. */
void seal_record_after_body(uint8_t *rec, int64_t size, int64_t head_bytes, int64_t body_len, uint32_t body_crc);

/* The record at rec (total bytes, its properties the last properties_len of them): 0 when they
 * do not end with the CRC property, 1 when they do and the CRC matches, -1 when they do and it
 * does not, or the property is garbled (record_format.stored_record_crc). */
int check_record_crc(const uint8_t *rec, int64_t total, int64_t properties_len);

/* Declared for cffi in helper.h (its contract is there); defined in record_crc.c. */
int64_t rb_delivered_records(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);

#endif
