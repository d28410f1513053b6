"""``python -m tests_docs.wait_ready COMMAND``: block until that server command's server answers.

The port comes from the command's ``--port`` (SGLang's default 30000); ready
is a 200 from ``/health_generate``, as the plugin's own gate starts with.
Exit 1 after 60 s without one.
"""

from __future__ import annotations

import shlex
import sys
import time
import urllib.error
import urllib.request

DEADLINE = 60.0


def port_of(command: str) -> int:
    words = shlex.split(command)
    for i, word in enumerate(words):
        if word == "--port" and i + 1 < len(words):
            return int(words[i + 1])
        if word.startswith("--port="):
            return int(word.split("=", 1)[1])
    return 30000


def main(argv: list[str]) -> int:
    url = f"http://127.0.0.1:{port_of(argv[0])}/health_generate"
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                if reply.status == 200:
                    return 0
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.1)  # polling the server's own readiness answer
    print(f"wait_ready: {url} did not answer 200 within {DEADLINE:.0f} s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
