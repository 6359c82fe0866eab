"""The README's RocketMQ client example (section "RocketMQ's own clients") runs as written, in the
C++ client's venv, against a live cluster (its 127.0.0.1:9876 pointed at this cluster's door)."""

from __future__ import annotations

import re
import subprocess

from tests.remoting.cpp_client import CPP_PYTHON, REPO, require_cpp_client

SECTION = "## RocketMQ's own clients"


def _example() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", len(SECTION))]
    # The section's 4.x client example (the 5.x one, through the proxy, follows it).
    (code,) = [block for block in re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)
               if '"127.0.0.1:9876"' in block]
    return code


def test_the_readme_example_sends_and_receives(start_cluster, tmp_path):
    require_cpp_client()
    cluster = start_cluster()
    code = _example()
    assert code.count('"127.0.0.1:9876"') == 2
    script = tmp_path / "example.py"
    script.write_text(code.replace('"127.0.0.1:9876"', repr(cluster.remoting_namesrv)))
    proc = subprocess.run([str(CPP_PYTHON), str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("OK ") and len(lines[0].split()[1]) == 32
    assert lines[1] == "TagA hello from the C++ client", lines
