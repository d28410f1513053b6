"""Every exception the plugin defines is under the one root, ``SpecDecodeError``.

Users (and the plugin's own hooks) catch ``SpecDecodeError`` to tell a
reported failure from a bug; an exception class outside it escapes that net.
The walk imports every module of the package, so a new class is checked
without anyone remembering to list it here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import pytest_specdecode
from pytest_specdecode.errors import SpecDecodeError, SpecDecodeWarning

# Classes that stay outside the root on purpose, each with its reason.
ALLOWED_OUTSIDE = {
    # Internal control flow of the coding check: raised and caught inside
    # coding/check.py, never seen by users.
    "pytest_specdecode.coding.check._Mismatch",
    # The neutral facts package imports nothing from the plugin (the simulator
    # uses it too); config/flagcheck.py catches Refused and reports a
    # ConfigError in its place.
    "pytest_specdecode.facts.argparser.Refused",
    # wire.py (reading a reply within its bounds) imports nothing from the plugin;
    # the client, the probe and the identity check turn BoundExceeded into their errors.
    "pytest_specdecode.client.wire.BoundExceeded",
    # statefiles.py (shared files, layer 0) imports nothing from the plugin; each caller
    # turns WaitTimeout into its own error (LeaseTimeout, HostDown) or a plain answer.
    "pytest_specdecode.statefiles.WaitTimeout",
}
# The simulator is its own program and imports nothing from the plugin (as
# SGLang would not): its errors become HTTP replies or its own exit lines.
OUTSIDE_PARTS = ("pytest_specdecode.sim",)


def package_modules() -> list[str]:
    names = [pytest_specdecode.__name__]
    for info in pkgutil.walk_packages(pytest_specdecode.__path__, prefix="pytest_specdecode."):
        if info.name.rsplit(".", 1)[-1] != "__main__":  # running it would start a program
            names.append(info.name)
    return sorted(names)


def exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in package_modules():
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Exception) and obj.__module__ == name:
                found[f"{name}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def test_the_walk_finds_the_package_exceptions() -> None:
    names = {f"{c.__module__}.{c.__qualname__}" for c in exception_classes()}
    # A walk that found nothing would pass the check below vacuously.
    assert "pytest_specdecode.service.base.ServiceError" in names
    assert "pytest_specdecode.throughput.domains.DomainError" in names
    assert "pytest_specdecode.service.ssh.UnknownHostKey" in names
    assert names >= ALLOWED_OUTSIDE, ALLOWED_OUTSIDE - names


def checked() -> list[type[BaseException]]:
    return [
        c
        for c in exception_classes()
        if f"{c.__module__}.{c.__qualname__}" not in ALLOWED_OUTSIDE
        and not c.__module__.startswith(OUTSIDE_PARTS)
    ]


def warnings() -> list[type[BaseException]]:
    return [c for c in checked() if issubclass(c, Warning)]


@pytest.mark.parametrize(
    "cls",
    [c for c in checked() if not issubclass(c, Warning)],
    ids=lambda c: f"{c.__module__}.{c.__qualname__}",
)
def test_every_exception_is_under_the_root(cls: type[BaseException]) -> None:
    name = f"{cls.__module__}.{cls.__qualname__}"
    assert issubclass(cls, SpecDecodeError), f"{name} does not derive from SpecDecodeError"


@pytest.mark.parametrize("cls", warnings(), ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_warning_is_under_the_warning_root(cls: type[BaseException]) -> None:
    # Warnings have their own root, so one filter line silences them all.
    assert issubclass(cls, SpecDecodeWarning), f"{cls.__qualname__} is not a SpecDecodeWarning"
