from hypothesis import given, strategies as st

from rocketbox.cluster.shm import consumequeue_format as cqf
from rocketbox.cluster.message.tags import java_string_hash, tag_hash_code


def test_entry_golden_bytes():
    raw = cqf.encode_entry(0x0102030405060708, 0x11223344, -2)
    assert raw == bytes.fromhex("0102030405060708" "11223344" "fffffffffffffffe")
    assert cqf.ENTRY_SIZE == 20
    assert cqf.decode_entry(raw) == (0x0102030405060708, 0x11223344, -2)


def test_java_string_hash_known_values():
    # Values Java's String.hashCode() gives for these strings.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("TagA") == 2598919
    # Non-ASCII: UTF-16 code units, a surrogate pair counts as two.
    assert java_string_hash("é") == 233
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


@given(st.text(max_size=40))
def test_java_string_hash_matches_definition(s):
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "big")) % (1 << 32)
    expected = h - (1 << 32) if h >= 1 << 31 else h
    assert java_string_hash(s) == expected


def test_tag_hash_code_zero_without_tag():
    assert tag_hash_code(None) == 0
    assert tag_hash_code("") == 0
    assert tag_hash_code("TagA") == 2598919


def test_java_string_hash_long_strings_take_the_loop():
    s = "k" * 300 + "é"
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "big")) % (1 << 32)
    assert java_string_hash(s) == (h - (1 << 32) if h >= 1 << 31 else h)
    assert java_string_hash("k" * 256) == java_string_hash("k" * 255) * 31 + 107 - \
        ((java_string_hash("k" * 255) * 31 + 107 + (1 << 31)) // (1 << 32)) * (1 << 32)
