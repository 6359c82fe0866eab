"""The work units `make test` schedules (tests/conftest.py): every file the CPU-heavy lists name exists
and is in one list only, so a renamed file cannot silently leave its unit and load the machine beside
the other heavy ones."""

import pathlib

from tests.conftest import CPU_HEAVY_UNITS

TESTS_DIR = pathlib.Path(__file__).resolve().parents[1]


def test_every_heavy_file_exists_once():
    files = [file for unit in CPU_HEAVY_UNITS.values() for file in unit]
    assert len(files) == len(set(files))
    assert [file for file in files if not (TESTS_DIR / file).is_file()] == []
