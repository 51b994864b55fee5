"""The report's layout: buckets that follow bursty data, rate axes scaled to the rates,
radar axes that carry information (or a note saying why not), and a page that works on
a phone (viewport tag, tables that scroll sideways)."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from pathlib import Path

import pytest

from trustroute import AgentRouter
from trustroute.profiles.records import ExecutionRecord, utc_now
from trustroute.profiles.store.handoffs import HandoffRepository


def section(page: str, key: str) -> str:
    return page.split(f'<section id="{key}">', 1)[1].split("</section>", 1)[0]


@pytest.fixture
def bursty(tmp_path: Path) -> str:
    """Three bursts of 30 executions, days apart: 90 tasks in 3 short spans (the coder
    fails a few of its tasks, the writer none)."""
    url = f"surrealkv://{tmp_path / 'db'}"
    now = utc_now()
    records = [ExecutionRecord(agent_id=agent, task_type="code",
                               success=agent == "writer" or i % 6 != 1,
                               quality=0.6 + 0.1 * (i % 3),
                               timestamp=now - timedelta(days=day, seconds=i))
               for day in (9, 5, 1) for i in range(30)
               for agent in ["coder" if i % 2 else "writer"]]
    with AgentRouter(["coder", "writer"], store=url, seed=0) as router:
        router.record_many(records)
    return url


def page_of(url: str, tmp_path: Path) -> str:
    with AgentRouter(store=url) as router:
        return router.report(tmp_path / "r.html").read_text(encoding="utf-8")


def test_buckets_hold_equal_task_counts_on_bursty_traffic(bursty: str, tmp_path: Path) -> None:
    routing = section(page_of(bursty, tmp_path), "routing")
    rows = re.findall(r"<tr><td class=\"l\">([^<]+)</td><td>(\d+)</td>", routing)
    counts = [int(n) for _, n in rows]
    # equal-width buckets left 7 of these 10 empty; buckets of equal counts leave none
    assert len(counts) == 10 and sum(counts) == 90 and set(counts) == {9}, rows
    starts = [start for start, _ in rows]
    assert starts == sorted(starts) and all(s.endswith("Z") for s in starts)


def test_rate_axes_are_scaled_to_the_rates(tmp_path: Path) -> None:
    url = f"surrealkv://{tmp_path / 'db'}"
    with AgentRouter(["coder"], store=url, seed=0) as router:
        for i in range(6):
            router.record(agent_id="coder", task_type="code", success=True,
                          quality=0.7 + 0.02 * i)
        repo = router.store.repository(HandoffRepository)
        for i in range(200):  # a 5% hand-off rate
            repo.record_decision(task_type="code", transferred=i % 20 == 0, confidence=0.8,
                                 insufficient=False, reason="low confidence")
    page = page_of(url, tmp_path)
    low, high = map(float, re.search(r'alt="hand-off rate over time" data-y="([^"]+)"',
                                     section(page, "handoffs")).group(1).split(","))
    assert low == 0.0 and 0.05 < high <= 0.1  # not 0 to 1: the 5% fills the chart
    q_low, q_high = map(float, re.search(r'alt="routing of code" data-y="([^"]+)"',
                                         section(page, "routing")).group(1).split(","))
    assert 0.0 < q_low <= 0.7 and 0.8 <= q_high < 1.0  # mean qualities 0.70 to 0.80


def test_radar_axes_that_do_not_differ_are_explained(bursty: str, tmp_path: Path) -> None:
    radar = section(page_of(bursty, tmp_path), "radar")
    # 45 runs each and no reviews: frequency and human are the same for both agents
    note = re.search(r'data-k="flat-axes" data-axes="([^"]+)">([^<]+)<', radar)
    assert note is not None and set(note.group(1).split(",")) == {"frequency", "human"}
    text = html.unescape(note.group(2))
    assert "no person has reviewed them" in text and "no radar is drawn" in text
    assert 'alt="trust radar of code"' not in radar
    with AgentRouter(store=bursty) as router:  # a review sets one agent apart
        router.review("coder", "code", True, "good")
    radar = section(page_of(bursty, tmp_path), "radar")
    assert 'alt="trust radar of code"' in radar
    assert 'data-axes="frequency"' in radar and "tops out" in html.unescape(radar)


def test_the_page_works_on_a_phone(bursty: str, tmp_path: Path) -> None:
    page = page_of(bursty, tmp_path)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    tables = page.count("<table")
    assert tables >= 4 and page.count('<div class="scroll"><table') == tables
    assert ".scroll{overflow-x:auto" in page
