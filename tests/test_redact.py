"""Secrets masked in text, JSON-like values, pytest reports and the progress line."""

from __future__ import annotations

import io
import itertools
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.output.redact import (
    FRAGMENT,
    MASK,
    MIN_SECRET,
    Redactor,
    for_settings,
    scrub_report,
)

KEY = "sk-PLANTED-7f3a9c1e"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the configured key anywhere, and pieces of it a shortened repr leaves
        (f"x{KEY}y", "x***y"),
        (f"'Bearer {KEY[:11]}...', ...{KEY[-9:]}'", "'Bearer ***', ...***'"),
        # flags on a launch line, in every spelling
        ("sglang --api-key abc123 --port 1", "sglang --api-key *** --port 1"),
        ("sglang --admin-api-key='a b' --x", "sglang --admin-api-key='***' --x"),
        ("['srv', '--api-key', 'zz9q', '--port']", "['srv', '--api-key', '***', '--port']"),
        # SGLang's server_args log line, reprs, JSON, the environment
        ("Args(api_key='s3cr3t', admin_api_key=None)", "Args(api_key='***', admin_api_key=None)"),
        ('{"api_key": "jsonsecret", "n": 2}', '{"api_key": "***", "n": 2}'),
        ("DFLASH_API_KEY=envsecret pytest", "DFLASH_API_KEY=*** pytest"),
        # every secret option of the facts, not only API keys, in every spelling
        ("sglang --ssl-keyfile-password pw9x --p 1", "sglang --ssl-keyfile-password *** --p 1"),
        ("sglang --ssl-keyfile-password='p w' --x", "sglang --ssl-keyfile-password='***' --x"),
        ("sglang --ssl-keyfile-pass=pw9x", "sglang --ssl-keyfile-pass=***"),  # argparse's prefix
        ("['s', '--ssl-keyfile-password', 'pw9x']", "['s', '--ssl-keyfile-password', '***']"),
        ("Args(ssl_keyfile_password='pw9x')", "Args(ssl_keyfile_password='***')"),
        ('{"ssl_keyfile_password": "pw9x"}', '{"ssl_keyfile_password": "***"}'),
        ("SSL_KEYFILE_PASSWORD=pw9x sglang", "SSL_KEYFILE_PASSWORD=*** sglang"),
        # a non-secret option right before a secret one does not take it as its value
        ("sglang --enable-metrics --api-key abc123", "sglang --enable-metrics --api-key ***"),
        # options that are no secrets keep their values
        ("--ssl-keyfile /k.pem --tokenizer-path /t --max-total-tokens 9", None),
        # Authorization headers and bare credentials
        ("{'Authorization': 'Bearer abcdef', 'X': 1}", "{'Authorization': 'Bearer ***', 'X': 1}"),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ***"),
        ("b'Bearer sk-other-1'", "b'Bearer ***'"),
        # prose and code stay readable
        ("give --api-key to the plugin (--dflash-api-key or DFLASH_API_KEY)", None),
        ("Bearer token for the server", None),
        ("api_key: str | None = None", None),
        ("nothing secret here", None),
    ],
)  # fmt: skip
def test_text_masks_secrets_and_leaves_prose(text: str, expected: str | None) -> None:
    assert Redactor([KEY])(text) == (text if expected is None else expected)


def test_masking_is_idempotent_and_short_keys_are_masked_only_in_context() -> None:
    redactor = Redactor(["ab1", KEY])
    once = redactor(f"--api-key ab1 and {KEY} and a cab1")
    assert once == "--api-key *** and *** and a cab1"
    assert redactor(once) == once
    assert redactor.secrets == {KEY}


def test_learn_takes_keys_from_launch_lines() -> None:
    redactor = Redactor()
    redactor.learn("python -m sglang.launch_server --api-key lowkey --admin-api-key 'Adm1n!'")
    assert redactor.secrets == {"lowkey", "Adm1n!"}
    assert redactor("the server said lowkey and Adm1n!") == "the server said *** and ***"


def test_learn_takes_every_secret_option_and_none_of_the_others() -> None:
    redactor = Redactor()
    redactor.learn(
        'sglang --model-path /m --ssl-keyfile /k.pem --ssl-keyfile-password="pw 42" '
        "--tokenizer-path /tok --api-key=k3y-v4lue --port 30000"
    )
    assert redactor.secrets == {"pw 42", "k3y-v4lue"}


def test_a_password_sharing_a_piece_with_the_key_is_masked_whole() -> None:
    # The case: only the key was known, so the piece they share was masked
    # and the rest of the password showed ("pw***-LOCKED-58ac").
    key, password = "sk-PLANTED-4d1f0c9e7b2a", "pw-4d1f0c9e-LOCKED-58ac"
    launch = f"sglang --api-key {key} --ssl-keyfile-password={password}"
    redactor = for_settings(Settings(launch=launch), environ={})
    info = (
        f"launch_command: {launch}; ssl_keyfile_password {password}; {key[:13]}...{password[-9:]}"
    )
    masked = redactor(info)
    assert not [p for p in _pieces(key) | _pieces(password) if p in masked], masked


def _pieces(secret: str, size: int = FRAGMENT) -> set[str]:
    return {secret[i : i + size] for i in range(max(len(secret) - size + 1, 1))}


# Secrets cut from one stock of characters overlap and share pieces; '*' is in it
# so a mask next to what is left of the text could spell a piece anew.
_STOCK = "ab*-cd1e"
_secret = st.text(alphabet=_STOCK, min_size=MIN_SECRET, max_size=24)


@settings(max_examples=300, deadline=None)
@given(
    secrets=st.lists(_secret, min_size=1, max_size=5),
    fillers=st.lists(st.text(alphabet=_STOCK + " x", max_size=12), max_size=7),
    data=st.data(),
)
def test_no_secret_and_no_piece_of_one_survives_masking(
    secrets: list[str], fillers: list[str], data: st.DataObject
) -> None:
    placed = data.draw(st.permutations(secrets))
    text = "".join(a + b for a, b in itertools.zip_longest(fillers, placed, fillvalue=""))
    masked = Redactor(secrets)(text)
    left = [s for s in secrets if s in masked]
    left += [p for s in secrets if len(s) > FRAGMENT for p in _pieces(s) if p in masked]
    assert not left, (text, masked)


def test_value_masks_nested_strings_and_keys() -> None:
    data: dict[str, Any] = {
        "launch": f"srv --api-key {KEY}",
        "rows": [{"note": KEY, "n": 1}, (KEY, 2.5)],
        KEY: None,
    }
    assert Redactor([KEY]).value(data) == {
        "launch": "srv --api-key ***",
        "rows": [{"note": MASK, "n": 1}, (MASK, 2.5)],
        MASK: None,
    }
    assert data["launch"] == f"srv --api-key {KEY}"  # a copy: the input is untouched


def test_for_settings_collects_the_configured_and_launch_keys() -> None:
    settings = Settings(api_key=KEY, launch="srv --admin-api-key adminkey1")
    redactor = for_settings(settings, environ={"DFLASH_API_KEY": "envkey99"})
    assert redactor.secrets == {KEY, "adminkey1", "envkey99"}


def _failure_repr(showlocals: bool) -> Any:
    def request(headers: dict[str, str]) -> None:
        raise ConnectionError("POST /generate failed; is the server running?")

    try:
        request({"Authorization": f"Bearer {KEY}"})
    except ConnectionError:
        info = pytest.ExceptionInfo.from_current()
    return info.getrepr(showlocals=showlocals, style="long")


def test_scrub_report_masks_a_traceback_with_locals_and_keeps_its_structure() -> None:
    longrepr = _failure_repr(showlocals=True)
    assert KEY in str(longrepr)
    report = SimpleNamespace(
        longrepr=longrepr,
        sections=[("Captured log call", f"server_args=X(api_key='{KEY}')")],
        user_properties=[("dflash_service", {"launch": f"srv --api-key {KEY}"})],
    )
    scrub_report(report, Redactor([KEY]))
    assert report.longrepr is longrepr  # still the structured repr: colours, crash line
    assert KEY not in str(report.longrepr)
    assert "'Authorization': 'Bearer ***'" in str(report.longrepr)
    assert "is the server running?" in report.longrepr.reprcrash.message
    assert report.sections == [("Captured log call", "server_args=X(api_key='***')")]
    assert report.user_properties == [("dflash_service", {"launch": "srv --api-key ***"})]


def test_scrub_report_leaves_clean_reports_alone() -> None:
    longrepr = _failure_repr(showlocals=False)
    report = SimpleNamespace(longrepr=longrepr, sections=[], user_properties=[])
    scrub_report(report, Redactor(["not-in-there"]))
    assert report.longrepr is longrepr


class _RendersASecret:
    """A repr whose text is made at render time: masking its members cannot help."""

    def toterminal(self, tw: Any) -> None:
        tw.line(self.__str__())

    def __str__(self) -> str:
        return "Authorization: " + "Bearer " + KEY


def test_scrub_report_falls_back_to_masked_text() -> None:
    report = SimpleNamespace(longrepr=_RendersASecret(), sections=[], user_properties=[])
    scrub_report(report, Redactor([KEY]))
    assert report.longrepr == "Authorization: Bearer ***"


def test_scrub_report_masks_string_and_skip_reprs() -> None:
    report = SimpleNamespace(longrepr=f"failed: api_key='{KEY}'")
    scrub_report(report, Redactor())
    assert report.longrepr == "failed: api_key='***'"
    skip = SimpleNamespace(longrepr=("t.py", 3, f"Skipped: {KEY}"))
    scrub_report(skip, Redactor([KEY]))
    assert skip.longrepr == ("t.py", 3, "Skipped: ***")


def test_progress_line_masks_the_last_log_line() -> None:
    stream = io.StringIO()
    progress = Progress(stream, isatty=False, redact=Redactor([KEY]))
    progress.update("DFLASH", "loading", 1.0, f"server_args=ServerArgs(api_key='{KEY}', port=1)")
    progress.done(f"gave up: {KEY}")
    assert KEY not in stream.getvalue()
    assert "api_key='***'" in stream.getvalue()
    assert "gave up: ***" in stream.getvalue()


def test_a_usage_error_masks_the_key_it_quotes(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        "--dflash-host=127.0.0.1",
        f"--dflash-api-key={KEY}",
        f'--dflash-restart-cmd=/opt/r.sh --token {KEY} --admin-api-key adm1n-key "{{budget}}"',
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --dflash-restart-cmd '/opt/r.sh --token *** *"])
    assert KEY not in result.stderr.str()
    assert "adm1n-key" not in result.stderr.str()


def test_a_mask_that_spells_a_secret_anew_is_masked_too() -> None:
    # Masking "qqqq" between "x" and "yzzzz" leaves "x***yzzzz": the other secret.
    redactor = Redactor(["x***yzzzz", "qqqq"])
    assert redactor("x" + "qqqq" + "yzzzz") == MASK
