"""Rows of CSV/JSONL files with line numbers: one reader for every file the CLI takes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from trustroute.router.row_files import Row, RowFileError, csv_rows, jsonl_rows


def test_jsonl_rows_skip_blank_lines_and_keep_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('\ufeff{"a": 1}\n\n  \n{"a": 2}\n', encoding="utf-8")
    assert list(jsonl_rows(path)) == [(1, {"a": 1}), (4, {"a": 2})]


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_a_jsonl_line_nested_past_the_parser_is_an_error_naming_the_line(
        tmp_path: Path, depth: int) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n' + "[" * depth + "]" * depth + "\n", encoding="utf-8")
    with pytest.raises(RowFileError) as info:
        list(jsonl_rows(path))
    assert (info.value.line, info.value.problem) == (2, "nested too deeply to read")


def test_csv_rows_strip_header_names_and_accept_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(b"\xef\xbb\xbf a ,b\n1,2\n")
    assert list(csv_rows(path)) == [(2, {"a": "1", "b": "2"})]


def test_csv_header_check_and_extra_values_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2,3\n", encoding="utf-8")

    def needs_c(header: Sequence[str]) -> None:
        if "c" not in header:
            raise ValueError("c: missing column")

    with pytest.raises(RowFileError) as info:
        list(csv_rows(path, check_header=needs_c))
    assert (info.value.line, str(info.value)) == (1, f"{path}:1: c: missing column")
    with pytest.raises(RowFileError, match=r":2: more values than the 2 header columns"):
        list(csv_rows(path))


@pytest.mark.parametrize("reader", [jsonl_rows, csv_rows])
def test_unreadable_files_are_row_file_errors(
        tmp_path: Path, reader: Callable[[Path], Iterator[Row]]) -> None:
    with pytest.raises(RowFileError, match="cannot read") as info:
        list(reader(tmp_path / "missing"))
    assert info.value.line == 0
    latin = tmp_path / "latin"
    latin.write_bytes(b'{"a": "caf\xe9"}\n')
    with pytest.raises(RowFileError, match="not UTF-8 text"):
        list(reader(latin))
    late = tmp_path / "late"  # past the decoder's first chunk: the line, not its offset
    late.write_bytes(b'{"a": "b"}\n' * 2000 + b'{"a": "caf\xe9"}\n')
    with pytest.raises(RowFileError, match=r":2001: not UTF-8 text \(byte 11 of the line\)"):
        list(reader(late))
