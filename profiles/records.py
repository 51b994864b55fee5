"""The execution record: one observed outcome of one agent on one task.

Validation lives here, at the edge, so that everything downstream (profile math, the
store, strategies) can trust its inputs. A retried write reuses ``record_id``, which is
generated on the client, so the store can make writes idempotent.
"""

from __future__ import annotations

import json
import math
import unicodedata
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from trustroute.profiles.validation import digit_count

MAX_ID_LENGTH = 256
#: Longest latency accepted: a year. Sums of bounded values stay finite, so averages and
#: JSON output never become infinite; anything longer is a unit error, not a latency.
MAX_LATENCY_MS = 365 * 86_400_000.0
#: Largest cost of one execution accepted (any currency); bounded for the same reason.
MAX_COST = 1e9
#: Deepest metadata nesting accepted, and the integer range the store keeps exactly.
MAX_METADATA_DEPTH = 32
INT64 = (-(2**63), 2**63 - 1)
#: Characters that reorder text on screen (Unicode's Bidi_Control property: the marks
#: ALM, LRM, RLM, the embeddings and overrides U+202A-202E, the isolates U+2066-2069).
#: An identifier holding one prints differently from what it is (U+202E turns
#: "exe.txt" around), so identifiers refuse them along with C0/C1 controls and line
#: separators (category Cc, Zl, Zp), which a terminal acts on (ESC sequences, clear).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                          "\u2066\u2067\u2068\u2069")
_CONTROL_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})


def is_control(char: str) -> bool:
    """True for a character a terminal acts on or that reorders text (see above)."""
    return char in BIDI_CONTROLS or unicodedata.category(char) in _CONTROL_CATEGORIES


def utc_now() -> datetime:
    """Current time as a timezone-aware UTC datetime."""
    return datetime.now(UTC)


def iso_z(moment: datetime) -> str:
    """The one way times are shown: ISO 8601 in UTC with ``Z`` (``2025-03-01T12:00:00Z``;
    fractions of a second only when there are any)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class FieldTypeError(TypeError, ValueError):
    """A value of the wrong type for a named field.

    Also a ValueError so that pydantic validators report it as a ValidationError naming
    the field instead of letting a bare TypeError escape.
    """


class InvalidRecord(ValueError):
    """An execution given to ``record()`` with a field that is not acceptable (one line
    naming each such field)."""


def check_identifier(value: str, field: str) -> str:
    """Reject empty or over-long identifiers, and ones with white space around them,
    with an error that names the field."""
    if not isinstance(value, str):
        raise FieldTypeError(f"{field} must be a string, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{field} must not be empty")
    if "\x00" in value:
        raise ValueError(f"{field} must not contain a NUL character")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{field} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}")
    if value.isspace():  # as a file's blank cell reads: missing
        raise ValueError(f"{field} must not be empty (it is only white space)")
    if value[0].isspace() or value[-1].isspace():  # ' code' would be a second task type
        raise ValueError(f"{field} must not start or end with white space, got {value!r}")
    if not value.isprintable():  # fast path: printable text has no control of any kind
        for at, char in enumerate(value):
            if unicodedata.category(char) == "Cs":  # no UTF-8 form: the store cannot keep it
                raise ValueError(f"{field} must not contain a lone surrogate "
                                 f"(U+{ord(char):04X} at position {at})")
            if is_control(char):
                kind = "bidi-control" if char in BIDI_CONTROLS else "control"
                raise ValueError(f"{field} must not contain {kind} characters "
                                 f"(U+{ord(char):04X} at position {at})")
    return value


def check_finite(value: float, field: str, *, low: float | None = None,
                 high: float | None = None) -> float:
    """Reject NaN, infinities and values outside [low, high], naming the field."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldTypeError(f"{field} must be a number, got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:  # an integer past the largest float
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"{field} must be a finite number, got {value}")
    if low is not None and value < low:
        raise ValueError(f"{field} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{field} must be <= {high}, got {value}")
    return value


class ExecutionRecord(BaseModel):
    """One execution of ``agent_id`` on a task of ``task_type`` and how it went."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str
    task_type: str
    success: bool = Field(strict=True)
    quality: float | None = None
    latency_ms: float = 0.0
    cost: float | None = None
    timestamp: datetime = Field(default_factory=utc_now)
    record_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    decision_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: LangChain run ids of this execution (the routed run, the chosen agent's run):
    #: ``router.feedback(run_id, ...)`` finds the execution by any of them.
    run_ids: tuple[str, ...] = ()
    # whether the caller gave ``quality`` (False: it was filled in from ``success``)
    _quality_given: bool = PrivateAttr(default=True)

    @field_validator("agent_id", "task_type", "record_id", "decision_id")
    @classmethod
    def _identifier(cls, value: str | None, info: Any) -> str | None:
        return None if value is None else check_identifier(value, info.field_name)

    @field_validator("run_ids", mode="before")
    @classmethod
    def _run_ids(cls, value: Any) -> Any:
        if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
            raise FieldTypeError(f"run_ids must be a list of strings, got {type(value).__name__}")
        # LangChain hands run ids out as UUIDs: kept as their text
        return tuple(dict.fromkeys(check_identifier(str(v) if isinstance(v, uuid.UUID) else v,
                                                    "run_ids") for v in value))

    @field_validator("quality", "latency_ms", "cost", mode="before")
    @classmethod
    def _number(cls, value: Any, info: Any) -> Any:
        high = {"quality": 1.0, "latency_ms": MAX_LATENCY_MS, "cost": MAX_COST}[info.field_name]
        return None if value is None else check_finite(value, info.field_name, low=0.0, high=high)

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("timestamp must be timezone-aware (naive datetimes are ambiguous)")
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise ValueError(f"timestamp {value.isoformat()} is out of range in UTC") from None

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_metadata(value, "metadata", 1)
        return without_null_values(value)  # as the store keeps it

    @model_validator(mode="after")
    def _default_quality(self) -> ExecutionRecord:
        if self.quality is None:
            object.__setattr__(self, "quality", 1.0 if self.success else 0.0)
            self._quality_given = False
        return self

    @property
    def quality_given(self) -> bool:
        """Whether the caller gave ``quality`` (False: it was filled in from ``success``,
        and with a feedback policy's ``wait_s`` the run awaits a verdict)."""
        return self._quality_given

    def without_quality(self) -> ExecutionRecord:
        """This record marked as carrying no quality of its own (read back from the log)."""
        self._quality_given = False
        return self

    @property
    def effective_quality(self) -> float:
        """Quality as a float (never None after validation)."""
        return 1.0 if self.quality is None and self.success else float(self.quality or 0.0)


MAX_COMMENT = 10_000  # characters of a comment kept with a verdict or a review


def check_text(value: Any, field: str, limit: int = MAX_COMMENT) -> str:
    """Free text people give (a comment): a string of at most ``limit`` characters that
    the store can keep and send back (no NUL, no lone surrogate); the error names it."""
    if not isinstance(value, str):
        raise FieldTypeError(f"{field} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{field} must not contain a NUL character")
    if len(value) > limit:
        raise ValueError(f"{field} is {len(value):,} characters long; the limit is {limit:,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{field} holds a lone surrogate, which has no UTF-8 form") from None
    return value


def check_not_ahead(moment: datetime, field: str, max_clock_skew_s: float,
                    now: datetime | None = None) -> datetime:
    """Refuse ``moment`` more than ``max_clock_skew_s`` ahead of ``now``: it would stay
    the newest for ever (recent evidence, or the verdict that stands)."""
    ahead = (moment - (now or utc_now())).total_seconds()
    if ahead > max_clock_skew_s:
        raise ValueError(f"{field}: {iso_z(moment)} is {_span(ahead)} ahead of now; at most "
                         f"{max_clock_skew_s:g} s is accepted (profiles.max_clock_skew_s)")
    return moment


def check_metadata(value: Any, where: str, depth: int) -> None:
    """Reject what the store cannot keep exactly: nesting deeper than
    ``MAX_METADATA_DEPTH``, integers past 64 bits, non-finite numbers, non-string keys,
    NUL characters and lone surrogates (no UTF-8 form); the error names the path to the
    value. Mappings and lists count
    as levels (``metadata`` itself is level 1), as in config files."""
    if depth > MAX_METADATA_DEPTH and isinstance(value, dict | list | tuple):
        raise ValueError(f"nested deeper than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or "\x00" in key:
                raise ValueError(f"{where}: keys must be strings without NUL, got {key!r}")
            if not _utf8(key):
                raise ValueError(f"{where}: key {key!r} holds a lone surrogate, which has "
                                 "no UTF-8 form")
            check_metadata(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_metadata(item, f"{where}[{i}]", depth + 1)
    elif isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        shown = (str(value) if digit_count(value) <= 60
                 else f"of {digit_count(value):,} digits")  # too long to write out
        raise ValueError(f"{where}: integer {shown} does not fit in 64 bits")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value} is not a finite number")
    elif isinstance(value, str) and "\x00" in value:
        raise ValueError(f"{where}: strings must not contain a NUL character")
    elif isinstance(value, datetime) and (value.tzinfo is None or value.utcoffset() is None):
        raise ValueError(f"{where}: a datetime without a timezone is ambiguous (it would "
                         "be read back as UTC); give it one")
    elif isinstance(value, str) and not _utf8(value):
        raise ValueError(f"{where}: holds a lone surrogate, which has no UTF-8 form")
    elif not isinstance(value, str | int | float | datetime | None):  # bool is an int
        raise ValueError(f"{where}: a {type(value).__name__} is not kept; use text, "
                         "numbers, true/false, null, lists and mappings")


def without_null_values(value: Any) -> Any:
    """``value`` without the keys whose value is None, at any depth: the store drops such
    a key (SurrealDB reads a bound None as NONE, which removes a field), so a record
    holds what is stored and read back. None in a list is kept, as the store keeps it."""
    if isinstance(value, dict):
        return {k: without_null_values(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [without_null_values(v) for v in value]
    return value


def _utf8(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate): the store can keep it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def metadata_bytes(metadata: dict[str, Any]) -> int:
    """Size of ``metadata`` once encoded: compact UTF-8 JSON, the form it is exported
    and imported in (the store's own encoding is within a few bytes of it)."""
    text = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(text.encode("utf-8", "surrogatepass"))


def check_admissible(record: ExecutionRecord, *, max_clock_skew_s: float,
                     max_metadata_bytes: int, now: datetime | None = None) -> ExecutionRecord:
    """Refuse, naming the field and the setting, a record stamped more than
    ``max_clock_skew_s`` ahead of ``now`` (it would stay "recent" for ever) or whose
    metadata encodes to more than ``max_metadata_bytes`` (``InvalidRecord``)."""
    try:
        check_not_ahead(record.timestamp, "timestamp", max_clock_skew_s, now)
    except ValueError as exc:
        raise InvalidRecord(str(exc)) from None
    if record.metadata and (size := metadata_bytes(record.metadata)) > max_metadata_bytes:
        raise InvalidRecord(f"metadata: {size:,} bytes once encoded as JSON; the limit is "
                         f"{max_metadata_bytes:,} (profiles.max_metadata_bytes)")
    return record


def _span(seconds: float) -> str:
    """A duration for an error message: seconds, hours or days."""
    if seconds < 7200:
        return f"{seconds:,.0f} s"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86_400:,.0f} days"
