/* The send lane's header readers (lane_header.c), for send_lane.c: not part of helper.h, so cffi
 * never sees them. A reader fills the send fields' raw spans (by each send code's table of names) or
 * declines the frame: it accepts a strict subset of what remoting_format.py and wire_format.py read. */
#ifndef ROCKETBOX_LANE_HEADER_H
#define ROCKETBOX_LANE_HEADER_H

#include <stddef.h>
#include <stdint.h>

enum lane_field {
    F_TOPIC, F_QUEUE_ID, F_SYS_FLAG, F_BORN_TIMESTAMP, F_FLAG, F_PROPERTIES, F_RECONSUME_TIMES, F_BATCH,
    F_MAX_RECONSUME_TIMES, F_COUNT
};

#define LANE_DECLINE (-1)
#define SERIALIZE_JSON 0
#define SERIALIZE_ROCKETMQ 1

struct span {
    const uint8_t *at;
    int64_t len;
};

struct lane_header {
    int64_t code, opaque, flag, version;
    int seen;        /* JSON: bits of code, opaque, flag, version, language, extFields, remark */
};

/* A JSON header as RocketMQ's clients write one (remoting_format.decode_json_header's fast case):
 * every member once; extFields' values strings, integers (the C++ client's queueId, sysFlag, flag),
 * true or false; a remark null or a string. Both tables' spans are kept (the code may come after
 * extFields); a span is the value's JSON text, a string's quotes included. 0 or LANE_DECLINE. */
int lane_json_header(const uint8_t *at, int64_t len, const struct span *v2_names, const struct span *v1_names,
                     struct lane_header *h, struct span *raw_v2, struct span *raw_v1);

/* A binary (ROCKETMQ) header (wire_format.decode_header with rocketmq_layout): every text valid
 * UTF-8, no send field twice; a span is the value's bytes. 0 or LANE_DECLINE. */
int lane_binary_header(const uint8_t *at, int64_t len, const struct span *v2_names, const struct span *v1_names,
                       struct lane_header *h, struct span *raw_v2, struct span *raw_v1);

/* A field's text decoded into tmp (at most its span's length), as remoting_format's reader makes it
 * (an integer's or true's own text): its length, or LANE_DECLINE. */
int64_t lane_field_text(const struct span *raw, uint8_t *tmp, int binary);

#endif
