"""The hand-off message catalogue: every user-facing reason text, per locale, in one place.

Reasons are built from message keys and named fields, never assembled from fragments in
code, so a translation changes one table and every locale says the same thing. English is
the default; Chinese is available as ``zh`` (``zh-CN``, ``zh_Hans`` ... normalise to it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_LOCALE = "en"

MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        "no_retrieval": "No documents were retrieved; handing over to a human agent.",
        "insufficient": "Retrieval insufficient ({details}); confidence {confidence:.2f}.",
        "low_confidence": (
            "Confidence {confidence:.2f} is below the transfer threshold {threshold:.2f}."
        ),
        "may_be_inaccurate": (
            "The answer may be inaccurate: retrieval insufficient ({details}); "
            "confidence {confidence:.2f}."
        ),
        "too_few_hits": "{hits} hit(s), fewer than the minimum of {min_hits}",
        "low_score": "best score {max_score:.3f} is below the threshold {score_threshold:.3f}",
        "token_overflow": (
            "evidence of {evidence_tokens} tokens exceeds the limit of {max_evidence_tokens}"
        ),
        "separator": "; ",
        "handoff_message": (
            "I'm not confident I can answer this correctly, so I'm passing you to a person "
            "who can help."
        ),
    },
    "zh": {
        "no_retrieval": "未检索到任何相关文档，转接人工客服。",
        "insufficient": "检索结果不足（{details}）；置信度 {confidence:.2f}。",
        "low_confidence": "置信度 {confidence:.2f} 低于转人工阈值 {threshold:.2f}。",
        "may_be_inaccurate": (
            "答案可能不准确：检索结果不足（{details}）；置信度 {confidence:.2f}。"
        ),
        "too_few_hits": "命中 {hits} 条，少于最少要求的 {min_hits} 条",
        "low_score": "最高相关度 {max_score:.3f} 低于阈值 {score_threshold:.3f}",
        "token_overflow": "证据长度 {evidence_tokens} 个 token，超过上限 {max_evidence_tokens}",
        "separator": "；",
        "handoff_message": "这个问题我无法可靠地回答，正在为您转接人工客服。",
    },
}


def normalise_locale(locale: str | None) -> str:
    """``None`` -> default; ``zh-CN`` / ``zh_Hans`` -> ``zh``; unknown -> ValueError."""
    if locale is None:
        return DEFAULT_LOCALE
    base = locale.strip().replace("_", "-").split("-", 1)[0].lower()
    if base not in MESSAGES:
        raise ValueError(
            f"locale {locale!r} has no hand-off messages; available: {', '.join(sorted(MESSAGES))}"
        )
    return base


#: Fields a message compares ("0.497 is below the threshold 0.500"): shown with as many
#: digits as it takes to tell them apart.
COMPARED = (("confidence", "threshold"), ("max_score", "score_threshold"))


class Apart(float):
    """A number that, formatted ``.Nf``, shows as many more digits (up to 9) as it takes
    to differ from ``other`` formatted the same way."""

    def __new__(cls, value: float, other: float) -> Apart:
        number = super().__new__(cls, value)
        number.other = float(other)
        return number

    other: float

    def __format__(self, spec: str) -> str:
        if not (spec.startswith(".") and spec.endswith("f") and spec[1:-1].isdigit()):
            return format(float(self), spec)
        digits = int(spec[1:-1])
        while digits < 9 and f"{float(self):.{digits}f}" == f"{self.other:.{digits}f}":
            digits += 1
        return f"{float(self):.{digits}f}"


def message(key: str, locale: str | None = None, /, **fields: Any) -> str:
    """The text of message ``key`` in ``locale`` with ``fields`` filled in (compared
    numbers with the digits that tell them apart)."""
    for a, b in COMPARED:
        if isinstance(fields.get(a), int | float) and isinstance(fields.get(b), int | float):
            fields[a], fields[b] = Apart(fields[a], fields[b]), Apart(fields[b], fields[a])
    return MESSAGES[normalise_locale(locale)][key].format(**fields)


def join_details(codes: Sequence[str], fields: Mapping[str, Any], locale: str | None) -> str:
    """The insufficiency reasons named by ``codes``, in order, as one clause."""
    sep = message("separator", locale)
    return sep.join(message(code, locale, **fields) for code in codes)
