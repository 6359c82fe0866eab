/* zlib's CRC-32, and the CRC of a concatenation from its parts' CRCs. The lowest C file of the
 * helper: it calls nothing of ours. rb_crc32 is also part of helper.h's surface (cffi). */
#ifndef ROCKETBOX_CRC32_H
#define ROCKETBOX_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* crc32(data, value) as zlib.crc32: value is the running CRC, 0 to start. */
uint32_t rb_crc32(uint32_t value, const uint8_t *data, size_t length);

/* crc(A || B) from crc(A), crc(B) and B's length (< 2^28 bytes), without reading B. */
uint32_t crc32_concat(uint32_t crc_a, uint32_t crc_b, uint64_t b_bytes);

#endif
