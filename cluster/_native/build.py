"""cffi builder for the native helper (out-of-line API mode).

setup.py runs it through ``cffi_modules``; ``pip install -e .`` (or ``make
install``) leaves ``cluster/_native/_rocketbox_native*.so`` beside this file.
For a quick rebuild by hand, from the repository root::

    .venv/bin/python cluster/_native/build.py

helper.h is both the C header and the cdef: the preprocessor lines (include
guard, includes) are dropped here, cffi reads the declarations that remain.

Before anything is compiled, ``layouts.h`` is written from the Python format modules' field tables
(the message record's in ``message/record_format.py``, the CommitLog's end-of-file blank in
``shm/commitlog_format.py``, the batch item's, the IndexFile's and the ConsumeQueue entry's, the
property separators and transaction sysFlag bits): the C side's every
offset, size and code comes from the table the Python encoder (the tests' oracle) packs with, so
the two cannot drift apart. This build script reads those pure, stdlib-only modules straight from
the checkout (``_format_modules``), not through the installed package, which a first build does
not have yet; the runtime helper itself imports nothing of the store.
"""

import importlib
import shutil
import sys
import types
from pathlib import Path

import cffi

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# Relative to the repository root: setuptools runs from there and wants
# relative source paths; ffibuilder.compile below uses it as its directory.
HERE_FROM_ROOT = HERE.relative_to(ROOT).as_posix()
SOURCES = ("helper.c", "record_write.c", "record_crc.c", "crc32.c", "send_lane.c", "lane_header.c", "h2_conn.c",
           "h2_answer.c", "h2_streams.c", "h2_hpack.c", "grpc_message.c")
HEADERS = ("helper.h", "layouts.h", "record_crc.h", "crc32.h", "bytes.h", "ranges.h", "lane_header.h", "h2_hpack.h",
           "h2_conn.h")
FORMAT_MODULES = ("message.record_format", "shm.commitlog_format", "message.batch_format", "shm.consumequeue_format",
                  "shm.indexfile_format", "message.properties", "message.sysflags")


def declarations(header_text: str) -> str:
    return "\n".join(line for line in header_text.splitlines() if not line.lstrip().startswith("#"))


def _format_modules() -> dict[str, types.ModuleType]:
    """The format modules of this checkout, imported under their installed names with an empty
    ``rocketbox.cluster`` package around them (its ``__init__`` imports the whole public API); any
    ``rocketbox`` modules already imported are put back afterwards."""
    def ours(name: str) -> bool:
        return name == "rocketbox" or name.startswith("rocketbox.")
    saved = {name: module for name, module in sys.modules.items() if ours(name)}
    for name in saved:
        del sys.modules[name]
    root = types.ModuleType("rocketbox")
    root.__path__ = []
    cluster = types.ModuleType("rocketbox.cluster")
    cluster.__path__ = [str(ROOT / "cluster")]
    sys.modules.update({"rocketbox": root, "rocketbox.cluster": cluster})
    try:
        return {name.rpartition(".")[2]: importlib.import_module(f"rocketbox.cluster.{name}")
                for name in FORMAT_MODULES}
    finally:
        for name in [name for name in sys.modules if ours(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _enum(name: str, values: dict[str, int]) -> str:
    body = ",\n".join(f"    {key} = {value}" for key, value in values.items())
    return f"enum {name} {{\n{body}\n}};\n"


def layouts_header() -> str:
    """layouts.h's text, from the format modules' tables."""
    m = _format_modules()
    rf, clf, bf = m["record_format"], m["commitlog_format"], m["batch_format"]
    cqf, ixf = m["consumequeue_format"], m["indexfile_format"]
    offsets_of = rf.offsets_of   # cluster/field_tables.py's, as every format module uses it
    record = {f"OFF_{name}": at for name, at in rf.HEAD_OFFSETS.items()}
    record.update(RECORD_HEAD_BYTES=rf.HEAD_SIZE, RECORD_FIXED_BYTES=rf.FIXED_SIZE, BLANK_BYTES_MIN=clf.BLANK_SIZE_MIN,
                  TOPIC_BYTES_MAX=rf.TOPIC_LENGTH_MAX, PROPERTIES_BYTES_MAX=rf.PROPERTIES_LENGTH_MAX,
                  RECORD_CRC_BYTES=rf.RECORD_CRC_SIZE, RECORD_CRC_DIGITS=rf.RECORD_CRC_DIGITS)
    item = {f"ITEM_OFF_{name}": at for name, at in offsets_of(bf.ITEM_HEAD_FIELDS).items()}
    item.update(ITEM_OFF_BODY=bf.ITEM_HEAD.size, ITEM_FIXED_BYTES=bf.ITEM_FIXED_SIZE)
    index = {"IX_HEADER_BYTES": ixf.HEADER_SIZE, "IX_SLOT_BYTES": ixf.SLOT_SIZE, "IX_ENTRY_BYTES": ixf.ENTRY_SIZE}
    index.update({f"IX_OFF_{name}": at for name, at in offsets_of(ixf.HEADER_FIELDS).items()})
    index.update({f"IX_ENTRY_OFF_{name}": at for name, at in offsets_of(ixf.ENTRY_FIELDS).items()})
    index["IX_CHAIN_STEPS_MAX"] = ixf.LOOKUP_CHAIN_STEPS_MAX
    cq = {"CQ_ENTRY_BYTES": cqf.ENTRY_SIZE, **{f"CQ_OFF_{name}": at for name, at in offsets_of(cqf.ENTRY_FIELDS).items()}}
    props, flags = m["properties"], m["sysflags"]
    codes = {"PROPERTY_NAME_VALUE_SEPARATOR": ord(props.NAME_VALUE_SEPARATOR),
             "PROPERTY_SEPARATOR": ord(props.PROPERTY_SEPARATOR),
             "SYSFLAG_TRANSACTION_PREPARED": flags.SYSFLAG_TRANSACTION_PREPARED,
             "SYSFLAG_TRANSACTION_ROLLBACK": flags.SYSFLAG_TRANSACTION_ROLLBACK,
             "SYSFLAG_TRANSACTION_MASK": flags.SYSFLAG_TRANSACTION_MASK}
    crc_name = props.PROPERTY_CRC32
    if not crc_name.isascii() or '"' in crc_name or "\\" in crc_name:
        raise ValueError(f"PROPERTY_CRC32 {crc_name!r} cannot be written as a C string literal as it is")
    return "".join([
        "/* GENERATED by cluster/_native/build.py from the Python format modules' tables: do not edit\n"
        " * (change the table; the next build writes this again). */\n",
        "#ifndef ROCKETBOX_LAYOUTS_H\n#define ROCKETBOX_LAYOUTS_H\n\n",
        f"#define RECORD_MAGIC 0x{rf.MAGIC:08X}u\n#define BLANK_MAGIC 0x{clf.BLANK_MAGIC:08X}u\n",
        f"#define BODY_CRC_MASK 0x{0x7FFFFFFF:08X}u\n#define RECORD_CRC_MASK 0x{rf.RECORD_CRC_MASK:08X}u\n",
        f'#define PROPERTY_CRC32_NAME "{crc_name}"\n\n',
        "/* The message record (big-endian): record_format.RECORD_HEAD_FIELDS; the CommitLog's blank:\n"
        " * commitlog_format. */\n",
        _enum("rb_record_layout", record),
        "\n/* The batch item: batch_format.ITEM_HEAD_FIELDS. */\n", _enum("rb_item_layout", item),
        "\n/* The IndexFile: indexfile_format.HEADER_FIELDS, ENTRY_FIELDS. */\n", _enum("rb_index_layout", index),
        "\n/* The ConsumeQueue entry: consumequeue_format.ENTRY_FIELDS. */\n", _enum("rb_cq_layout", cq),
        "\n/* The properties' separators and the transaction bits of SYSFLAG (cluster/message/). */\n",
        _enum("rb_record_codes", codes),
        "\n#endif\n",
    ])


def write_layouts_header() -> None:
    text = layouts_header()
    path = HERE / "layouts.h"
    if not path.exists() or path.read_text() != text:   # unchanged: leave its time alone (no rebuild)
        path.write_text(text)


write_layouts_header()
ffibuilder = cffi.FFI()
ffibuilder.cdef(declarations((HERE / "layouts.h").read_text()) + "\n" + declarations((HERE / "helper.h").read_text()))
ffibuilder.set_source(
    "rocketbox.cluster._native._rocketbox_native",
    '#include "helper.h"',
    sources=[f"{HERE_FROM_ROOT}/{name}" for name in SOURCES],
    include_dirs=[HERE_FROM_ROOT],
    depends=[f"{HERE_FROM_ROOT}/{name}" for name in HEADERS],
    extra_compile_args=["-O2", "-std=gnu11"],
)

if __name__ == "__main__":
    # cffi lays its output out by the module's installed name (rocketbox/cluster/_native/ under
    # the root); the checkout keeps the library beside this file, where setup.py's build puts it.
    built = Path(ffibuilder.compile(tmpdir=str(ROOT), verbose=True))
    for stale in HERE.glob("_rocketbox_native*.so"):   # an older build under another suffix would load first
        stale.unlink()
    shutil.move(built, HERE / built.name)
    shutil.rmtree(ROOT / "rocketbox")
