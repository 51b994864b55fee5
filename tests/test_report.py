"""``trustroute report``: one self-contained HTML page, numbers equal to the other
commands', pictures that decode, empty sections that explain themselves."""

from __future__ import annotations

import base64
import html
import os
import re
import struct
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.cli_helpers import run
from trustroute import AgentRouter
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.report import PLOT_HINT, SECTIONS

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def section(page: str, key: str) -> str:
    """The HTML of one section."""
    found = re.search(rf'<section id="{key}">(.*?)</section>', page, re.S)
    assert found, f"section {key} missing"
    return found.group(1)


def cells(html: str, key: str) -> list[str]:
    """The texts of the cells named ``key`` (``data-k``), in order."""
    return re.findall(rf'data-k="{key}"[^>]*>([^<]*)<', html)


def png_size(b64: str) -> tuple[int, int]:
    """Width and height of a base64 PNG (asserts the signature)."""
    raw = base64.b64decode(b64, validate=True)
    assert raw[:8] == PNG_SIGNATURE
    assert raw[12:16] == b"IHDR"
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


@pytest.fixture
def demo_store(kv_url: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert run(capsys, "demo", "--store", kv_url, "--tasks", "80").code == 0
    return kv_url


def report(capsys: pytest.CaptureFixture[str], url: str, out: Path, *extra: str) -> str:
    result = run(capsys, "report", "--store", url, "--out", str(out), *extra)
    assert result.code == 0, result.err
    assert str(out) in result.out.replace("\n", "")
    return out.read_text(encoding="utf-8")


def test_report_after_the_demo_has_all_six_sections_with_pictures(
        demo_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = report(capsys, demo_store, tmp_path / "report.html")
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    for key in SECTIONS:
        body = section(page, key)
        assert "<table" in body or 'class="empty"' in body, key
    for key in ("leaderboard", "routing", "radar", "trend", "calibration"):
        assert 'class="empty"' not in section(page, key), key
    assert "no hand-off decisions logged yet" in section(page, "handoffs")
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    # routing and trend per task type + reliability; a radar where its axes differ,
    # otherwise a note that says which do not
    radar = section(page, "radar")
    assert radar.count('alt="trust radar of') + radar.count('data-k="flat-axes"') >= 4
    assert len(images) >= 4 * 2 + 1 + radar.count('alt="trust radar of')
    for b64 in images:
        width, height = png_size(b64)
        assert 200 <= width <= 2000 and 200 <= height <= 2000
    assert PLOT_HINT not in html.unescape(page)


def test_leaderboard_numbers_equal_profiles_json(
        demo_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profiles = run(capsys, "profiles", "--store", demo_store, "--json").json()
    board = section(report(capsys, demo_store, tmp_path / "r.html"), "leaderboard")
    for key in ("success_rate", "avg_quality", "expertise", "confidence", "adjusted_score"):
        assert cells(board, key) == [f"{p[key]:.3f}" for p in sorted(
            profiles, key=lambda p: p["task_type"])], key
    assert cells(board, "executions_total") == [
        str(p["executions_total"]) for p in sorted(profiles, key=lambda p: p["task_type"])]
    trust = {(t["agent_id"], t["task_type"]): t for t in
             run(capsys, "trust", "--store", demo_store, "--json").json()}
    ordered = sorted(profiles, key=lambda p: p["task_type"])
    assert cells(board, "tier") == [trust[p["agent_id"], p["task_type"]]["tier"]
                                    for p in ordered]
    shares = [float(s.rstrip("%")) for s in cells(board, "share")]
    assert sum(shares) == pytest.approx(100 * 4, abs=0.5)  # each task type sums to 100%


def test_calibration_numbers_equal_calibration_json(
        demo_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = run(capsys, "calibration", "--store", demo_store, "--json").json()
    body = section(report(capsys, demo_store, tmp_path / "r.html"), "calibration")
    assert cells(body, "ece") == [f"{expected['ece']:.4f}"]
    assert cells(body, "brier") == [f"{expected['brier']:.4f}"]
    assert cells(body, "decisions") == [str(expected["decisions"])]
    assert cells(body, "with_outcome") == [str(expected["with_outcome"])]
    rows = expected["reliability"]
    assert cells(body, "bucket") == [r["bucket"] for r in rows]
    assert cells(body, "predicted") == [f"{r['predicted']:.3f}" for r in rows]
    assert cells(body, "realised") == [f"{r['realised']:.3f}" for r in rows]
    assert cells(body, "count") == [str(r["count"]) for r in rows]


def test_an_empty_store_gives_a_report_that_explains_itself(
        kv_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = report(capsys, kv_url, tmp_path / "empty.html")
    for key in SECTIONS:
        assert 'class="empty"' in section(page, key), key
    assert "no feedback yet" in section(page, "calibration")
    assert "no profiles yet" in section(page, "leaderboard")
    assert "<img" not in page


def test_without_matplotlib_the_tables_render_with_the_hint(
        demo_store: str, tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['matplotlib'] = None\n")
    out = tmp_path / "tables.html"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(hide), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(
        [sys.executable, "-m", "trustroute.router.cli.app", "report", "--store", demo_store,
         "--out", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert PLOT_HINT in done.stdout
    page = out.read_text(encoding="utf-8")
    assert PLOT_HINT in html.unescape(page) and "<img" not in page
    for key in ("leaderboard", "routing", "radar", "trend", "calibration"):
        assert "<table" in section(page, key), key


def test_python_twin_returns_the_path_and_filters_by_task_type(
        demo_store: str, tmp_path: Path) -> None:
    with AgentRouter(store=demo_store) as router:
        path = router.report(tmp_path / "sub" / "code.html", task_type="code")
    assert path == tmp_path / "sub" / "code.html"
    board = section(path.read_text(encoding="utf-8"), "leaderboard")
    assert re.findall(r'data-task-type="([^"]*)"', board) == ["code"]


def test_report_out_in_a_missing_folder_is_an_error_that_makes_nothing(
        kv_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "no" / "such" / "r.html"
    result = run(capsys, "report", "--store", kv_url, "--out", str(out))
    assert result.code == 2
    assert result.error_line == f"--out {out}: the folder {out.parent} does not exist"
    assert not (tmp_path / "no").exists()


def test_since_in_the_future_leaves_the_charts_over_time_empty(
        demo_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = report(capsys, demo_store, tmp_path / "r.html", "--since", "2999-01-01")
    assert "since the given date" in section(page, "routing")
    assert "<table" in section(page, "leaderboard")  # the whole store, as `profiles`


def test_times_at_the_ends_of_the_calendar_still_draw(
        kv_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the store accepts any time from year 1 (an import) and a decay run as of any
    # later moment; matplotlib's axes end at years 1 and 9999
    with AgentRouter(["a", "b"], store=kv_url) as router:
        router.record(agent_id="a", task_type="t", success=True, quality=0.8)
        router.record(agent_id="b", task_type="t", success=False,
                      timestamp=datetime(1, 1, 1, tzinfo=UTC))
        router.decay(now=datetime(9999, 12, 31, tzinfo=UTC))
    page = report(capsys, kv_url, tmp_path / "r.html")
    assert "<img" in section(page, "trend")


def test_names_with_dollar_signs_are_drawn_as_written(
        kv_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # matplotlib reads $...$ as math: 'price_$5_or_$6' failed the whole report
    names = ["price_$5_or_$6", "a$_$b"]
    with AgentRouter(names, store=kv_url) as router:
        for name in names:
            router.record(agent_id=name, task_type="t$^$", success=True, quality=0.8)
    page = report(capsys, kv_url, tmp_path / "r.html")
    assert "<img" in section(page, "routing") and "<img" in section(page, "trend")
    assert "price_$5_or_$6" in html.unescape(page)


def test_a_bad_since_is_one_error_line(
        kv_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "report", "--store", kv_url, "--out", str(tmp_path / "r.html"),
                 "--since", "last tuesday")
    assert result.code == 2
    assert "--since" in result.error_line
    assert not (tmp_path / "r.html").exists()


def test_handoffs_show_rate_pending_and_reasons(
        kv_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with AgentRouter(store=kv_url) as router:
        log = router.store.repository(HandoffRepository)
        for i in range(4):
            log.record_decision(task_type="support", transferred=i % 2 == 0,
                                confidence=0.3, insufficient=False, reason="low retrieval")
        log.save_pending({"request_id": "r1", "reason": "low retrieval",
                          "task_type": "support"}, hook="webhook", error="down", attempts=1)
    body = section(report(capsys, kv_url, tmp_path / "h.html"), "handoffs")
    assert cells(body, "pending") == ["1"]
    assert "50.0%" in body and "low retrieval" in body
    assert "<img" in body
