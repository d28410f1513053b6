"""The secret options, as the facts' rule finds them in SGLang's own table."""

from __future__ import annotations

import pytest

from pytest_specdecode import facts
from pytest_specdecode.facts.secrets import is_secret_name
from pytest_specdecode.output.redact import is_secret_flag


@pytest.mark.parametrize("build", facts.BUILDS)
def test_the_rule_picks_the_keys_and_the_password_out_of_every_option(build: str) -> None:
    table = facts.load(build=build)
    assert len(table.options) >= 531
    assert {o.dest for o in table.secret_options()} == {
        "api_key",
        "admin_api_key",
        "ssl_keyfile_password",
    }


@pytest.mark.parametrize(
    "flag",
    [
        "--tokenizer-path",  # "token" alone counts tokens or names a tokenizer
        "--skip-tokenizer-init",
        "--max-total-tokens",
        "--kt-max-deferred-experts-per-token",
        "--bucket-time-to-first-token",
        "--prefill-delayer-max-delay-passes",  # "pass", not "password"
        "--ssl-keyfile",  # paths beside the secret, not secrets
        "--ssl-certfile",
        "--ssl-ca-certs",
        "--enable-ssl-refresh",
        "--tokenizer-metrics-custom-labels-header",
    ],
)
def test_options_that_are_no_secrets_are_not_taken_for_one(flag: str) -> None:
    option = facts.load().option(flag)
    assert option is not None
    assert not option.secret
    assert not is_secret_flag(flag)


def test_secret_flags_abbreviations_and_any_api_key_are_secret_flags() -> None:
    assert all(is_secret_flag(f) for f in ("--api-key", "--admin-api-key"))
    assert is_secret_flag("--ssl-keyfile-password")
    assert is_secret_flag("--ssl-keyfile-pass")  # argparse takes it for the password
    assert not is_secret_flag("--ssl-keyfile")  # exactly the key file's path
    assert is_secret_flag("--dflash-api-key")  # not SGLang's, a key by its name


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("hf_token", True),
        ("AUTH-TOKEN", True),
        ("db_passwd", True),
        ("client_secret", True),
        ("max_new_tokens", False),
        ("token_budget", False),
        ("keyfile", False),
    ],
)
def test_the_rule_reads_a_names_words(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
