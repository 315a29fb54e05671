"""What one webhook delivery costs the gateway before the daemon is asked: the CPU time
of verifying its signature, parsing its JSON and rendering the hook's template
(:mod:`agenthost.automation.webhooks`), for a pull request's payload of about 23 KB,
against ``json.loads`` of the same body alone, in one run.

    .venv/bin/python benchmarks/webhooks.py [--deliveries 5000] [--json]

CPU: user + system time of this process (``RUSAGE_SELF`` deltas) per delivery; the
HTTP side (uvicorn, Starlette) is not counted.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agenthost.automation.webhooks import parse_template, render, signature, verify  # noqa: E402

SECRET = b"s" * 64
TEMPLATE = "Review {pull_request.html_url}: {pull_request.title}\n\n{pull_request.body}"


def payload() -> bytes:
    """A pull request's delivery, shaped like GitHub's (a long body, labels, a
    repository, and the many fields a real one has stood for by padding)."""
    pr = {
        "action": "opened",
        "number": 7,
        "pull_request": {
            "title": "Fix the parser",
            "html_url": "https://github.com/me/app/pull/7",
            "body": "x" * 4000,
            "user": {"login": "me"},
            "labels": [{"name": "bug"}] * 10,
            "head": {"sha": "a" * 40},
        },
        "repository": {"full_name": "me/app", "description": "d" * 500},
        "sender": {"login": "me"},
        "padding": [{"k": i, "v": "y" * 100} for i in range(150)],
    }
    return json.dumps(pr).encode()


def cpu_per_call(fn: Callable[[], object], n: int) -> float:
    """Microseconds of CPU (user + system) per call of ``fn``, over ``n`` calls."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(n):
        fn()
    after = resource.getrusage(resource.RUSAGE_SELF)
    spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return spent / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=5000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    body = payload()
    headers = {
        "x-hub-signature-256": signature(SECRET, body),
        "x-github-event": "pull_request",
        "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
    }
    template = parse_template(TEMPLATE)

    def delivery() -> object:
        return render(template, verify(headers, body, SECRET).payload)

    results = {
        "body_bytes": len(body),
        "delivery_cpu_us": round(cpu_per_call(delivery, args.deliveries), 1),
        "json_loads_cpu_us": round(cpu_per_call(lambda: json.loads(body), args.deliveries), 1),
    }
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"a {results['body_bytes']}-byte delivery: {results['delivery_cpu_us']} us of CPU "
        f"(verify, parse, render); json.loads alone {results['json_loads_cpu_us']} us"
    )


if __name__ == "__main__":
    main()
