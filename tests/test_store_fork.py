"""A router opened before ``os.fork()`` and used in the child raises a clear error, in a
child that then exits normally (it used to hang forever); the parent is unaffected.

The fork happens in a fresh Python process (never in the test runner, whose threads a
child would inherit), which reports what its child saw as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from surreal_fixtures import Target

from trustroute.profiles.store import Store

FORK_SCRIPT = r"""
import json, os, sys, time
from trustroute import AgentRouter
from trustroute.profiles.store import StoreForkedError

url, options = sys.argv[1], json.loads(sys.argv[2])
router = AgentRouter(agents=["a", "b"], store=url, store_options=options)
router.record(router.select("code"), success=True)
read, write = os.pipe()
pid = os.fork()
if pid == 0:  # the child uses what its parent opened, then exits the ordinary way
    os.close(read)
    report = {}
    for what, use in [
        ("record", lambda: router.record(router.select("code"), success=True)),
        ("new_embedded", lambda: AgentRouter(agents=["a"], store="mem://").close()),
        ("close", router.close),
    ]:
        try:
            use()
            report[what] = "ok"
        except StoreForkedError as exc:
            report[what] = str(exc)
    os.write(write, json.dumps(report).encode())
    sys.exit(0)
os.close(write)
deadline = time.monotonic() + 20
while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print(json.dumps({"child": "hung"}))
        sys.exit(0)
    time.sleep(0.02)
report = json.loads(os.read(read, 1 << 16) or b"{}")
report["child"] = done[1]
router.record(router.select("code"), success=True)  # the parent goes on as before
report["parent_count"] = router.store.executions.count()
router.close()
print(json.dumps(report))
"""



def fork_and_report(url: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", FORK_SCRIPT, url, json.dumps(options or {})],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def assert_says_open_after_fork(message: str) -> None:
    assert "os.fork()" in message and "after the fork" in message
    assert "docs/deploy.md" in message and "\n" not in message


def test_embedded_store_used_after_fork_raises(tmp_path: Path) -> None:
    url = f"surrealkv://{tmp_path / 'db'}"
    report = fork_and_report(url)
    assert report["child"] == 0  # exited normally, no hang
    assert_says_open_after_fork(report["record"])
    assert_says_open_after_fork(report["close"])  # close flushes, which is a use
    # the engine of the parent cannot run in the child at all, even for a new store
    assert "engine" in report["new_embedded"]
    assert_says_open_after_fork(report["new_embedded"])
    assert report["parent_count"] == 2
    with Store(url) as store:  # the child did not keep the path lock
        assert store.executions.count() == 2


def test_server_store_used_after_fork_raises(surreal: Target) -> None:
    report = fork_and_report(surreal.url, surreal.options())
    assert report["child"] == 0
    assert_says_open_after_fork(report["record"])
    assert report["new_embedded"] == "ok"  # no engine ran in the parent
    # the child's exit did not close the parent's WebSocket session
    assert report["parent_count"] == 2
