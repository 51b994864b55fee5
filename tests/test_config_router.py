"""AgentRouter.from_config: a config file becomes a working router."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustroute.router import AgentRouter, NoAgentAvailable
from trustroute.router.config import ConfigError, RouterConfig, load_config
from trustroute.router.config.example import EXAMPLE_CONFIG

REPO = Path(__file__).resolve().parents[1]


def test_from_config_routes_records_and_persists(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("store: surrealkv://state/db\nseed: 1\n"
                    "agents:\n  - coder\n  - {id: writer, task_types: [writing]}\n"
                    "profiles: {confidence_ramp: 4}\n")
    with AgentRouter.from_config(path) as r:
        assert set(r.agents) == {"coder", "writer"}
        assert r.select("code").agent_id == "coder"  # writer does not accept code
        with pytest.raises(NoAgentAvailable, match="'poetry'"):
            r.select("poetry", exclude=["coder"])
        r.record(agent_id="coder", task_type="code", success=True, quality=0.8)
        assert r.profile("coder", "code").confidence == 0.25  # ramp of 4 from the file
    assert (tmp_path / "state" / "db").exists()  # relative to the file, not the cwd
    with AgentRouter.from_config(str(path)) as again:
        assert again.profile("coder", "code").executions_total == 1


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "router.toml"
    path.write_text('agents = ["a"]\nseed = 3\n[store]\nurl = "surrealkv://never"\n')
    with AgentRouter.from_config(path, store="mem://", agents=["x", "y"]) as r:
        assert set(r.agents) == {"x", "y"}
        assert r.store.url == "mem://"
    assert not (tmp_path / "never").exists()


def test_bad_strategy_params_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "router.json"
    path.write_text('{"store": "mem://", "strategy": {"params": {"no_such_knob": 1}}}')
    with pytest.raises(ConfigError) as info:
        AgentRouter.from_config(path)
    assert str(info.value).startswith(f"{path}: strategy.params: ")
    assert "no_such_knob" in str(info.value)


def test_example_config_is_valid_and_mirrors_init(monkeypatch: pytest.MonkeyPatch) -> None:
    example = REPO / "examples" / "router.yaml"
    assert example.read_text(encoding="utf-8") == EXAMPLE_CONFIG
    monkeypatch.delenv("TRUSTROUTE_STORE", raising=False)
    config = load_config(example)
    assert config.store.url == f"surrealkv://{(example.parent / '.trustroute' / 'db').resolve()}"
    assert [a.id for a in config.agents] == ["generalist", "coder", "writer", "analyst",
                                             "budget"]
    assert config.profiles.confidence_ramp == 20
    # what `trustroute init` writes as active settings are the library's defaults, so a
    # user's file pins nothing the defaults would not say (a changed default fails here)
    defaults = RouterConfig()
    for section in ("profiles", "limits", "strategy", "unknown_agents"):
        assert getattr(config, section) == getattr(defaults, section), section
    assert (config.store.namespace, config.store.database) == (
        defaults.store.namespace, defaults.store.database)
    monkeypatch.setenv("TRUSTROUTE_STORE", "mem://")
    with AgentRouter.from_config(example) as r:
        assert r.store.url == "mem://"
        assert "writer" in r.select("support").ranking
        assert "writer" not in r.select("code").ranking
