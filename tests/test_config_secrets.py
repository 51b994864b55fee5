"""A canary password never appears in an error, a repr or the CLI's output."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run

from trustroute import AgentRouter
from trustroute.profiles.store.location import parse_store_url, redact_credentials
from trustroute.profiles.store.settings import StoreSettings
from trustroute.router.config import ConfigError, RouterConfig, load_config
from trustroute.router.config.secrets import mask_credentials

CANARY = "canary-7f3a9c"


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DBP", CANARY)
    monkeypatch.delenv("TRUSTROUTE_STORE", raising=False)
    return tmp_path


# One slash (``ws:/``), a scheme we do not speak, no colon (``ws//``): each quotes
# the URL in its error; the last has a password no URL parser would split off.
BAD_URLS = ["ws:/root:${DBP}@host", "ftp://root:${DBP}@host/x", "ws//root:${DBP}@host",
            "ws:/root:${DBP}/x y@host"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_mistyped_store_url_never_shows_the_password(workdir: Path, url: str) -> None:
    path = workdir / "router.yaml"
    path.write_text(f'store: "{url}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "store.url" in str(info.value)
    assert CANARY not in str(info.value)
    with pytest.raises(ConfigError) as again:
        AgentRouter.from_config(path)
    assert CANARY not in str(again.value)


@pytest.mark.parametrize(("url", "shown"), [
    (f"ws:/root:{CANARY}@host", "'ws:/***@host' must look like"),
    (f"wss://root:{CANARY}@", "'wss://***@' names no server host"),  # not left to the SDK
    (f"wss://root:{CANARY}@/rpc", "'wss://***@/rpc' names no server host"),
])
def test_the_api_masks_a_mistyped_url_given_in_code(url: str, shown: str) -> None:
    with pytest.raises(ValueError) as info:
        AgentRouter(["a"], store=url)
    assert shown in str(info.value)
    assert CANARY not in str(info.value)


def test_validation_errors_never_echo_a_secret(workdir: Path) -> None:
    path = workdir / "router.json"
    path.write_text('{"store": {"url": "ws://root:${DBP}@db:1", "password": "${DBP}", '
                    '"retry_attempts": "${DBP}"}, "seed": "x"}')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "store.retry_attempts" in message and "seed" in message
    assert CANARY not in message


def test_reprs_hide_credentials() -> None:
    settings = StoreSettings(url=f"ws://root:{CANARY}@db:8000", password=CANARY)
    config = RouterConfig(store=settings)
    location = parse_store_url(settings.url)
    for text in (repr(settings), str(settings), repr(config), str(config), repr(location)):
        assert CANARY not in text
        assert "ws://***@db:8000" in text


def test_mask_credentials_hides_urls_and_known_values() -> None:
    assert redact_credentials(f"at 'wss://u:{CANARY}@h/rpc' and ws:/u:{CANARY}@h") == (
        "at 'wss://***@h/rpc' and ws:/***@h")
    assert redact_credentials("mailto-free text: user@example.com, ratio 1:2") == (
        "mailto-free text: user@example.com, ratio 1:2")
    assert mask_credentials(f"token {CANARY}!", [CANARY, "ab"]) == "token ***!"
    assert mask_credentials("ab stays", ["ab"]) == "ab stays"  # too short to search for


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_cli_never_prints_the_password(capsys: pytest.CaptureFixture[str],
                                           workdir: Path, url: str) -> None:
    (workdir / "router.yaml").write_text(f'store: "{url}"\n')
    from_config = run(capsys, "profiles")
    assert from_config.code == 2 and "store.url" in from_config.error_line
    given = run(capsys, "profiles", "--store", url.replace("${DBP}", CANARY))
    assert given.code == 2 and "store URL" in given.error_line
    for result in (from_config, given):
        assert CANARY not in result.out + result.err


def test_the_cli_masks_the_configured_password_wherever_it_appears(
        capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    # the password doubles as the strategy name: the error quotes it, masked
    (workdir / "router.yaml").write_text(
        "store: {url: 'mem://', password: '${DBP}'}\nstrategy: {params: {x: 1}}\n")
    result = run(capsys, "route", "code", "-a", "a", "--strategy", CANARY)
    assert result.code == 2
    assert CANARY not in result.out + result.err
    assert "***" in result.error_line
