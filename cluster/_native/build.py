"""cffi builder for the native helper (out-of-line API mode).

setup.py runs it through ``cffi_modules``; ``pip install -e .`` (or ``make
install``) leaves ``cluster/_native/_rocketbox_native*.so`` beside this file.
For a quick rebuild by hand, from the repository root::

    .venv/bin/python cluster/_native/build.py

helper.h is both the C header and the cdef: the preprocessor lines (include
guard, includes) are dropped here, cffi reads the declarations that remain.
"""

import shutil
from pathlib import Path

import cffi

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# Relative to the repository root: setuptools runs from there and wants
# relative source paths; ffibuilder.compile below uses it as its directory.
HERE_FROM_ROOT = HERE.relative_to(ROOT).as_posix()


def declarations(header_text: str) -> str:
    return "\n".join(line for line in header_text.splitlines() if not line.lstrip().startswith("#"))


ffibuilder = cffi.FFI()
ffibuilder.cdef(declarations((HERE / "helper.h").read_text()))
ffibuilder.set_source(
    "rocketbox.cluster._native._rocketbox_native",
    '#include "helper.h"',
    sources=[f"{HERE_FROM_ROOT}/helper.c", f"{HERE_FROM_ROOT}/record_crc.c"],
    include_dirs=[HERE_FROM_ROOT],
    depends=[f"{HERE_FROM_ROOT}/helper.h", f"{HERE_FROM_ROOT}/record_crc.h"],
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
