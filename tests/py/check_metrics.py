"""Parses a /metrics answer (stdin) with the Prometheus Python client.

Usage: check_metrics.py prometheus|openmetrics

Prints {"family": "type", ...} as JSON. Exits 1, naming them, when a family
has no help text or is typed "unknown" (what a classic parser makes of a
counter whose TYPE line names no sample), or when the text does not parse.
"""

import json
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_text


def main() -> int:
    fmt = sys.argv[1]
    text = sys.stdin.read()
    parse = {"prometheus": parse_text, "openmetrics": parse_openmetrics}[fmt]
    families = {}
    problems = []
    for family in parse(text):
        families[family.name] = family.type
        if family.type in ("unknown", "untyped"):
            problems.append(f"{family.name}: typed {family.type}")
        if not family.documentation:
            problems.append(f"{family.name}: no help text")
        if not family.samples:
            problems.append(f"{family.name}: no samples")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(json.dumps(families, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
