/* HPACK decoding (RFC 7541) for the gRPC door's front end: integers, string literals (raw or Huffman),
 * the static table (Appendix A) and a bounded dynamic table (section 4). No I/O: bytes in, fields out.
 * The Huffman code is Appendix B's, decoded canonically (codes of one length are consecutive). */
#include <stdlib.h>
#include <string.h>

#include "h2_hpack.h"

static const uint32_t HUFF_CODE[257] = {
0x1ff8,0x7fffd8,0xfffffe2,0xfffffe3,0xfffffe4,0xfffffe5,0xfffffe6,0xfffffe7,0xfffffe8,0xffffea,0x3ffffffc,0xfffffe9,0xfffffea,0x3ffffffd,0xfffffeb,0xfffffec,0xfffffed,0xfffffee,0xfffffef,0xffffff0,0xffffff1,0xffffff2,0x3ffffffe,0xffffff3,0xffffff4,0xffffff5,0xffffff6,0xffffff7,0xffffff8,0xffffff9,0xffffffa,0xffffffb,0x14,0x3f8,0x3f9,0xffa,0x1ff9,0x15,0xf8,0x7fa,0x3fa,0x3fb,0xf9,0x7fb,0xfa,0x16,0x17,0x18,0x0,0x1,0x2,0x19,0x1a,0x1b,0x1c,0x1d,0x1e,0x1f,0x5c,0xfb,0x7ffc,0x20,0xffb,0x3fc,0x1ffa,0x21,0x5d,0x5e,0x5f,0x60,0x61,0x62,0x63,0x64,0x65,0x66,0x67,0x68,0x69,0x6a,0x6b,0x6c,0x6d,0x6e,0x6f,0x70,0x71,0x72,0xfc,0x73,0xfd,0x1ffb,0x7fff0,0x1ffc,0x3ffc,0x22,0x7ffd,0x3,0x23,0x4,0x24,0x5,0x25,0x26,0x27,0x6,0x74,0x75,0x28,0x29,0x2a,0x7,0x2b,0x76,0x2c,0x8,0x9,0x2d,0x77,0x78,0x79,0x7a,0x7b,0x7ffe,0x7fc,0x3ffd,0x1ffd,0xffffffc,0xfffe6,0x3fffd2,0xfffe7,0xfffe8,0x3fffd3,0x3fffd4,0x3fffd5,0x7fffd9,0x3fffd6,0x7fffda,0x7fffdb,0x7fffdc,0x7fffdd,0x7fffde,0xffffeb,0x7fffdf,0xffffec,0xffffed,0x3fffd7,0x7fffe0,0xffffee,0x7fffe1,0x7fffe2,0x7fffe3,0x7fffe4,0x1fffdc,0x3fffd8,0x7fffe5,0x3fffd9,0x7fffe6,0x7fffe7,0xffffef,0x3fffda,0x1fffdd,0xfffe9,0x3fffdb,0x3fffdc,0x7fffe8,0x7fffe9,0x1fffde,0x7fffea,0x3fffdd,0x3fffde,0xfffff0,0x1fffdf,0x3fffdf,0x7fffeb,0x7fffec,0x1fffe0,0x1fffe1,0x3fffe0,0x1fffe2,0x7fffed,0x3fffe1,0x7fffee,0x7fffef,0xfffea,0x3fffe2,0x3fffe3,0x3fffe4,0x7ffff0,0x3fffe5,0x3fffe6,0x7ffff1,0x3ffffe0,0x3ffffe1,0xfffeb,0x7fff1,0x3fffe7,0x7ffff2,0x3fffe8,0x1ffffec,0x3ffffe2,0x3ffffe3,0x3ffffe4,0x7ffffde,0x7ffffdf,0x3ffffe5,0xfffff1,0x1ffffed,0x7fff2,0x1fffe3,0x3ffffe6,0x7ffffe0,0x7ffffe1,0x3ffffe7,0x7ffffe2,0xfffff2,0x1fffe4,0x1fffe5,0x3ffffe8,0x3ffffe9,0xffffffd,0x7ffffe3,0x7ffffe4,0x7ffffe5,0xfffec,0xfffff3,0xfffed,0x1fffe6,0x3fffe9,0x1fffe7,0x1fffe8,0x7ffff3,0x3fffea,0x3fffeb,0x1ffffee,0x1ffffef,0xfffff4,0xfffff5,0x3ffffea,0x7ffff4,0x3ffffeb,0x7ffffe6,0x3ffffec,0x3ffffed,0x7ffffe7,0x7ffffe8,0x7ffffe9,0x7ffffea,0x7ffffeb,0xffffffe,0x7ffffec,0x7ffffed,0x7ffffee,0x7ffffef,0x7fffff0,0x3ffffee,0x3fffffff};
static const uint8_t HUFF_LEN[257] = {13,23,28,28,28,28,28,28,28,24,30,28,28,30,28,28,28,28,28,28,28,28,30,28,28,28,28,28,28,28,28,28,6,10,10,12,13,6,8,11,10,10,8,11,8,6,6,6,5,5,5,6,6,6,6,6,6,6,7,8,15,6,12,10,13,6,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,8,7,8,13,19,13,14,6,15,5,6,5,6,5,6,6,6,5,7,7,6,6,6,5,6,7,6,5,5,6,7,7,7,7,7,15,11,14,13,28,20,22,20,20,22,22,22,23,22,23,23,23,23,23,24,23,24,24,22,23,24,23,23,23,23,21,22,23,22,23,23,24,22,21,20,22,22,23,23,21,23,22,22,24,21,22,23,23,21,21,22,21,23,22,23,23,20,22,22,22,23,22,22,23,26,26,20,19,22,23,22,25,26,26,26,27,27,26,24,25,19,21,26,27,27,26,27,24,21,21,26,26,28,27,27,27,20,24,20,21,22,21,21,23,22,22,25,25,24,24,26,23,26,27,26,26,27,27,27,27,27,28,27,27,27,27,27,26,30};
static const char *const STATIC_NAME[62] = {"",":authority",":method",":method",":path",":path",":scheme",":scheme",":status",":status",":status",":status",":status",":status",":status","accept-charset","accept-encoding","accept-language","accept-ranges","accept","access-control-allow-origin","age","allow","authorization","cache-control","content-disposition","content-encoding","content-language","content-length","content-location","content-range","content-type","cookie","date","etag","expect","expires","from","host","if-match","if-modified-since","if-none-match","if-range","if-unmodified-since","last-modified","link","location","max-forwards","proxy-authenticate","proxy-authorization","range","referer","refresh","retry-after","server","set-cookie","strict-transport-security","transfer-encoding","user-agent","vary","via","www-authenticate"};
static const char *const STATIC_VALUE[62] = {"","","GET","POST","/","/index.html","http","https","200","204","206","304","400","404","500","","gzip, deflate","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","","",""};

static int huff_ready;
static uint32_t huff_first[32], huff_count[32], huff_offset[32];
static uint16_t huff_sorted[257];

static void huff_init(void)
{
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

/* in[0, len) decoded into out (room cap): the length, or -1 (EOS inside, padding not a prefix of EOS
 * or longer than 7 bits, too long). */
static long huff_decode(const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    size_t n = 0;
    uint32_t code = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        for (int b = 7; b >= 0; b--) {
            code = (code << 1) | ((in[i] >> b) & 1);
            if (++bits > 30) return -1;
            if (huff_count[bits] && code >= huff_first[bits] && code - huff_first[bits] < huff_count[bits]) {
                uint16_t sym = huff_sorted[huff_offset[bits] + code - huff_first[bits]];
                if (sym == 256 || n >= cap) return -1;
                out[n++] = (uint8_t)sym;
                code = 0;
                bits = 0;
            }
        }
    }
    if (bits > 7 || code != (1u << bits) - 1) return -1;
    return (long)n;
}

void hpack_init(struct hpack_table *t, uint32_t limit)
{
    if (!huff_ready) huff_init();
    memset(t, 0, sizeof *t);
    t->max_size = t->limit = limit;
}

static void evict_oldest(struct hpack_table *t)
{
    uint32_t oldest = (t->newest + HPACK_DYN_SLOTS - t->count + 1) % HPACK_DYN_SLOTS;
    struct hpack_entry *e = &t->ring[oldest];
    t->size -= e->name_len + e->value_len + 32;
    free(e->name);
    e->name = e->value = NULL;
    t->count--;
}

void hpack_release(struct hpack_table *t)
{
    while (t->count) evict_oldest(t);
}

static void fit(struct hpack_table *t, uint32_t room)
{
    while (t->count && (t->size + room > t->max_size || t->count == HPACK_DYN_SLOTS)) evict_oldest(t);
}

static int add(struct hpack_table *t, const uint8_t *name, uint32_t name_len, const uint8_t *value,
               uint32_t value_len)
{
    uint32_t need = name_len + value_len + 32;
    fit(t, need);
    if (need > t->max_size) return 0;   /* 4.4: an entry larger than the table empties it */
    uint8_t *mem = malloc((size_t)name_len + value_len + 1);
    if (!mem) return -1;
    memcpy(mem, name, name_len);
    memcpy(mem + name_len, value, value_len);
    t->newest = (t->newest + 1) % HPACK_DYN_SLOTS;
    t->ring[t->newest] = (struct hpack_entry){mem, mem + name_len, name_len, value_len};
    t->count++;
    t->size += need;
    return 0;
}

/* Index 1..61 static, 62.. dynamic (62 the newest): 1, or 0 when there is no such entry. */
static int lookup(const struct hpack_table *t, uint64_t index, const uint8_t **name, uint32_t *name_len,
                  const uint8_t **value, uint32_t *value_len)
{
    if (index >= 1 && index <= 61) {
        *name = (const uint8_t *)STATIC_NAME[index];
        *name_len = (uint32_t)strlen(STATIC_NAME[index]);
        *value = (const uint8_t *)STATIC_VALUE[index];
        *value_len = (uint32_t)strlen(STATIC_VALUE[index]);
        return 1;
    }
    if (index < 62 || index - 62 >= t->count) return 0;
    const struct hpack_entry *e = &t->ring[(t->newest + HPACK_DYN_SLOTS - (uint32_t)(index - 62)) % HPACK_DYN_SLOTS];
    *name = e->name; *name_len = e->name_len; *value = e->value; *value_len = e->value_len;
    return 1;
}

/* 5.1: an integer with an N-bit prefix; 0 when truncated or over 2^32. */
static int read_int(const uint8_t **p, const uint8_t *end, int prefix, uint64_t *out)
{
    if (*p >= end) return 0;
    uint64_t mask = (1u << prefix) - 1, v = **p & mask;
    (*p)++;
    if (v < mask) { *out = v; return 1; }
    for (int shift = 0; shift <= 28; shift += 7) {
        if (*p >= end) return 0;
        uint8_t b = *(*p)++;
        v += (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *out = v; return v <= 0xffffffffu; }
    }
    return 0;
}

/* 5.2: a string literal into buf (room HPACK_STRING_MAX): its length, or -1. */
static long read_string(const uint8_t **p, const uint8_t *end, uint8_t *buf)
{
    if (*p >= end) return -1;
    int huffman = **p & 0x80;
    uint64_t len;
    if (!read_int(p, end, 7, &len) || len > (uint64_t)(end - *p)) return -1;
    const uint8_t *s = *p;
    *p += len;
    if (huffman) return huff_decode(s, len, buf, HPACK_STRING_MAX);
    if (len > HPACK_STRING_MAX) return -1;
    memcpy(buf, s, len);
    return (long)len;
}

int hpack_decode_block(struct hpack_table *t, const uint8_t *p, const uint8_t *end, hpack_field_fn on_field,
                       void *arg)
{
    static __thread uint8_t name_buf[HPACK_STRING_MAX], value_buf[HPACK_STRING_MAX];
    int fields = 0;
    while (p < end) {
        const uint8_t *name, *value;
        uint32_t name_len, value_len;
        uint64_t index;
        uint8_t b = *p;
        if (b & 0x80) {                                    /* 6.1 indexed field */
            if (!read_int(&p, end, 7, &index) || !lookup(t, index, &name, &name_len, &value, &value_len))
                return -1;
        } else if ((b & 0xe0) == 0x20) {                   /* 6.3 dynamic table size update */
            if (fields || !read_int(&p, end, 5, &index) || index > t->limit) return -1;
            t->max_size = (uint32_t)index;
            fit(t, 0);
            continue;
        } else {                                           /* 6.2 literal: 01 incremental, 0000 without, 0001 never */
            int incremental = (b & 0xc0) == 0x40;
            long n, v;
            if (!read_int(&p, end, incremental ? 6 : 4, &index)) return -1;
            if (index) {
                const uint8_t *indexed_name, *ignored;
                uint32_t indexed_len, ignored_len;
                if (!lookup(t, index, &indexed_name, &indexed_len, &ignored, &ignored_len)) return -1;
                memcpy(name_buf, indexed_name, indexed_len);
                n = indexed_len;
            } else if ((n = read_string(&p, end, name_buf)) < 0) {
                return -1;
            }
            if ((v = read_string(&p, end, value_buf)) < 0) return -1;
            if (incremental && add(t, name_buf, (uint32_t)n, value_buf, (uint32_t)v) < 0) return -1;
            name = name_buf; name_len = (uint32_t)n; value = value_buf; value_len = (uint32_t)v;
        }
        fields++;
        int stop = on_field(arg, name, name_len, value, value_len);
        if (stop) return stop;
    }
    return 0;
}
