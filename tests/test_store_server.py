"""The store against a SurrealDB server, through the SDK's real WebSocket client: refused
credentials, URLs, a server that goes away and comes back, an unanswered commit, and
writers in several OS processes whose transactions conflict."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from surreal_fixtures import EXTERNAL_URL, Target
from surreal_server import available
from test_feedback_processes import read_line

from trustroute import AgentRouter
from trustroute.profiles.store import (
    DuplicateRecord,
    Store,
    StoreAuthError,
    StoreUnavailableError,
)

TESTS = Path(__file__).resolve().parent
WORKER = TESTS / "server_workers.py"
SERVER = TESTS / "surreal_server.py"




def test_wrong_password_is_one_line_auth_error(surreal: Target) -> None:
    with pytest.raises(StoreAuthError) as info:
        Store(surreal.url, **surreal.options(password="not-the-password"))
    message = str(info.value)
    assert "\n" not in message
    assert surreal.url in message and "not-the-password" not in message
    assert "store.username / store.password" in message
    if surreal.server is not None:  # refused at once: no retries, no second connection
        assert surreal.server.connections == 1


def test_credentials_from_the_environment_are_named(surreal: Target,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUSTROUTE_DB_USER", surreal.user)
    monkeypatch.setenv("TRUSTROUTE_DB_PASS", "wrong-from-env")
    with pytest.raises(StoreAuthError, match="TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS"):
        Store(surreal.url, database=surreal.database)


def test_no_credentials_says_where_they_come_from(surreal: Target,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRUSTROUTE_DB_USER", raising=False)
    monkeypatch.delenv("TRUSTROUTE_DB_PASS", raising=False)
    with pytest.raises(StoreAuthError) as info:
        Store(surreal.url, database=surreal.database)
    message = str(info.value)
    assert "\n" not in message and surreal.url in message
    assert "TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS" in message
    assert "store.username / store.password" in message


def with_userinfo(url: str, userinfo: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{userinfo}@{rest}"


def test_credentials_in_the_url_sign_in_before_settings_and_environment(
        surreal: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRUSTROUTE_DB_USER", raising=False)
    monkeypatch.delenv("TRUSTROUTE_DB_PASS", raising=False)
    url = with_userinfo(surreal.url, f"{surreal.user}:{surreal.password}")
    with Store(url, database=surreal.database) as store:
        assert store.executions.count() == 0
        assert store.url == with_userinfo(surreal.url, "***")
    monkeypatch.setenv("TRUSTROUTE_DB_USER", surreal.user)  # the URL's wrong password
    monkeypatch.setenv("TRUSTROUTE_DB_PASS", surreal.password)  # is not passed over
    with pytest.raises(StoreAuthError) as info:
        Store(with_userinfo(surreal.url, f"{surreal.user}:wr%40ng"), database=surreal.database,
              username=surreal.user, password=surreal.password)
    message = str(info.value)
    assert "check the credentials given by the store URL" in message
    assert "wr%40ng" not in message and "wr@ng" not in message
    user_only = with_userinfo(surreal.url, surreal.user)  # the password from elsewhere
    with Store(user_only, database=surreal.database) as store:
        assert store.executions.count() == 0


@pytest.mark.parametrize("suffix", ["/", "/rpc", "/rpc/"])
def test_url_with_a_trailing_slash_or_rpc_works(surreal: Target, suffix: str) -> None:
    with AgentRouter(agents=["a"], store=surreal.url + suffix,
                     store_options=surreal.options()) as router:
        router.record(router.select("code"), success=True)
        assert router.store.executions.count() == 1
        assert router.store.url == surreal.url + suffix.rstrip("/")


@pytest.mark.slow
def test_router_writes_resume_after_a_server_restart(surreal: Target) -> None:
    """The server is stopped for 2 s while a router records in a thread: the writes
    wait, the connection is re-opened, nothing acknowledged is lost."""
    server = surreal.fixture
    acked: list[str] = []
    errors: list[BaseException] = []
    with AgentRouter(agents=["a", "b"], store=surreal.url,
                     store_options=surreal.options(retry_max_wait_s=0.5)) as router:
        started = threading.Event()

        def write() -> None:
            try:
                for n in range(200):
                    rec = router.record(router.select("code"), success=True, quality=0.9)
                    acked.append(rec.record_id)
                    if n == 20:
                        started.set()
                    time.sleep(0.005)
            except BaseException as exc:  # reported below
                errors.append(exc)
                started.set()

        writer = threading.Thread(target=write)
        writer.start()
        assert started.wait(30)
        server.stop()
        time.sleep(2.0)
        server.start()
        writer.join(60)
        assert not errors and len(acked) == 200
        router.refresh()
        assert sum(p.executions_total for p in router.profiles("code")) == 200
    assert server.connections >= 2  # the router re-opened its connection
    with Store(surreal.url, **surreal.options()) as store:
        assert store.executions.stored_ids(acked) == set(acked)
        assert store.executions.count() == 200


def test_a_server_gone_past_the_budget_fails_the_call_not_the_router(
        surreal: Target) -> None:
    """Reconnecting is bounded by reconnect_timeout_s; the router still works once the
    server is back."""
    server = surreal.fixture
    with AgentRouter(agents=["a"], store=surreal.url, store_options=surreal.options(
            reconnect_timeout_s=0.5, retry_max_wait_s=0.1)) as router:
        server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as info:
            router.record(agent_id="a", task_type="code", success=True)
        assert time.monotonic() - started < 3
        assert surreal.url in str(info.value) and "0.5 s" in str(info.value)
        server.start()
        router.record(agent_id="a", task_type="code", success=True)
        assert router.store.executions.count() == 1


def test_an_unanswered_commit_is_stored_and_applied_once(surreal: Target) -> None:
    """The connection drops right after a write committed: the write is sent again on a
    new connection under the same record id, finds its own row, and the record is
    stored once and folded once (profile and trust counts), here and in a new router."""
    server = surreal.fixture
    with AgentRouter(agents=["a"], store=surreal.url,
                     store_options=surreal.options()) as router:
        router.store.reader()  # the log follower's connection, opened now for the count
        server.drop_after_commits(1)
        router.record(agent_id="a", task_type="code", success=True, record_id="r-1")
        assert router.store.executions.stored_ids(["r-1"]) == {"r-1"}
        assert router.store.executions.count() == 1
        assert router.profile("a", "code").executions_total == 1
        assert router.trust_layer.book.counts("a", "code").observations == 1
        with pytest.raises(DuplicateRecord):  # a second call with the id: a duplicate
            router.record(agent_id="a", task_type="code", success=True, record_id="r-1")
        router.record(agent_id="a", task_type="code", success=True, record_id="r-2")
        assert router.store.executions.count() == 2
        assert router.profile("a", "code").executions_total == 2
    assert server.connections == 3  # the router's, its log follower's, one re-opened
    with AgentRouter(agents=["a"], store=surreal.url, store_options=surreal.options()) as fresh:
        assert fresh.profile("a", "code").executions_total == 2
        assert fresh.trust_layer.book.counts("a", "code").observations == 2


def test_an_unanswered_review_or_signal_is_stored_and_counted_once(surreal: Target) -> None:
    """What a person or a signal says is appended under an id made before the first
    try: a write whose answer was lost is found stored and counted once."""
    server = surreal.fixture
    with AgentRouter(agents=["a"], store=surreal.url,
                     store_options=surreal.options()) as router:
        router.store.reader()  # the log follower's connection, opened now for the count
        server.drop_after_commits(1)
        router.review("a", "code", approved=True)
        server.drop_after_commits(1)
        router.signal("a", "code", "user_corrected")
        counts = router.trust_layer.book.counts("a", "code")
        assert (counts.approvals, counts.rejections) == (1, 1)
    assert server.connections == 4  # the router's, its log follower's, two re-opened
    with AgentRouter(agents=["a"], store=surreal.url, store_options=surreal.options()) as fresh:
        counts = fresh.trust_layer.book.counts("a", "code")
        assert (counts.approvals, counts.rejections) == (1, 1)


def start_workers(target: Target, files: list[Path], count: int, pause: float = 0.0,
                  together: bool = False) -> list[subprocess.Popen[str]]:
    """One worker process per file, started at once, each recording ``count`` outcomes
    (``pause`` seconds apart). ``together``: every worker opens its router at the same
    moment, once all of them are ready (on a busy machine starting Python alone can take
    seconds, and workers started at once would open one after the other)."""
    workers = [subprocess.Popen([sys.executable, str(WORKER), target.url, str(count), str(f),
                                 "--database", target.database, "--pause", str(pause),
                                 *(["--together"] if together else [])],
                                env=target.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
               for f in files]
    try:
        if together:
            for worker in workers:
                assert read_line(worker, timeout=120) == "ready"
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
    except BaseException:
        for worker in workers:
            worker.kill()
            worker.wait()
        raise
    return workers


def finish(workers: list[subprocess.Popen[str]], files: list[Path],
           timeout: float = 300) -> list[str]:
    """Wait for every worker; all must succeed. Returns every acknowledged id."""
    failures = []
    try:
        for worker in workers:
            _, err = worker.communicate(timeout=timeout)
            if worker.returncode:
                failures.append(err[-2000:])
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert not failures, failures
    return [line for f in files for line in f.read_text().split()]


def run_workers(target: Target, tmp_path: Path, processes: int, count: int) -> list[str]:
    files = [tmp_path / f"acked-{i}.txt" for i in range(processes)]
    return finish(start_workers(target, files, count, together=True), files)


@pytest.mark.slow
def test_routers_opened_at_the_same_moment_all_open(surreal_concurrent: Target,
                                                    tmp_path: Path) -> None:
    """4 processes open routers on a new database at the same instant: their schema
    definitions conflict, are retried, and every process opens and records."""
    files = [tmp_path / f"acked-{i}.txt" for i in range(4)]
    workers = start_workers(surreal_concurrent, files, count=1, together=True)
    assert len(finish(workers, files)) == 4


@pytest.mark.slow
def test_conflicting_writers_in_several_processes_are_retried(
        surreal_concurrent: Target, tmp_path: Path) -> None:
    """4 processes open routers and record at once on a server that runs them
    concurrently: schema creation and writes conflict, and every conflict is retried
    (no worker sees "This transaction can be retried"); every acknowledged record is
    stored, once."""
    acked = run_workers(surreal_concurrent, tmp_path, processes=4, count=150)
    assert len(acked) == len(set(acked)) == 600
    with Store(surreal_concurrent.url, **surreal_concurrent.options()) as store:
        assert store.executions.stored_ids(acked) == set(acked)
        assert store.executions.count() == 600
    if surreal_concurrent.server is not None:
        assert surreal_concurrent.server.conflicts > 0  # there was something to retry


def test_a_query_whose_statement_lost_a_conflict_is_retried_whole(surreal: Target) -> None:
    """Processes opening one fresh store define its schema at once. A field definition
    that loses a write conflict does not run, and the index on that field, later in the
    same query, then fails ("The field 'task_type' does not exist"). The conflict is the
    cause: the query is retried whole and the store opens with its schema complete."""
    server = surreal.fixture
    server.conflict_on("DEFINE FIELD IF NOT EXISTS task_type ON execution")
    with AgentRouter(agents=["a", "b"], store=surreal.url,
                     store_options=surreal.options()) as router:
        decision = router.select("code")
        router.record(decision, success=True, quality=0.7)
        fields = router.store.run("INFO FOR TABLE execution;")[0]["fields"]
        assert "task_type" in fields
        assert [row["task_type"] for row in router.store.run(
            "SELECT task_type FROM execution;")[0]] == ["code"]
    assert server.conflicts == 1


def server_process(port: int, storage: str, *, on_go: bool = False
                   ) -> tuple[subprocess.Popen[str], str]:
    """``python tests/surreal_server.py`` as its own process; returns it and its URL.
    ``on_go``: returns once the process is up, before it opens its storage or listens
    (the URL is ""); ``listen`` then starts it."""
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port),
                             "--storage", storage, *(["--on-go"] if on_go else [])],
                            stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.PIPE if on_go else None)
    if on_go:
        if server_line(proc) != "ready":
            pytest.fail("the test server process did not start")
        return proc, ""
    return proc, server_line(proc)


def listen(proc: subprocess.Popen[str]) -> str:
    """The URL of a server process started ``on_go``, once it listens."""
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    return server_line(proc)


def server_line(proc: subprocess.Popen[str]) -> str:
    """The next line the server process prints (waited for generously: starting Python
    on a busy machine takes seconds)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline().strip() if ready else ""
    if not line:
        proc.kill()
        proc.wait()
        pytest.fail("the test server process did not start")
    return line


def stop_process(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.slow
@pytest.mark.skipif(EXTERNAL_URL is not None or not available(),
                    reason="restarts the test server's own process")
def test_workers_finish_when_the_server_process_restarts(tmp_path: Path) -> None:
    """Worker processes record while the server process is stopped (SIGTERM) and, 2 s
    later, a new one is started on the same port and data, as a deploy restarts a
    server: every worker finishes (default retry settings) and every acknowledged
    record is stored. The new process is started (Python and its imports, seconds on a
    busy machine) before the old one stops, and told to open its data and listen 2 s
    after: the server is down for the 2 s and its own restart, as in a deploy."""
    storage = f"surrealkv://{tmp_path / 'server-data'}"
    first, url = server_process(0, storage)
    target = Target(url, "root", "root", "trustroute", None)
    files = [tmp_path / f"acked-{i}.txt" for i in range(2)]
    workers: list[subprocess.Popen[str]] = []
    second: subprocess.Popen[str] | None = None
    try:
        second, _ = server_process(int(url.rsplit(":", 1)[1]), storage, on_go=True)
        workers = start_workers(target, files, count=150, pause=0.01)
        deadline = time.monotonic() + 300  # starting them on a busy machine takes long
        # every worker is writing (a worker that opens while the server is down fails
        # after retry_attempts: that is opening, not this test's case)
        while not all(f.exists() and len(f.read_text().split()) >= 20 for f in files):
            assert time.monotonic() < deadline, "the workers did not start writing"
            assert all(w.poll() is None for w in workers), [w.poll() for w in workers]
            time.sleep(0.01)
        stop_process(first)
        written = [len(f.read_text().split()) for f in files]
        assert all(w.poll() is None for w in workers), written  # still writing
        time.sleep(2.0)
        assert listen(second) == url
        acked = finish(workers, files)
        assert len(acked) == len(set(acked)) == 300
        with Store(url, **target.options()) as store:
            assert store.executions.stored_ids(acked) == set(acked)
            assert store.executions.count() == 300
        with AgentRouter(agents=["a", "b", "c"], store=url,
                         store_options=target.options()) as fresh:
            assert sum(p.executions_total for p in fresh.profiles()) == 300
            assert sum(fresh.trust_layer.book.counts(a, "code").observations
                       for a in "abc") == 300
    finally:
        if second is not None:
            stop_process(second)
        stop_process(first)
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
