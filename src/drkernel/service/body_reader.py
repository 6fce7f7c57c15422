"""How many JSON tokens (values and keys) a request body holds, counted before the server parses it.

Parsing JSON into Python objects is one C call that holds the GIL for as long as it runs, about 130 ns a
token (0.85 s for a 31-MiB body of small numbers on a 2-core host), and every client's requests wait
meanwhile. Bytes do not bound it: a body of numbers has 10x the tokens of a body of code. So the server
parses a body itself only when it holds at most `MAX_BODY_TOKENS` tokens (about 0.15 s at most; a
maximal legitimate batch holds about 0.5 M). `upper_bound` reads that from the bytes alone (separators
and openings, those inside strings included), milliseconds of GIL; a body past the bound is counted
exactly in a child process of this module (``python -m drkernel.service.body_reader``: the body on
stdin, ``{"tokens": n}`` on stdout, its own memory and CPU limits), so its parse costs the server
nothing when it is refused (`admission.read_body_tokens`).
"""

from __future__ import annotations

import json
import resource
import sys

MAX_BODY_TOKENS = 1 << 20
"""Most JSON values and keys one request body may hold."""
CHILD_MEMORY_BYTES = 2 << 30
"""Address space of a counting child: a 32-MiB body of small values is about 1 GiB of Python objects."""
CHILD_CPU_S = 30


def upper_bound(body: bytes) -> int:
    """At least the body's number of JSON values plus keys: every value but the first follows a comma or
    an opening bracket, every key a comma or a brace (each counted inside strings too)."""
    return 2 * (body.count(b",") + body.count(b"[") + body.count(b"{") + 1)


def count_tokens(value: object) -> int:
    """Values and keys of a parsed JSON document, walked without recursion."""
    stack, tokens = [value], 0
    while stack:
        item = stack.pop()
        tokens += 1
        if isinstance(item, dict):
            tokens += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return tokens


def main() -> None:
    """Child entry: a body on stdin; ``{"tokens": n}``, or ``{"invalid": msg}`` for a body that is not
    JSON (the server's own parse then answers it), on stdout. A child killed by its limits answers nothing."""
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_S, CHILD_CPU_S))
    try:
        answer: dict = {"tokens": count_tokens(json.loads(sys.stdin.buffer.read()))}
    except (ValueError, RecursionError) as e:
        answer = {"invalid": str(e)[:300]}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
