"""The native helper's C files call down, as the Python modules import down (test_structure.py):
no two files call each other, however indirectly. crc32.c calls nothing of ours, record_crc.c only
crc32.c, and the encoder (record_write.c) and helper.c sit above them."""

from __future__ import annotations

import pathlib
import re

NATIVE = pathlib.Path(__file__).resolve().parents[2] / "cluster" / "_native"
# A function at the top level, not static: its name is the identifier before the first "(" of a
# line that starts in column 0 with a type.
_DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \*]*?\b(\w+)\(", re.MULTILINE)
_CALL = re.compile(r"\b(\w+)\s*\(")


def _without_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.DOTALL)


def _sources() -> dict[str, str]:
    return {path.name: _without_comments(path.read_text()) for path in sorted(NATIVE.glob("*.c"))
            if not path.name.startswith("_")}   # cffi's generated wrapper is not ours


def _defined(text: str) -> set[str]:
    """Functions with external linkage defined in ``text``: after the name, a "{" comes before any ";"."""
    names = set()
    for match in _DEFINITION.finditer(text):
        after = text[match.end():]
        brace, semicolon = after.find("{"), after.find(";")
        if brace >= 0 and (semicolon < 0 or brace < semicolon):
            names.add(match.group(1))
    return names


def _calls_between_files() -> dict[str, set[str]]:
    sources = _sources()
    home = {name: file for file, text in sources.items() for name in _defined(text)}
    return {file: {home[name] for name in set(_CALL.findall(text)) if home.get(name, file) != file}
            for file, text in sources.items()}


def test_the_parser_sees_each_files_functions():
    defined = {file: _defined(text) for file, text in _sources().items()}
    assert {"rb_crc32", "crc32_concat"} <= defined["crc32.c"]
    assert {"seal_record", "stored_properties_len", "rb_delivered_records"} <= defined["record_crc.c"]
    assert {"rb_encode_record", "rb_encode_batch", "rb_record_size"} <= defined["record_write.c"]
    assert {"rb_scan_records", "rb_msync_range"} <= defined["helper.c"]


def test_c_files_call_down_without_a_circle():
    calls = _calls_between_files()
    done, visiting = set(), []

    def visit(file: str) -> None:
        assert file not in visiting, f"C files calling in a circle: {visiting[visiting.index(file):] + [file]}"
        if file in done:
            return
        visiting.append(file)
        for callee in calls.get(file, ()):
            visit(callee)
        visiting.pop()
        done.add(file)

    for file in calls:
        visit(file)
    assert calls.get("crc32.c", {"missing"}) == set(), calls
    assert calls.get("record_crc.c", {"missing"}) == {"crc32.c"}, calls
    assert calls.get("record_write.c", {"missing"}) <= {"record_crc.c", "crc32.c"}, calls
    assert "record_write.c" not in calls["helper.c"], calls   # the encoder is called from Python only
