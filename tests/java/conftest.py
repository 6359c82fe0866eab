"""Fixtures of the Java-client tests (tests/java/apache.py says where the client comes from)."""

from __future__ import annotations

import pytest

from tests.java.apache import compile_programs, require_java_client


@pytest.fixture(scope="session")
def java_programs(tmp_path_factory):
    """The class directory of tests/java/programs, compiled once per session (skips without the client)."""
    require_java_client()
    return compile_programs(tmp_path_factory.mktemp("java-classes"))
