"""Reading config files: YAML, TOML or JSON, with ``${ENV_VAR}`` substitution.

Every error is one line that names the file, the key path and what was expected, e.g.
``router.yaml: agents.1.max_concurrent: expected a valid integer, got 'x'``, because
the person reading it has the file open and needs to know where to look, not a stack.

Substitution happens after parsing, inside string values only: ``${NAME}`` (error when
unset), ``${NAME:-default}`` (default when unset or empty, as in the shell) and
``$${NAME}`` for a literal ``${NAME}``. Values substituted into numbers or booleans are
converted by validation ("4" -> 4, "true" -> True).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
import typing
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

_ENV = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

# Keys whose values are never echoed in error messages.
_SECRET_MARKERS = ("password", "secret", "token", "credential", "api_key", "apikey")

FORMATS = {".yaml": "YAML", ".yml": "YAML", ".toml": "TOML", ".json": "JSON"}


class ConfigError(ValueError):
    """A config file that cannot be read or does not validate."""


def key_path(parts: tuple[Any, ...] | list[Any]) -> str:
    """``('agents', 0, 'id')`` -> ``agents.0.id`` (``<root>`` for the whole file)."""
    return ".".join(str(p) for p in parts) or "<root>"


def substitute_env(value: Any, path: str | Path, where: tuple[Any, ...] = ()) -> Any:
    """Replace ``${NAME}`` / ``${NAME:-default}`` in every string, recursively."""
    if isinstance(value, str):
        def repl(m: re.Match[str]) -> str:
            escaped, name, default = m.group(1), m.group(2), m.group(3)
            if escaped:
                return m.group(0)[1:]
            found = os.environ.get(name)
            if found is not None and (found or default is None):
                return found
            if default is not None:
                return default
            raise ConfigError(f"{path}: {key_path(where)}: environment variable {name} is not "
                              f"set (set it, or write ${{{name}:-default}})")
        return _ENV.sub(repl, value)
    if isinstance(value, dict):
        return {k: substitute_env(v, path, (*where, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, path, (*where, i)) for i, v in enumerate(value)]
    return value


class _StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen[key] = self.construct_object(value_node, deep=deep)
        return seen


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ConfigError(f"key {key!r} is given twice")
        out[key] = value
    return out


def _parse(text: str, fmt: str) -> Any:
    if fmt == "YAML":
        return yaml.load(text, Loader=_StrictYamlLoader)  # a SafeLoader subclass: no tags
    if fmt == "TOML":
        return tomllib.loads(text)
    return json.loads(text, object_pairs_hook=_json_object)


def _syntax_error(p: Path, fmt: str, exc: Exception) -> ConfigError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        detail = exc.problem or exc.context or "syntax error"
        return ConfigError(f"{p}: not valid YAML{where}: {detail}")
    if isinstance(exc, json.JSONDecodeError):
        return ConfigError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}): "
                           f"{exc.msg}")
    detail = " ".join(str(exc).split())
    return ConfigError(f"{p}: not valid {fmt}: {detail}")


def read_mapping(path: str | Path) -> dict[str, Any]:
    """Parse a config file by extension into a dict (env vars substituted)."""
    p = Path(path)
    fmt = FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise ConfigError(f"{p}: unknown config format {p.suffix or '(no extension)'!r}; "
                          "use .yaml, .yml, .toml or .json")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found (create one with `trustroute init`)"
                          ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.strerror or exc}") from None
    try:
        data = _parse(text, fmt)
    except ConfigError as exc:
        raise ConfigError(f"{p}: not valid {fmt}: {exc}") from None
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise _syntax_error(p, fmt, exc) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):  # (a key that is not a string is validation's to report)
        raise ConfigError(f"{p}: <root>: expected a mapping of keys, got "
                          f"{type(data).__name__}")
    return typing.cast(dict[str, Any], substitute_env(data, p))


# -- validation errors ----------------------------------------------------------------
def _model_at(model: type[BaseModel] | None, parts: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys live at ``parts`` (list indices are stepped over)."""
    for part in parts:
        if model is None or isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        model = next(iter(_models_in(field.annotation)), None) if field else None
    return model


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through lists, unions, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _is_secret(parts: tuple[Any, ...]) -> bool:
    return any(m in str(p).lower() for p in parts for m in _SECRET_MARKERS)


def _shown(value: Any) -> str:
    if isinstance(value, dict | list | tuple):
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_problem(err: Any, model: type[BaseModel] | None = None) -> str:
    """One pydantic error as ``key.path: expected ..., got ...``."""
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        parent = _model_at(model, loc[:-1])
        if parent is None:
            return f"{key_path(loc)}: unknown key {key!r}"
        allowed = sorted(parent.model_fields)
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (f"{key_path(loc)}: unknown key {key!r}{hint}; allowed here: "
                f"{', '.join(allowed)}")
    if err["type"] == "missing":
        return f"{key_path(loc)}: required key is missing"
    msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if msg.startswith("Input should be "):
        msg = msg[len("Input should be "):]
        if msg.startswith(("greater", "less")):
            msg = "a value " + msg
        msg = "expected " + msg
    if "input" in err and not _is_secret(loc) and err["type"] != "value_error":
        msg = f"{msg}, got {_shown(err['input'])}"
    return f"{key_path(loc)}: {msg}"


def describe_validation_error(exc: ValidationError, model: type[BaseModel] | None = None
                              ) -> str:
    """Every problem on one line: ``key.path: expected ...; other.key: ...``."""
    return "; ".join(describe_problem(err, model) for err in exc.errors())
