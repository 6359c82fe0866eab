"""What ``pip install rocketbox`` puts into site-packages: one top-level name, ``rocketbox``.

The checkout keeps its directories (cluster/, spark/, perf/); the wheel maps them to
rocketbox.cluster, rocketbox.spark and rocketbox.perf, so nothing is installed under a bare name
another distribution owns (``perf`` is one on PyPI). The wheel is built offline from this checkout
(no build isolation: setuptools and cffi come from the test environment).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")   # keeps build/ and *.egg-info out of the checkout
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-w", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=240, cwd=build)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = out.glob("rocketbox-*.whl")
    return built


def test_the_wheel_installs_one_top_level_name(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top_level_txt = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        declared = archive.read(top_level_txt).decode().split()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"rocketbox"}
    assert declared == ["rocketbox"]
    for expected in ("rocketbox/cluster/broker/send.py", "rocketbox/cluster/message/record_format.py",
                     "rocketbox/spark/datasource.py", "rocketbox/perf/runner.py",
                     # the console's package data
                     "rocketbox/cluster/console/templates/base.html", "rocketbox/cluster/console/static/console.js"):
        assert expected in names
    assert any(n.startswith("rocketbox/cluster/_native/_rocketbox_native") and n.endswith(".so") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        declared_entry_points = archive.read(entry_points).decode()
    assert "cluster = rocketbox.cluster.cli:run" in declared_entry_points
    assert "[pytest11]\nrocketbox = rocketbox.cluster.pytest_plugin" in declared_entry_points   # the pytest plugin


def test_the_installed_package_imports_from_the_wheel_alone(wheel, tmp_path):
    """Unpacked into a directory of its own, the wheel's modules and native helper import by the
    installed name, and the checkout's bare names are not there to be found."""
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    code = (
        "import sys, importlib.util\n"
        f"sys.path[:0] = [{str(target)!r}]\n"
        "from rocketbox.cluster import _native\n"
        "from rocketbox.cluster.message import record_format\n"
        "import rocketbox.cluster\n"
        "print(rocketbox.cluster.__file__)\n"
        "print(_native.lib.__class__.__name__, record_format.__name__)\n"
        "print([name for name in ('cluster', 'spark', 'perf') if importlib.util.find_spec(name)])\n"
    )
    # -S: no site-packages (so no editable install of the checkout); cffi's backend is added by hand.
    cffi_backend_dir = pathlib.Path(__import__("_cffi_backend").__file__).parent
    proc = subprocess.run([sys.executable, "-S", "-P", "-c", f"import sys; sys.path.append({str(cffi_backend_dir)!r})\n" + code],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    file_line, native_line, bare_line = proc.stdout.splitlines()
    assert file_line.startswith(str(target / "rocketbox" / "cluster"))
    assert native_line.endswith("rocketbox.cluster.message.record_format")
    assert bare_line == "[]"
