"""Config files: the three formats, ${ENV} substitution, and errors that say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustroute.router.config import ConfigError, RouterConfig, load_config
from trustroute.router.config.loader import read_mapping

SAME_CONFIG = {
    "router.yaml": """
store: mem://
seed: 7
agents:
  - coder
  - id: writer
    task_types: [writing, support]
    max_concurrent: 2
    cost_per_call: 0.01
strategy:
  name: confidence_weighted
profiles:
  confidence_ramp: 10
  recency: {time_constant_days: 3.5, boost: 2}
""",
    "router.toml": """
store = "mem://"
seed = 7
agents = [
  "coder",
  {id = "writer", task_types = ["writing", "support"], max_concurrent = 2, cost_per_call = 0.01},
]
[strategy]
name = "confidence_weighted"
[profiles]
confidence_ramp = 10
recency = {time_constant_days = 3.5, boost = 2}
""",
    "router.json": """
{"store": "mem://", "seed": 7,
 "agents": ["coder", {"id": "writer", "task_types": ["writing", "support"],
                      "max_concurrent": 2, "cost_per_call": 0.01}],
 "strategy": {"name": "confidence_weighted"},
 "profiles": {"confidence_ramp": 10, "recency": {"time_constant_days": 3.5, "boost": 2}}}
""",
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message, "config errors are one line"
    assert message.startswith(f"{path}: "), "config errors name the file first"
    return message[len(f"{path}: "):]


@pytest.mark.parametrize("name", sorted(SAME_CONFIG))
def test_yaml_toml_and_json_mean_the_same_config(tmp_path: Path, name: str) -> None:
    config = load_config(write(tmp_path, name, SAME_CONFIG[name]))
    assert config.store.url == "mem://"
    assert config.seed == 7
    assert [a.id for a in config.agents] == ["coder", "writer"]
    assert config.agents[0].task_types == ("*",)
    writer = config.agents[1]
    assert writer.task_types == ("writing", "support")
    assert (writer.max_concurrent, writer.cost_per_call) == (2, 0.01)
    settings = config.profiles
    assert settings.confidence_ramp == 10
    assert settings.recency.time_constant_days == 3.5
    assert settings.recency.boost == 2.0
    assert settings.recency.boost_window_days == 7.0  # untouched keys keep the reference value


@pytest.mark.parametrize(("name", "text"), [("router.yaml", "# nothing set\n"),
                                            ("router.toml", ""), ("router.json", ""),
                                            ("router.json", " \n")])
def test_empty_file_is_all_defaults(tmp_path: Path, name: str, text: str) -> None:
    config = load_config(write(tmp_path, name, text))
    assert config.agents == []
    assert config.profiles.confidence_ramp == 20
    assert config.profiles.recency.window_size == 100
    assert config.store.url == f"surrealkv://{(tmp_path / '.trustroute' / 'db').resolve()}"


def test_env_substitution_with_defaults_and_escapes(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TR_USER", "router-bot")
    monkeypatch.setenv("TR_PASS", "s3cret;' DELETE")
    monkeypatch.setenv("TR_LIMIT", "3")
    monkeypatch.setenv("TR_EMPTY", "")
    monkeypatch.delenv("TR_UNSET", raising=False)
    path = write(tmp_path, "router.yaml", """
store:
  url: ws://db.internal:8000
  username: ${TR_USER}
  password: ${TR_PASS}
  namespace: ${TR_UNSET:-team}-${TR_EMPTY:-prod}
  database: literal-$${TR_USER}
agents:
  - {id: a, max_concurrent: "${TR_LIMIT}", enabled: "${TR_UNSET:-true}"}
""")
    config = load_config(path)
    assert config.store.username == "router-bot"
    assert config.store.password == "s3cret;' DELETE"
    assert config.store.namespace == "team-prod"  # unset and empty both take the default
    assert config.store.database == "literal-${TR_USER}"
    assert config.agents[0].max_concurrent == 3  # substituted text validated as a number
    assert config.agents[0].enabled is True
    assert "s3cret" not in repr(config.store)


def test_missing_env_var_names_file_key_and_variable(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TR_MISSING_TOKEN", raising=False)
    path = write(tmp_path, "router.toml",
                 'agents = ["a"]\n[store]\nurl = "ws://h:8000"\npassword = "${TR_MISSING_TOKEN}"\n')
    message = error_of(path)
    assert message.startswith("store.password: environment variable TR_MISSING_TOKEN is not set")


def test_env_var_in_list_names_the_index(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TR_AGENT", raising=False)
    path = write(tmp_path, "router.json", '{"agents": ["a", "${TR_AGENT}"]}')
    assert error_of(path).startswith("agents.1: environment variable TR_AGENT is not set")


@pytest.mark.parametrize(("text", "expected"), [
    ("stor: mem://\n", "stor: unknown key 'stor' (did you mean 'store'?); allowed here: "),
    ("agents:\n  - id: a\n    max_concurent: 3\n",
     "agents.0.max_concurent: unknown key 'max_concurent' (did you mean 'max_concurrent'?)"),
    ("profiles:\n  recency:\n    half_life: 3\n", "profiles.recency.half_life: unknown key "
     "'half_life'; allowed here: boost, boost_window_days, time_constant_days, window_size"),
    ("agents:\n  - {id: a, max_concurrent: lots}\n",
     "agents.0.max_concurrent: expected a valid integer"),
    ("agents:\n  - {id: a, max_concurrent: 0}\n",
     "agents.0.max_concurrent: expected a value greater than or equal to 1, got 0"),
    ("agents:\n  - {id: a, cost_per_call: -1}\n", "agents.0.cost_per_call: expected a value"),
    # values that used to pass and then failed every record, or zeroed the learning
    ("agents:\n  - {id: a, cost_per_call: 1.0e+300}\n",
     "agents.0.cost_per_call: expected a value less than or equal to 1000000000"),
    ("feedback:\n  keys: {x: {weight: 1.0e+308}}\n",
     "feedback.keys.x.weight: expected a value less than or equal to 1000000"),
    ("feedback:\n  keys: {x: {weight: 1.0e-320}}\n",
     "feedback.keys.x.weight: expected a value greater than or equal to 0.000001"),
    ("feedback:\n  keys: {j: {scale: [-1.0e+308, 1.0e+308]}}\n",
     "feedback.keys.j.scale: scale must span a finite width"),
    ("profiles:\n  recency: {boost: 1.0e+308}\n",
     "profiles.recency.boost: expected a value less than or equal to 1000"),
    ("agents:\n  - {id: ''}\n", "agents.0.id: agent id must not be empty"),
    ("agents:\n  - {id: a, task_types: []}\n", "agents.0.task_types: task_types must name"),
    ("agents: [a, b, a]\n", "agents: agent 'a' is listed twice"),
    ("agents: coder\n", "agents: expected a valid list, got 'coder'"),
    ("agents: [42]\n", "agents.0: expected a valid dictionary"),
    ("seed: soon\n", "seed: expected a valid integer"),
    ("seed: 1.5\n", "seed: expected a valid integer, got 1.5 (a number with a fractional "
     "part)"),  # "got" once
    ("profiles:\n  confidence_ramp: 0\n", "profiles.confidence_ramp: expected a value greater"),
    ("profiles:\n  recency: {time_constant_days: -7}\n",
     "profiles.recency.time_constant_days: expected a value greater than 0, got -7"),
    ("strategy: no_such_strategy\n",
     "strategy.name: unknown strategy 'no_such_strategy'; available: "),
    ("strategy:\n  params: [1, 2]\n", "strategy.params: expected a valid dictionary, got a list"),
    ("store: bogus\n", "store.url: store URL 'bogus' must look like surrealkv://PATH"),
    ("store: ftp://x\n", "store.url: store URL scheme 'ftp' is not supported"),
    ('store: {url: "mem://", namespace: "a\\u0000b"}\n',
     "store.namespace: namespace must not contain a NUL character"),
    ('store: {url: "mem://", database: "\\e[2J"}\n',
     "store.database: database must not contain control characters"),
    ("- just\n- a list\n", "<root>: expected a mapping of keys, got list"),
])
def test_bad_config_names_key_path_and_expectation(tmp_path: Path, text: str,
                                                   expected: str) -> None:
    assert error_of(write(tmp_path, "router.yaml", text)).startswith(expected)


def test_several_problems_are_all_reported_on_one_line(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "router.yaml", "seed: x\nstor: 1\n"))
    assert "seed: expected a valid integer" in message
    assert "stor: unknown key 'stor'" in message


def test_secret_values_are_never_echoed(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "router.yaml",
                             "store:\n  url: ws://h:1\n  password: [hunter2]\n"))
    assert message.startswith("store.password: expected a valid string")
    assert "hunter2" not in message


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("router.yaml", "agents: [a,\n", "not valid YAML (line 2, column 1)"),
    ("router.yaml", "seed: 1\nseed: 2\n", "not valid YAML (line 2, column 1): key 'seed' is "
                                          "given twice"),
    ("router.json", '{"seed": 1,}', "not valid JSON (line 1, column 12)"),
    ("router.json", '{"seed": 1, "seed": 2}', "not valid JSON: key 'seed' is given twice"),
    ("router.toml", "seed = \n", "not valid TOML: "),
    ("router.toml", "seed = 1\nseed = 2\n", "not valid TOML: "),
    ("router.ini", "[x]\n", "unknown config format '.ini'"),
])
def test_syntax_errors_name_the_format_and_position(tmp_path: Path, name: str, text: str,
                                                    expected: str) -> None:
    assert error_of(write(tmp_path, name, text)).startswith(expected)


def test_unreadable_files(tmp_path: Path) -> None:
    assert error_of(tmp_path / "missing.yaml").startswith("config file not found")
    (tmp_path / "latin1.yaml").write_bytes(b"agents: [caf\xe9]\n")
    assert error_of(tmp_path / "latin1.yaml").startswith("not UTF-8 text")
    (tmp_path / "dir.yaml").mkdir()
    assert error_of(tmp_path / "dir.yaml").startswith("cannot read config file")


def test_read_mapping_keeps_non_string_values(tmp_path: Path) -> None:
    data = read_mapping(write(tmp_path, "x.yaml", "a: 1\nb: [true, null, 2.5]\n"))
    assert data == {"a": 1, "b": [True, None, 2.5]}


def test_relative_store_path_is_relative_to_the_config_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf_dir = tmp_path / "project" / "conf"
    conf_dir.mkdir(parents=True)
    path = write(conf_dir, "router.yaml", "store: surrealkv://../data/db\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(Path("..") / "project" / "conf" / "router.yaml")
    assert config.store.url == f"surrealkv://{(tmp_path / 'project' / 'data' / 'db').resolve()}"
    assert config.source is not None and config.source.resolve() == path.resolve()


def test_absolute_and_server_urls_are_kept(tmp_path: Path) -> None:
    absolute = tmp_path / "abs" / "db"
    config = load_config(write(tmp_path, "a.yaml", f"store: surrealkv://{absolute}\n"))
    assert config.store.url == f"surrealkv://{absolute}"
    config = load_config(write(tmp_path, "b.yaml", "store: wss://u:p@db.example:443/rpc\n"))
    assert config.store.url == "wss://u:p@db.example:443/rpc"


def test_config_in_code_has_no_source() -> None:
    config = RouterConfig.model_validate({"agents": ["a"]})
    assert config.source is None
    assert config.strategy.name  # the library default, whatever it is


@pytest.mark.parametrize("name", sorted(SAME_CONFIG))
def test_a_byte_order_mark_is_read_past_in_every_format(tmp_path: Path, name: str) -> None:
    path = tmp_path / name  # as Windows PowerShell 5 writes text files
    path.write_bytes(b"\xef\xbb\xbf" + SAME_CONFIG[name].encode("utf-8"))
    assert load_config(path).seed == 7


@pytest.mark.parametrize(("text", "said"), [
    ("agents:\n  - {id: a, max_concurrent: true}\n",
     "agents.0.max_concurrent: expected a number, got true"),
    ("agents:\n  - {id: a, rpm: true}\n", "agents.0.rpm: expected a number, got true"),
    ("seed: true\n", "seed: expected a number, got true"),
    ("profiles: {confidence_ramp: true}\n", "profiles.confidence_ramp: expected a number"),
    ("feedback: {wait_s: true}\n", "feedback.wait_s: expected a number, got true"),
    ("trust: {decay: {unseen_days: false}}\n", "trust.decay.unseen_days: expected a number"),
    ("hooks:\n  - {type: webhook, url: 'http://127.0.0.1:9/x', attempts: true}\n",
     "hooks.0.webhook.attempts: expected a number, got true"),
    ("hooks:\n  - {type: logging, level: false}\n",
     "hooks.0.logging.level: expected a number, got false"),
    ("trust: {weights: [true, false, false]}\n",
     "trust.weights: expected numbers, got true among them"),
])
def test_true_or_false_is_not_a_number(tmp_path: Path, text: str, said: str) -> None:
    # pydantic would read true as 1: max_concurrent: true would mean one at a time
    assert said in error_of(write(tmp_path, "router.yaml", text))
