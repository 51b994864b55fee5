"""Config files that would cost minutes or gigabytes are refused at once, with one line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trustroute.router.config import ConfigError, load_config
from trustroute.router.config.parsing import MAX_CONFIG_BYTES, MAX_CONFIG_VALUES, MAX_DEPTH


def error_of(path: Path) -> str:
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert time.perf_counter() - started < 5, "refused at once, not after the work"
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message[len(f"{path}: "):]


def alias_bomb(levels: int = 9) -> str:
    """The classic billion laughs: each level lists the previous one nine times."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for previous, name in zip("abcdefghijk", "bcdefghijkl"[:levels - 1], strict=False):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    text = alias_bomb()
    assert len(text.encode()) < 600
    path = tmp_path / "router.yaml"
    path.write_text(text)
    message = error_of(path)
    assert message.startswith("not valid YAML (line ")
    assert f"more than {MAX_CONFIG_VALUES:,} values" in message


def test_a_self_referencing_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("strategy:\n  params:\n    x: &loop [1, *loop]\n")
    assert "refers to itself" in error_of(path)


def test_ordinary_anchors_and_merge_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("store: mem://\n"
                    "agents:\n"
                    "  - &coder {id: coder, task_types: [code, math], max_concurrent: 2}\n"
                    "  - {<<: *coder, id: coder2}\n")
    config = load_config(path)
    assert [(a.id, a.task_types, a.max_concurrent) for a in config.agents] == [
        ("coder", ("code", "math"), 2), ("coder2", ("code", "math"), 2)]


def nested(fmt: str, depth: int) -> str:
    inner = "[" * depth + "]" * depth
    return {"yaml": f"strategy:\n  params:\n    x: {inner}\n",
            "toml": f"[strategy.params]\nx = {inner}\n",
            "json": f'{{"strategy": {{"params": {{"x": {inner}}}}}}}'}[fmt]


@pytest.mark.parametrize("fmt", ["yaml", "toml", "json"])
@pytest.mark.parametrize("depth", [MAX_DEPTH, 1_000, 100_000])
def test_nesting_deeper_than_the_limit_is_one_line(tmp_path: Path, fmt: str,
                                                   depth: int) -> None:
    path = tmp_path / f"router.{fmt}"
    path.write_text(nested(fmt, depth))
    assert f"nested deeper than {MAX_DEPTH} levels" in error_of(path)


@pytest.mark.parametrize("fmt", ["yaml", "toml", "json"])
def test_nesting_up_to_the_limit_is_accepted(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"router.{fmt}"
    path.write_text(nested(fmt, MAX_DEPTH - 3))  # root, strategy, params: 3 levels
    assert load_config(path).strategy.params["x"] is not None


def test_aliases_cannot_nest_past_the_limit(tmp_path: Path) -> None:
    lines = ["a0: &a0 [[[[[[[[1]]]]]]]]"]
    lines += [f"a{i}: &a{i} [[[[[[[[*a{i - 1}]]]]]]]]" for i in range(1, 6)]
    path = tmp_path / "router.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert f"nested deeper than {MAX_DEPTH} levels" in error_of(path)


@pytest.mark.parametrize("name", ["router.yaml", "router.toml", "router.json"])
def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    assert error_of(path) == (f"config file is larger than {MAX_CONFIG_BYTES:,} bytes; "
                              "a router config is a few kilobytes")


def test_a_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    body = b"store: mem://\n"
    path.write_bytes(body + b"#" * (MAX_CONFIG_BYTES - len(body) - 1) + b"\n")
    assert load_config(path).store.url == "mem://"


def test_a_negative_seed_names_the_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("seed: -5\n")
    assert error_of(path) == "seed: expected a value greater than or equal to 0, got -5"


@pytest.mark.parametrize("value", ["warn", "error", "allow"])
def test_unknown_agents_reaches_the_router(tmp_path: Path, value: str) -> None:
    path = tmp_path / "router.yaml"
    path.write_text(f"store: mem://\nagents: [a]\nunknown_agents: {value}\n")
    config = load_config(path)
    assert config.unknown_agents == value
    with config.build_router() as router:
        assert router.unknown_agents == value


def test_unknown_agents_defaults_to_warn_and_rejects_other_values(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty).unknown_agents == "warn"
    path = tmp_path / "router.yaml"
    path.write_text("unknown_agents: ignore\n")
    assert error_of(path).startswith("unknown_agents: expected 'warn', 'error' or 'allow'")
