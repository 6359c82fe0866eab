/* zlib's CRC-32 (reflected polynomial 0xEDB88320), slice-by-8, and crc32_concat: crc32.h. */
#include "crc32.h"

/* crc_tables[0] is the classic byte-at-a-time table; crc_tables[k][b] is the
 * CRC of byte b followed by k zero bytes, so eight lookups consume 8 bytes. */
static uint32_t crc_tables[8][256];

/* Filled when the shared library is loaded, before any thread can call in. */
__attribute__((constructor)) static void crc_tables_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t crc = b;
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 1) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
        crc_tables[0][b] = crc;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            crc_tables[k][b] = (crc_tables[k - 1][b] >> 8) ^ crc_tables[0][crc_tables[k - 1][b] & 0xFF];
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t rb_crc32(uint32_t value, const uint8_t *data, size_t length)
{
    uint32_t crc = ~value;
    for (; length >= 8; data += 8, length -= 8) {
        uint32_t lo = get_le32(data) ^ crc;
        uint32_t hi = get_le32(data + 4);
        crc = crc_tables[7][lo & 0xFF] ^ crc_tables[6][(lo >> 8) & 0xFF]
            ^ crc_tables[5][(lo >> 16) & 0xFF] ^ crc_tables[4][lo >> 24]
            ^ crc_tables[3][hi & 0xFF] ^ crc_tables[2][(hi >> 8) & 0xFF]
            ^ crc_tables[1][(hi >> 16) & 0xFF] ^ crc_tables[0][hi >> 24];
    }
    for (; length > 0; data++, length--)
        crc = (crc >> 8) ^ crc_tables[0][(crc ^ *data) & 0xFF];
    return ~crc;
}


/* ---- crc(A || B) from crc(A), crc(B) and B's length, without reading B again ----
 * A CRC value is a polynomial over GF(2) in zlib's reflected order: bit 31 holds x^0, bit 0
 * x^31. crc(A || B) = crc(A) * x^(8 |B|) + crc(B) mod P (the pre- and post-conditioning cancel
 * out), so a body whose BODYCRC was just computed is not read a second time for the record's. */

#define CRC_POLY_REFLECTED 0xEDB88320u
#define POLY_ONE 0x80000000u   /* the polynomial 1 */

static uint32_t x_pow_2_pow[32];   /* x^(2^k) mod P */

static uint32_t poly_times_x(uint32_t a) { return (a & 1) ? (a >> 1) ^ CRC_POLY_REFLECTED : a >> 1; }

/* a * b mod P: b * x^i added for every term x^i of a */
static uint32_t poly_mul(uint32_t a, uint32_t b)
{
    uint32_t product = 0;
    for (uint32_t term = POLY_ONE; a != 0; term >>= 1) {
        if (a & term) {
            product ^= b;
            a ^= term;
        }
        b = poly_times_x(b);
    }
    return product;
}

__attribute__((constructor)) static void x_pow_2_pow_init(void)
{
    uint32_t p = POLY_ONE >> 1;   /* x */
    for (int k = 0; k < 32; k++) {
        x_pow_2_pow[k] = p;
        p = poly_mul(p, p);
    }
}

/* x^(8 * bytes) mod P, from the binary digits of 8 * bytes; bytes < 2^28 (the table's reach) */
static uint32_t x_pow_bytes(uint64_t bytes)
{
    uint32_t p = POLY_ONE;
    for (int k = 3; bytes != 0; bytes >>= 1, k++)
        if (bytes & 1)
            p = poly_mul(x_pow_2_pow[k], p);
    return p;
}

uint32_t crc32_concat(uint32_t crc_a, uint32_t crc_b, uint64_t b_bytes)
{
    return poly_mul(x_pow_bytes(b_bytes), crc_a) ^ crc_b;
}

