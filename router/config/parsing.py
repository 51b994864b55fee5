"""Parsing config text (YAML, TOML, JSON) within limits that no real config comes near.

A config file is read before anything else a command does, so a hostile or broken one
must fail at once, on one line, instead of costing minutes and gigabytes (a 600-byte
YAML alias bomb expands to hundreds of millions of values) or a traceback (nesting past
Python's recursion limit). The limits, and why these numbers:

- ``MAX_CONFIG_BYTES``, 1 MiB: the complete commented example is under 4 KB and a
  config listing a thousand agents about 100 KB. The file is read only up to the limit,
  so a log or ``/dev/zero`` given by mistake is refused without being read.
- ``MAX_DEPTH``, 32 levels of mappings and lists (the root mapping is level 1): the
  deepest key a config has is 4 levels down (``hooks.0.headers.NAME``), so 32 leaves
  strategy parameters ample room; it is also the nesting an ExecutionRecord's metadata
  may have, and far from the 1,000 frames at which the recursive parsers, the
  substitution and validation would fail.
- ``MAX_CONFIG_VALUES``, 100,000 values once YAML aliases are expanded: a thousand
  agents with ten keys each is about 20,000, and 100,000 are substituted and validated
  in a fraction of a second. Aliases are measured on the parsed node graph, before any
  value is built, so a bomb costs only its own size.

A key given twice in one mapping is an error in every format (YAML and JSON would keep
the last one silently); a YAML merge key (``<<: *base``) may still be overridden.

A whole number of more digits than Python converts from text
(``sys.get_int_max_str_digits()``, 4,300) is named at its key path
(``seed: a number of 5,000 digits; at most 4,300 are read``), not left to fail the
parse with a message that names neither the file nor the key.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
import typing
from collections.abc import Hashable
from typing import Any

import yaml

from trustroute.profiles.validation import key_path
from trustroute.router.row_files import TooLong, count_digits, json_int, too_long_at

MAX_CONFIG_BYTES = 1_048_576
MAX_DEPTH = 32
MAX_CONFIG_VALUES = 100_000

TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"
_MERGE = "tag:yaml.org,2002:merge"


class ParseError(ValueError):
    """Config text that parses, but breaks a limit or repeats a key (no position known)."""


class ValueProblem(ParseError):
    """A value the text holds that cannot be read; the message starts with its key path."""


class _StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader (no tags, no code) that rejects repeated keys and enforces the limits."""

    depth = 0  # mappings and lists open around the node being composed

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """Compose one node; a mapping or list past ``MAX_DEPTH`` stops the parse there."""
        if not self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            return super().compose_node(parent, index)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, TOO_DEEP,
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        """Count the document's values with its aliases expanded before building any."""
        _expanded_values(node, {}, set())
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        own = sum(1 for key_node, _ in node.value if key_node.tag != _MERGE)
        self.flatten_mapping(node)  # merged pairs first, then the mapping's own
        merged = len(node.value) - own
        built: dict[Any, Any] = {}
        own_keys: set[Any] = set()
        for position, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark)
            if position >= merged:
                if key in own_keys:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice", key_node.start_mark)
                own_keys.add(key)
            built[key] = self.construct_object(value_node, deep=deep)
        return built

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int | TooLong:  # type: ignore[override]
        """An int, or ``TooLong`` for one past Python's limit (reported at its key path)."""
        try:
            return typing.cast(int, super().construct_yaml_int(node))
        except ValueError:
            return TooLong(count_digits(node.value))


_StrictYamlLoader.add_constructor("tag:yaml.org,2002:int", _StrictYamlLoader.construct_yaml_int)


def _expanded_values(node: yaml.Node, seen: dict[int, int], open_nodes: set[int]) -> int:
    """How many values ``node`` holds as it would be built, every alias expanded.

    Each distinct node is measured once (aliases share nodes), so this costs the size of
    the text, not of the expansion; an alias names a node defined before it, so the
    recursion is no deeper than the text's nesting (bounded by ``compose_node``).
    """
    if isinstance(node, yaml.ScalarNode):
        return 1
    key = id(node)
    if key in open_nodes:
        raise yaml.constructor.ConstructorError(
            None, None, "an alias refers to itself (a loop)", node.start_mark)
    if key not in seen:
        open_nodes.add(key)
        children = ([part for pair in node.value for part in pair]
                    if isinstance(node, yaml.MappingNode) else node.value)
        values = 1
        for child in children:
            values += _expanded_values(child, seen, open_nodes)
            if values > MAX_CONFIG_VALUES:
                raise yaml.constructor.ConstructorError(
                    None, None, f"more than {MAX_CONFIG_VALUES:,} values once aliases are expanded",
                    node.start_mark)
        open_nodes.discard(key)
        seen[key] = values
    return seen[key]


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ParseError(f"key {key!r} is given twice")
        out[key] = value
    return out


# A TOML decimal integer, not part of a name, a string's start, a float or a date.
_TOML_INT = re.compile(r"(?<![\w.\"'+-])[+-]?[0-9](?:_?[0-9])*(?![\w.:-])")
_MARK = "\x00too long "


def _toml(text: str) -> Any:
    """tomllib has no hook for integers: one past the limit fails the whole parse. Then
    each such number is parsed as a marker string instead, so its key path is known."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except ValueError:  # an integer past sys.get_int_max_str_digits()
        pass
    limit = sys.get_int_max_str_digits()
    long_ones = [m for m in _TOML_INT.finditer(text) if count_digits(m.group()) > limit]
    if not long_ones:
        raise ParseError(TooLong(limit + 1).problem())
    marked, end = [], 0
    for m in long_ones:
        marked += [text[end:m.start()], f'"\\u0000too long {count_digits(m.group())}"']
        end = m.end()
    try:
        data = tomllib.loads("".join([*marked, text[end:]]))
    except ValueError:  # a long number inside a string, say: name its line
        first = long_ones[0]
        line = text.count("\n", 0, first.start()) + 1
        raise ParseError(f"line {line}: {TooLong(count_digits(first.group())).problem()}"
                         ) from None
    return _unmarked(data)


def _unmarked(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_MARK):
        return TooLong(int(value[len(_MARK):]))
    if isinstance(value, dict):
        return {key: _unmarked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unmarked(item) for item in value]
    return value


def too_deep_at(value: Any, level: int = 1, where: tuple[Any, ...] = ()
                ) -> tuple[Any, ...] | None:
    """The key path of a mapping or list nested past ``MAX_DEPTH``, or None."""
    if not isinstance(value, dict | list):
        return None
    if level > MAX_DEPTH:
        return where
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        found = too_deep_at(item, level + 1, (*where, key))
        if found is not None:
            return found
    return None


def parse(text: str, fmt: str) -> Any:
    """Parse config text; ParseError (or the format's own error, with a position)."""
    try:
        if fmt == "YAML":
            data = yaml.load(text, Loader=_StrictYamlLoader)  # a SafeLoader: no tags, no code
        else:
            data = (_toml(text) if fmt == "TOML"
                    else json.loads(text, object_pairs_hook=_json_object,
                                    parse_int=json_int))
    except RecursionError:  # the recursive TOML and JSON parsers, far past MAX_DEPTH
        raise ParseError(TOO_DEEP) from None
    where = too_deep_at(data)  # in YAML, also nesting built through aliases
    if where is not None:
        shown = ".".join(str(p) for p in where[:3])
        raise ParseError(f"{shown}: {TOO_DEEP}" if shown else TOO_DEEP)
    long_number = too_long_at(data)
    if long_number is not None:
        raise ValueProblem(f"{key_path(long_number[0])}: {long_number[1].problem()}")
    return data
