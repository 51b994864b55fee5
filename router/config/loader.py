"""Reading config files: YAML, TOML or JSON, with ``${ENV_VAR}`` substitution.

Errors name the file, the key path and what was expected, e.g.
``router.yaml: agents.1.max_concurrent: Input should be greater than or equal to 1``.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(ValueError):
    """A config file that cannot be read or does not validate."""


def substitute_env(value: Any, path: str, where: str = "") -> Any:
    """Replace ``${NAME}`` / ``${NAME:-default}`` in every string, recursively."""
    if isinstance(value, str):
        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(f"{path}: {where or '<root>'}: environment variable "
                              f"${{{name}}} is not set")
        return _ENV.sub(repl, value)
    if isinstance(value, dict):
        return {k: substitute_env(v, path, f"{where}.{k}" if where else str(k))
                for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, path, f"{where}.{i}" if where else str(i))
                for i, v in enumerate(value)]
    return value


def read_mapping(path: str | Path) -> dict[str, Any]:
    """Parse a config file by extension into a dict (env vars substituted)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.strerror or exc}") from exc
    suffix = p.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"{p}: unknown config format {suffix!r}; use .yaml, .toml or .json")
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{p}: not valid {suffix.lstrip('.').upper()}: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of keys, got "
                          f"{type(data).__name__}")
    return substitute_env(data, str(p))


def describe_validation_error(path: str | Path, exc: ValidationError) -> str:
    """One line per problem: ``file: key.path: message``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "<root>"
        msg = "unknown key (not allowed here)" if err["type"] == "extra_forbidden" \
            else err["msg"]
        lines.append(f"{path}: {loc}: {msg}")
    return "\n".join(lines)
