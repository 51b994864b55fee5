"""Numbers longer than Python reads from text (4,300 digits) are one line naming the key.

Python refuses to convert a decimal string of more than ``sys.get_int_max_str_digits()``
digits to an int, and an int that long to a string: left alone, that ValueError reached
the user as "Exceeds the limit (4300 digits) for integer string conversion", naming
neither the file nor the key, and an error message that quoted such a number failed
while being written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_helpers import isolate, run

from trustroute import AgentRouter, InvalidRecord
from trustroute.router.config import ConfigError, load_config

LIMIT = sys.get_int_max_str_digits()
HUGE = "9" * (LIMIT + 700)


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate(tmp_path, monkeypatch)


CONFIGS = {
    "router.yaml": f"store: mem://\nagents:\n  - {{id: a, max_concurrent: {HUGE}}}\n",
    "router.toml": f'store = "mem://"\n[[agents]]\nid = "a"\nmax_concurrent = {HUGE}\n',
    "router.json": f'{{"store": "mem://", "agents": [{{"id": "a", "max_concurrent": {HUGE}}}]}}',
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_config_number_past_the_limit_names_file_and_key(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(CONFIGS[name])
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message == (f"{path}: agents.0.max_concurrent: a number of {len(HUGE):,} digits; "
                       f"at most {LIMIT:,} are read")


def test_a_negative_huge_number_and_the_cli(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    (tmp_path / "router.yaml").write_text(f"store: mem://\nseed: -{HUGE}\n")
    result = run(capsys, "profiles")
    assert result.code == 2
    assert result.error_line == (f"router.yaml: seed: a number of {len(HUGE):,} digits; "
                                 f"at most {LIMIT:,} are read")


def test_a_huge_number_in_a_toml_string_is_left_to_validation(tmp_path: Path) -> None:
    path = tmp_path / "router.toml"
    path.write_text(f'store = "mem://"\nagents = ["{HUGE}"]\nseed = {HUGE}\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (f"{path}: seed: a number of {len(HUGE):,} digits; "
                               f"at most {LIMIT:,} are read")


def test_replay_param_past_the_limit_names_the_param(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    (tmp_path / "log.csv").write_text("agent,task_type,task,quality\na,code,t1,0.5\n")
    result = run(capsys, "replay", "log.csv", "-n", "1", "-S", "thompson",
                 "-p", f"half_life_executions={HUGE}")
    assert result.code == 2
    assert result.error_line == (
        f"--param 'half_life_executions={HUGE[:20]}...': VALUE is a number of "
        f"{len(HUGE):,} digits; at most {LIMIT:,} are read")


def test_cli_number_options_past_the_limit_are_one_short_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "log.csv").write_text("agent,task_type,task,quality\na,code,t1,0.5\n")
    for argv in (("replay", "log.csv", "--runs", HUGE), ("replay", "log.csv", "--seed", HUGE),
                 ("record", "a", "t", "--success", "--latency-ms", HUGE, "-s", "surrealkv://db")):
        result = run(capsys, *argv)
        assert result.code == 2
        assert len(result.error_line) < 300, argv


def test_api_errors_that_quote_a_huge_int_are_one_line() -> None:
    huge = 10 ** len(HUGE) - 1  # int(HUGE) is refused: it is past the limit
    with pytest.raises(ValueError) as info:
        AgentRouter(agents=[{"id": "a", "max_concurrent": -huge}], store="mem://")
    assert str(info.value).endswith(f"got a number of {len(HUGE):,} digits")
    with AgentRouter(agents=["a"], store="mem://") as router, \
            pytest.raises(InvalidRecord) as bad:
        router.record(agent_id="a", task_type="t", success=True, metadata={"n": huge})
    assert str(bad.value) == (f"metadata: metadata.n: integer of {len(HUGE):,} digits "
                              "does not fit in 64 bits")


PROBLEM = f"a number of {len(HUGE):,} digits; at most {LIMIT:,} are read"


def test_row_files_name_the_line_and_key_of_a_huge_number(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    store = ["-s", "surrealkv://db"]
    cases = [
        ("import", '{"agent_id": "a", "task_type": "t", "success": true, "quality": %s}',
         f"log.jsonl: line 1: quality: {PROBLEM}"),
        ("import", '{"agent_id": "a", "task_type": "t", "success": true, '
                   '"metadata": {"run": {"n": [1, %s]}}}',
         f"log.jsonl: line 1: metadata.run.n.1: {PROBLEM}"),
        ("replay", '{"agent": "a", "task_type": "t", "task": "x", "quality": %s}',
         f"log.jsonl:1: quality: {PROBLEM}"),
        ("import-feedback", '{"run_id": "r1", "score": %s}',
         f"log.jsonl:1: score: {PROBLEM}"),
    ]
    for command, row, said in cases:
        (tmp_path / "log.jsonl").write_text(row % HUGE + "\n")
        result = run(capsys, command, "log.jsonl", *(store if command != "replay" else ()))
        assert result.code == 2
        assert result.error_line == said
    (tmp_path / "log.csv").write_text(
        f'agent_id,task_type,success,metadata\na,t,true,"{{""n"": {HUGE}}}"\n')
    result = run(capsys, "import", "log.csv", *store)
    assert result.error_line == f"log.csv: line 2: metadata: n: {PROBLEM}"
    assert not (tmp_path / "db").exists()  # refused before the store was opened


def test_long_cells_are_clipped_where_an_error_quotes_them(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junk = "x" * 5000
    for command, text in (
            ("import", f"agent_id,task_type,success,quality\na,t,true,{junk}\n"),
            ("import", f"agent_id,task_type,success\na,t,{junk}\n"),
            ("import-feedback", f"run_id,score\nr1,{junk}\n"),
            ("import-feedback", f"run_id,score\nr1,{HUGE}\n")):
        (tmp_path / "log.csv").write_text(text)
        result = run(capsys, command, "log.csv", "-s", "surrealkv://db")
        assert result.code == 2
        assert len(result.error_line) < 200, result.error_line[:300]
        assert "(5,000 characters)" in result.error_line
    (tmp_path / "log.csv").write_text(f"agent_id,task_type,success,timestamp\na,t,true,{HUGE}\n")
    result = run(capsys, "import", "log.csv", "-s", "surrealkv://db")
    assert result.error_line == "log.csv: line 2: timestamp: 9999999999999999... POSIX seconds " \
                                "is out of range"


def test_any_error_quoting_a_long_value_quotes_it_cut(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    long_name = "a" * 5000
    assert run(capsys, "record", "a", "t", "--success", "-s", "surrealkv://db").code == 0
    for argv in (("route", "t", "--exclude", long_name), ("route", "t", "--strategy", long_name),
                 ("profiles", "--store", long_name), ("handoffs", "--resolve", long_name)):
        result = run(capsys, *argv, *(("-s", "surrealkv://db") if "--store" not in argv
                                      else ()))
        assert result.code == 2
        assert f"'{'a' * 40}...' (5,000 characters)" in result.error_line, argv
        assert len(result.error_line) < 400, argv


def test_router_arguments_of_a_huge_int_are_named(tmp_path: Path) -> None:
    huge = -(10 ** len(HUGE) - 1)
    calls = {"seed": lambda: AgentRouter(agents=["a"], store="mem://", seed=huge),
             "strategy": lambda: AgentRouter(agents=["a"], store="mem://", strategy=huge),
             "unknown_agents": lambda: AgentRouter(agents=["a"], store="mem://",
                                                   unknown_agents=huge)}
    for name, call in calls.items():
        with pytest.raises((ValueError, TypeError)) as info:
            call()
        assert str(info.value).startswith(name), str(info.value)[:100]
        assert str(info.value).endswith(f"a number of {len(HUGE):,} digits")
    with AgentRouter(agents=["a"], store="mem://") as router:
        with pytest.raises(TypeError, match=f"^exclude must be .*a number of {len(HUGE):,}"):
            router.select("t", exclude=huge)
        with pytest.raises(TypeError, match=f"^since must be .*a number of {len(HUGE):,}"):
            router.report(tmp_path / "r.html", since=huge)
