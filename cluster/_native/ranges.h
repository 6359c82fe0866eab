/* The range checks every entry point makes on a caller's buffer, returning helper.h's codes:
 * static inline, as bytes.h. */
#ifndef ROCKETBOX_RANGES_H
#define ROCKETBOX_RANGES_H

#include <stddef.h>
#include <stdint.h>

#include "helper.h"

/* 0 <= start <= end <= buf_len */
static inline int check_range(size_t buf_len, int64_t start, int64_t end)
{
    if (start < 0 || end < start || (uint64_t)end > buf_len)
        return RB_E_RANGE;
    return RB_OK;
}

static inline int check_span(size_t buf_len, int64_t start, int64_t length)
{
    if (start < 0 || length < 0 || start > INT64_MAX - length)
        return RB_E_RANGE;
    return check_range(buf_len, start, start + length);
}

#endif
