"""Embedded store paths that cannot hold a store: one clear line, and nothing left behind.

Each case opens a real embedded store (or tries to) and then looks at the file system:
a refused path must not leave a lock file, a folder or a half-made store anywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import isolate, run

from trustroute.profiles.store import (
    InvalidStoreURL,
    Store,
    StoreUnavailableError,
    parse_store_url,
)


def tree(root: Path) -> list[str]:
    """Every path under ``root``, relative, sorted."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_tilde_is_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    isolate(work, monkeypatch)
    assert parse_store_url("surrealkv://~/data/db").path == home / "data" / "db"
    assert parse_store_url("surrealkv://~").path == home
    result = run(capsys, "record", "a", "t", "--success", "--store", "surrealkv://~/db")
    assert result.code == 0, result.err
    assert tree(work) == []  # no folder named ~ in the working directory
    assert (home / "db").is_dir()


def test_a_folder_holding_other_files_is_not_made_a_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    before = tree(tmp_path)
    with pytest.raises(StoreUnavailableError) as info:
        Store(f"surrealkv://{project}")
    assert str(info.value) == (
        f"could not open the embedded store at {project}: it is a folder holding other "
        f"files, not a store; name a new folder for the store (such as "
        f"surrealkv://{project}/db)")
    isolate(project, monkeypatch)
    result = run(capsys, "record", "a", "t", "--success", "--store", "surrealkv://.")
    assert result.code == 2 and "it is a folder holding other files" in result.error_line
    assert tree(tmp_path) == before  # no clog/, manifest/ among the files, no project.lock
    with pytest.raises(StoreUnavailableError, match="a folder holding other files"):
        Store("surrealkv:///")  # the root folder (its lock had no name: a ValueError)
    empty = tmp_path / "empty"
    empty.mkdir()
    with Store(f"surrealkv://{empty}") as store:  # an empty folder becomes the store
        assert store.location.path == empty
    with Store(f"surrealkv://{empty}/"):  # and is one: reopened, trailing slash or not
        pass


def test_a_path_through_a_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(StoreUnavailableError) as info:
        Store(f"surrealkv://{tmp_path / 'afile' / 'sub' / 'db'}")
    assert str(info.value) == (f"could not open the embedded store at "
                               f"{tmp_path / 'afile' / 'sub' / 'db'}: {tmp_path / 'afile'} "
                               "is a file, not a folder")
    assert tree(tmp_path) == ["afile"]


@pytest.mark.parametrize("name", ["x/" + "n" * 300, "n" * 300 + "/db", "x/" + "n" * 253])
def test_a_name_too_long_is_one_line_and_makes_no_folder(tmp_path: Path, name: str) -> None:
    with pytest.raises(StoreUnavailableError) as info:
        Store(f"surrealkv://{tmp_path / name}")
    assert str(info.value).startswith(f"could not open the embedded store at "
                                      f"{tmp_path / name}: File name too long")
    assert tree(tmp_path) == []


@pytest.mark.parametrize(("url", "message"), [
    ("rocksdb://x/db", "store URL scheme 'rocksdb' is not supported; use surrealkv://, "
                       "mem://, ws://, wss://, http:// or https://"),
    ("surrealkv://a\x00b", "store URL 'surrealkv://a\\x00b' holds a NUL character"),
    ("ws://localhost:99999", "store URL 'ws://localhost:99999': port out of range 0-65535"),
    ("ws://localhost:80x", "store URL 'ws://localhost:80x': port could not be cast to "
                           "integer value as '80x'"),
    ("http://[::1:8000", "store URL 'http://[::1:8000': invalid IPv6 URL"),
    ("surrealkv://~nosuchuser_bifix/db", "store URL 'surrealkv://~nosuchuser_bifix/db': "
                                         "no home folder for ~nosuchuser_bifix"),
])
def test_bad_urls_are_refused_before_anything_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidStoreURL) as info:
        Store(url)
    assert str(info.value) == message
    assert tree(tmp_path) == []


def test_an_output_path_through_a_file_says_it_is_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    isolate(tmp_path, monkeypatch)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "log.csv").write_text("agent,task_type,task,quality\na,t,x,1\n")
    assert run(capsys, "record", "a", "t", "--success", "-s", "surrealkv://db").code == 0
    for argv, said in ((("export", "notes.txt/x.jsonl"), "notes.txt/x.jsonl: "),
                       (("report", "--out", "notes.txt/r.html"), "--out notes.txt/r.html: "),
                       (("replay", "log.csv", "--plot", "notes.txt/p.png"),
                        "--plot notes.txt/p.png: ")):
        store = ("-s", "surrealkv://db") if argv[0] != "replay" else ()
        result = run(capsys, *argv, *store)
        assert result.code == 2
        assert result.error_line == f"{said}notes.txt is a file, not a folder", argv
    assert (tmp_path / "notes.txt").read_text() == "mine"
