"""Rows of a CSV or JSONL file, each with its line number, with errors that name the file and line.

Execution logs, outcome logs and hand-off examples are all read this way, so a bad file
reads the same everywhere: every problem is a RowFileError carrying the path, the line
(0 when it is the whole file) and what is wrong, and each caller words it in its own error
type. Files are read as UTF-8 with an optional BOM (Excel writes one) and streamed, so a
large log is never held as text. A whole number of more digits than Python reads from
text (4,300) is a problem named at its key path (``quality: a number of 5,000 digits;
at most 4,300 are read``), in a row as in a config file (which uses ``TooLong`` too).
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TextIO, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    StrictStr,
    ValidationError,
    model_validator,
)

from trustroute.profiles.records import check_identifier
from trustroute.profiles.store.errors import PicklableError
from trustroute.profiles.store.params import check_params
from trustroute.profiles.validation import describe_problem, key_path

Row = tuple[int, dict[str, Any]]


class RowFileError(PicklableError, ValueError):
    """A file, or one of its lines, that cannot be read as rows."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        self.path, self.line, self.problem = path, line, problem
        super().__init__(f"{path}:{line}: {problem}" if line else f"{path}: {problem}")


def text_cell(value: Any, name: str) -> str:
    """A cell that names something (an agent, a task type, an id): text, or a whole number
    written without quotes; a list, an object or true/false is a mistake, not a name."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    shown = "true/false" if isinstance(value, bool) else type(value).__name__
    raise ValueError(f"{name}: expected text, got {shown}")


class TooLong:
    """A whole number in the text with more digits than Python converts from text."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def problem(self) -> str:
        """What is wrong, in words."""
        return (f"a number of {self.digits:,} digits; at most "
                f"{sys.get_int_max_str_digits():,} are read")


def count_digits(text: str) -> int:
    """How many decimal digits ``text`` holds."""
    return sum(char.isdigit() for char in text)


def json_int(text: str) -> int | TooLong:
    """``json.loads``' ``parse_int``: an int, or ``TooLong`` past Python's digit limit."""
    try:
        return int(text)
    except ValueError:  # past sys.get_int_max_str_digits()
        return TooLong(count_digits(text))


def too_long_at(value: Any, where: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], TooLong] | None:
    """The key path and the first ``TooLong`` number in parsed data, or None."""
    if isinstance(value, TooLong):
        return where, value
    if not isinstance(value, dict | list):
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        found = too_long_at(item, (*where, key))
        if found is not None:
            return found
    return None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (json keeps the last one silently)."""
    row = dict(pairs)
    if len(row) < len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise ValueError(f"key {twice!r} is given twice")
    return row


def json_value(text: str) -> Any:
    """JSON text as a value (a key given twice in an object is an error); a whole number
    past Python's digit limit is a ValueError naming its key path, not Python's own."""
    value = json.loads(text, object_pairs_hook=_unique_keys, parse_int=json_int)
    found = too_long_at(value)
    if found is not None:
        where, number = found
        raise ValueError(f"{key_path(where)}: {number.problem()}" if where else
                         number.problem())
    return value


def jsonl_rows(path: Path) -> Iterator[Row]:
    """Each non-blank line's JSON object with its line number (a key given twice in one
    object is an error: which value was meant?)."""
    with _open(path) as handle:
        for line_no, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                row = json_value(text)
            except json.JSONDecodeError as exc:
                raise RowFileError(path, line_no, f"not valid JSON: {exc.msg}") from None
            except ValueError as exc:  # a key given twice, a number past the digit limit
                raise RowFileError(path, line_no, str(exc)) from None
            except RecursionError:  # past the parser's ~1,000 levels; no row needs 10
                raise RowFileError(path, line_no, "nested too deeply to read") from None
            if not isinstance(row, dict):
                raise RowFileError(path, line_no,
                                   f"expected a JSON object, got {type(row).__name__}")
            yield line_no, row


def csv_rows(path: Path, delimiter: str = ",",
             check_header: Callable[[Sequence[str]], None] | None = None) -> Iterator[Row]:
    """Each data row as ``{column: value}`` with the line it ends on.

    Header names are stripped of surrounding blanks, and none may repeat (which column
    would count?). ``check_header`` sees them before
    any row and raises ValueError saying what is wrong (reported at line 1). A row with
    more values than the header has columns is an error, not a silently dropped value, and
    so is a quote never closed (which would swallow the rest of the file as one field).
    """
    with _open(path, newline="") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter, strict=True)
        try:
            header = [name.strip() for name in reader.fieldnames or []]
            if twice := next((n for i, n in enumerate(header) if n in header[:i]), None):
                raise RowFileError(path, 1, f"{twice}: column named twice")
            if check_header is not None:
                try:
                    check_header(header)
                except ValueError as exc:
                    raise RowFileError(path, 1, str(exc)) from None
            reader.fieldnames = header
            for row in reader:
                if None in row:
                    raise RowFileError(path, reader.line_num, f"more values than the "
                                                              f"{len(header)} header columns")
                yield reader.line_num, row
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):  # the record that never ended
                raise RowFileError(path, reader.line_num + 1, "not valid CSV: a quote opened "
                                   "here is never closed") from None
            raise RowFileError(path, reader.line_num, f"not valid CSV: {exc}") from None


@contextmanager
def _open(path: Path, newline: str | None = None) -> Iterator[TextIO]:
    """The file as text; a failure to open or decode it is a RowFileError."""
    try:
        handle = path.open(encoding="utf-8-sig", newline=newline)
    except OSError as exc:
        raise RowFileError(path, 0, f"cannot read: {exc.strerror or exc}") from None
    with handle:
        try:
            yield handle
        except UnicodeDecodeError:  # its offset is within the decoder's chunk: find the line
            line, column = _first_undecodable(path)
            raise RowFileError(path, line, f"not UTF-8 text (byte {column} of the line)"
                               ) from None


def _first_undecodable(path: Path) -> tuple[int, int]:
    """(line, 1-based byte within it) of the first bytes that are not UTF-8."""
    with path.open("rb") as raw:
        for line_no, data in enumerate(raw, start=1):
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                return line_no, exc.start + 1
    return 0, 0  # pragma: no cover (the text decoder found one)


#: The namespace of the ids ``RowIds`` derives (fixed: an id must not change between runs).
ROW_IDS = uuid.UUID("6f1c2a0e-7d4b-5c1e-9a53-0b7e2f6d8c41")


def blank(value: Any) -> bool:
    """None, or text that is empty once stripped (CSV's missing cell)."""
    return value is None or (value.__class__ is str and not value.strip())


class RowIds:
    """Stable ids for the rows of one file that carry none: from a row's content and how
    many identical rows came before it, so importing a file twice imports nothing the
    second time while genuinely repeated rows still count."""

    def __init__(self) -> None:
        self._seen: Counter[bytes] = Counter()

    def __call__(self, row: Mapping[str, Any]) -> str:
        """The id of ``row`` (the next identical row gets the next id)."""
        content = json.dumps({k: v for k, v in row.items() if not blank(v)},
                             sort_keys=True, default=str)
        key = hashlib.blake2b(content.encode(), digest_size=16).digest()
        self._seen[key] += 1
        return str(uuid.uuid5(ROW_IDS, f"{key.hex()}:{self._seen[key]}"))


class FileRow(BaseModel):
    """A row of a file this package writes and reads back (``export``'s side files):
    every key known, nothing changed after reading, and no text the store cannot keep
    (a NUL, a lone surrogate: refused here, before anything is written)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _storable(self) -> FileRow:
        check_params(dict(self))
        return self


#: An identifier read from a file, checked as ``record()`` checks one.
Identifier = Annotated[StrictStr, AfterValidator(lambda v: check_identifier(v, "it"))]

M = TypeVar("M", bound=BaseModel)


def model_rows(path: Path, model: Callable[[int, dict[str, Any]], type[M]]) -> Iterator[M]:
    """Each JSON line of ``path`` validated into the model ``model(line, row)`` picks,
    streamed; the first problem raises RowFileError naming its line and field."""
    for line, raw in jsonl_rows(path):
        kind = model(line, raw)
        try:
            yield kind.model_validate(raw)
        except ValidationError as exc:
            problem = describe_problem(exc.errors()[0], kind).removeprefix("<root>: ")
            field = problem.partition(":")[0]  # an identifier check's "it" is that field
            raise RowFileError(path, line, problem.replace(": it ", f": {field} ", 1)
                               ) from None
