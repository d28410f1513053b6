"""The client's rate against the server's own counter, read whatever its Content-Encoding."""

from __future__ import annotations

from pytest_specdecode.client import SGLangClient
from pytest_specdecode.throughput.accuracy import measure_round
from pytest_specdecode.throughput.workload import PromptBuilder, ThroughputCase

from .conftest import Script, fake_token_count

CASE = ThroughputCase(40, 2, 10)


def builder() -> PromptBuilder:
    return PromptBuilder(fake_token_count, domain="chat")


def test_a_gzipped_counter_brackets_the_round(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    script.metrics_coding = "gzip"  # as SGLang's exporter answers a request accepting gzip
    with SGLangClient(url, timeout=5) as client:
        sample = measure_round(client, CASE, builder())
    assert sample.client_tokens == 2 * 10  # two requests of the script's 1+3+2+4 tokens
    assert sample.server_tokens == 0.0  # the script's counter stands still
