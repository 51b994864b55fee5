"""Reading what callers pass to ``RetrievalConfidence``: scores, token counts, factors, examples.

Lenient about shape (numbers, numpy arrays, ``(document, score)`` pairs, ``{"score": s}``
mappings, LangChain documents with a score in metadata), strict about values: NaN,
infinities and non-numbers are rejected with an error naming the position, because a
silently dropped score would turn into a wrong hand-off decision.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

SCORE_KEYS = ("score", "relevance_score", "similarity_score", "similarity")
Example = tuple[list[float], bool, float | None]  # (scores, needs_human, evidence_tokens)


def as_number(value: Any, where: str) -> float:
    """``value`` as a finite float; a ValueError naming ``where`` when it is not one."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{where} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be a number, got {type(value).__name__}") from None
    except OverflowError:  # an integer past the largest float
        raise ValueError(f"{where} must be a finite number, got an integer of "
                         f"{len(str(abs(value)))} digits") from None
    if not math.isfinite(number):
        raise ValueError(f"{where} must be a finite number, got {number}")
    return number


def _score_of(item: Any, where: str) -> float:
    if isinstance(item, Mapping):
        for key in SCORE_KEYS:
            if key in item:
                return as_number(item[key], f"{where}.{key}")
        raise ValueError(f"{where} has no score (looked for {', '.join(SCORE_KEYS)})")
    if isinstance(item, tuple | list):
        if len(item) != 2:  # [[0.9, 0.8, 0.5]]: one query's row of scores, not a pair
            raise ValueError(f"{where} holds {len(item)} values, not a (document, score) "
                             "pair; give one query's scores as a flat list")
        return as_number(item[-1], f"{where} (the score of a (document, score) pair)")
    metadata = getattr(item, "metadata", None)
    if isinstance(metadata, Mapping) and not isinstance(item, int | float):
        return _score_of(metadata, f"{where}.metadata")
    return as_number(item, where)


def _items(value: Any, name: str, expected: str) -> list[tuple[str, Any]]:
    """``value`` as (position, item) pairs: a lone number is one item, a numpy array its
    values; text, a mapping or anything else not iterable is an error naming ``name``."""
    if getattr(value, "ndim", 1) > 1:  # FAISS's D of one query is (1, k): D[0] is meant
        raise ValueError(f"{name} must be one-dimensional, got an array of shape "
                         f"{tuple(value.shape)}; for one query's hits pass its row ({name}[0])")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [(name, value)]
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ValueError(f"{name} must be {expected}, got {type(value).__name__}")
    return [(f"{name}[{i}]", item) for i, item in enumerate(value)]


def parse_scores(scores: Any, name: str = "scores") -> list[float]:
    """Relevance scores as floats; None or empty -> [] (nothing was retrieved). ``name``:
    what errors call them."""
    if scores is None:
        return []
    return [_score_of(item, where) for where, item in _items(scores, name, "a list of numbers")]


def parse_tokens(tokens: Any) -> float | None:
    """Evidence size in tokens (a count, or per-document counts to add up); None: unknown."""
    if tokens is None:
        return None
    items = _items(tokens, "evidence_tokens", "a number or a list of numbers")
    total = math.fsum(as_number(count, where) for where, count in items)
    if total < 0:
        raise ValueError(f"evidence_tokens must be >= 0, got {total}")
    return int(total) if float(total).is_integer() else total


def parse_factors(factors: Any) -> dict[str, float]:
    """Additional factors as ``{name: value}``; a bare list is named factor_0, factor_1..."""
    if factors is None:
        return {}
    if isinstance(factors, Mapping):
        return {str(k): as_number(v, f"additional_factors[{k!r}]") for k, v in factors.items()}
    items = _items(factors, "additional_factors", "a mapping of name to number or a list")
    return {f"factor_{i}": as_number(v, where) for i, (where, v) in enumerate(items)}


def _needs_human(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ValueError(f"needs_human must be true or false, got {value!r}")


def _example(example: Any) -> Example:
    if isinstance(example, Mapping):
        if "scores" not in example or "needs_human" not in example:
            raise ValueError("needs the keys 'scores' and 'needs_human'")
        scores, label = example["scores"], example["needs_human"]
        tokens = example.get("evidence_tokens")
    elif isinstance(example, tuple | list) and len(example) in (2, 3):
        scores, label, tokens = (*example, None)[:3]
    else:
        raise ValueError(f"expected (scores, needs_human), got {example!r:.80}")
    return parse_scores(scores), _needs_human(label), parse_tokens(tokens)


def parse_examples(examples: Iterable[Any]) -> list[Example]:
    """Labelled calibration examples as ``(scores, needs_human, evidence_tokens)``.

    Each example is ``(scores, needs_human)``, ``(scores, needs_human, evidence_tokens)``
    or a mapping with ``scores`` and ``needs_human`` (and optionally ``evidence_tokens``).
    """
    if isinstance(examples, str | bytes | Mapping) or not isinstance(examples, Iterable):
        raise ValueError("examples must be an iterable of (scores, needs_human) pairs")
    rows = []
    for i, example in enumerate(examples):
        try:
            rows.append(_example(example))
        except ValueError as exc:
            raise ValueError(f"example {i}: {exc}") from None
    if not rows:
        raise ValueError("calibration needs at least one example")
    return rows
