"""Entry point: ``python -m pytest_specdecode.sim`` (like ``python -m sglang.launch_server``)."""

from __future__ import annotations

from pytest_specdecode.sim.launch import main

if __name__ == "__main__":
    raise SystemExit(main())
