"""Coverage-guided fuzzing (atheris, libFuzzer) of the parsers whose branches random inputs reach
poorly: SQL92, fastjson, the remoting frame payload (JSON and binary headers), the RPC header,
batch bodies and CommitLog records (Python against the C helper), white address patterns, topic
attribute changes. One target a process (atheris fuzzes once, then exits):

    python -m tests.fuzz.atheris_targets TARGET SECONDS ARTIFACT_DIR

The same properties as the hypothesis targets: an input is read or refused with the module's own
error, nothing else. A crash leaves its input in ARTIFACT_DIR and a traceback on stderr; libFuzzer's
final stats (``stat::number_of_executed_units``) give the inputs tried."""

from __future__ import annotations

import sys

import atheris

# Only the parsers are instrumented (the package's __init__ loads the whole client, which is not fuzzed).
PARSERS = ["rocketbox.cluster.fastjson_format", "rocketbox.cluster.remoting_format", "rocketbox.cluster.wire_format",
           "rocketbox.cluster.topic_attributes", "rocketbox.cluster.acl.addresses", "rocketbox.cluster.filter",
           "rocketbox.cluster.message.batch_format", "rocketbox.cluster.message.record_format"]
with atheris.instrument_imports(include=PARSERS):
    from rocketbox.cluster import fastjson_format as fj
    from rocketbox.cluster import remoting_format as rf
    from rocketbox.cluster import topic_attributes as ta
    from rocketbox.cluster.acl.addresses import AclFormatError, address_matcher
    from rocketbox.cluster.filter.sql92 import SqlParseError, compile_sql
    from rocketbox.cluster.message import batch_format
    from rocketbox.cluster.message import record_format as fmt
    from rocketbox.cluster.wire_format import FrameError, decode_header, encode_header

from rocketbox.cluster import _native as native   # noqa: E402  (C: not instrumented)
from rocketbox.cluster.format_errors import DestinationTooSmall, MalformedBatch   # noqa: E402


def sql92(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    text = provider.ConsumeUnicodeNoSurrogates(provider.ConsumeIntInRange(0, 200))
    props = {name: provider.ConsumeUnicodeNoSurrogates(6) for name in ("a", "b", "TAGS") if provider.ConsumeBool()}
    try:
        selector = compile_sql(text)
    except SqlParseError:
        return
    assert selector.matches(props) in (True, False)


def fastjson(data: bytes) -> None:
    try:
        fj.loads(data)
    except fj.FastjsonError:
        pass


def remoting_payload(data: bytes) -> None:
    try:
        cmd, serialize_type = rf.decode_frame_payload(data)
    except FrameError:
        return
    rf.encode_frame(cmd.response(0, cmd.fields, remark=cmd.remark), serialize_type)


def rpc_header(data: bytes) -> None:
    for rocketmq_layout in (False, True):
        try:
            cmd = decode_header(data, rocketmq_layout)
        except FrameError:
            continue
        again = decode_header(encode_header(cmd, rocketmq_layout), rocketmq_layout)
        assert (again.code, again.fields, again.remark, again.opaque) == (cmd.code, cmd.fields, cmd.remark, cmd.opaque)


def _outcome(call):
    try:
        return call()
    except (MalformedBatch, DestinationTooSmall, ValueError) as exc:
        return type(exc)


def batch_body(data: bytes) -> None:
    assert _outcome(lambda: batch_format.measure_batch(data, 5)) == _outcome(lambda: native.measure_batch(data, 5))


def commitlog_records(data: bytes) -> None:
    pos, rows = 0, []
    while pos < len(data):
        item = fmt.decode_at(data, pos, check_crc=False)
        if type(item) is not fmt.Record:
            break
        rows.append((pos, item.total_size))
        pos += item.total_size
    scan = native.scan_records(data, 0, len(data), max_rows=len(data) // fmt.FIXED_SIZE + 1)
    assert [(r.pos, r.total_size) for r in scan.records()] == rows, (scan, rows)


def white_address(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    pattern = provider.ConsumeUnicodeNoSurrogates(provider.ConsumeIntInRange(0, 60))
    try:
        match = address_matcher(pattern)
    except AclFormatError:
        return
    assert match(provider.ConsumeUnicodeNoSurrogates(40)) in (True, False)


def topic_attributes(data: bytes) -> None:
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(80)
    try:
        changes = ta.parse_modification(text)
        ta.apply_modification({ta.MESSAGE_TYPE_KEY: ta.FIFO}, changes, creating=False)
    except ta.AttributeProblem:
        pass


TARGETS = {f.__name__: f for f in (sql92, fastjson, remoting_payload, rpc_header, batch_body, commitlog_records,
                                   white_address, topic_attributes)}


def main(argv: list[str]) -> None:
    name, seconds, artifacts = argv[1], int(argv[2]), argv[3]
    target = TARGETS[name]
    sys.setrecursionlimit(3000)
    atheris.Setup([argv[0], f"-max_total_time={seconds}", f"-artifact_prefix={artifacts.rstrip('/')}/",
                   "-timeout=60", "-rss_limit_mb=3072", "-print_final_stats=1", "-max_len=4096"], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
