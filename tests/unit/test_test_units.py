"""The work units `make test` schedules (tests/conftest.py): every file the CPU-heavy lists name exists
and is in one list only, so a renamed file cannot silently leave its unit and load the machine beside
the other heavy ones."""

import pathlib

from tests.conftest import CPU_HEAVY_UNITS, work_unit

TESTS_DIR = pathlib.Path(__file__).resolve().parents[1]


def test_every_heavy_file_exists_once():
    files = [file for unit in CPU_HEAVY_UNITS.values() for file in unit]
    assert len(files) == len(set(files))
    assert [file for file in files if not (TESTS_DIR / file).is_file()] == []


def test_a_heavy_file_runs_in_its_list_and_any_other_file_alone():
    assert work_unit("tests/fault/test_failover.py::test_x[a::b]") == "cpu-heavy-a"
    assert work_unit("tests/spark/test_checker.py::test_y") == "cpu-heavy-b"
    assert work_unit("tests/unit/test_acl.py::test_z") == "unit/test_acl.py"
