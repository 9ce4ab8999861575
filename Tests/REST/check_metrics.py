#!/usr/bin/env python3
"""Parses a /_metrics scrape with prometheus_client's own text parser (the format's reference
implementation, not Ferry's view of it) and checks samples against expected values.

usage: check_metrics.py SCRAPE_FILE 'name{label="v",...}=VALUE' ...
Exits 0 when every expected sample is present with its value, 1 otherwise (and says which)."""
import re
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = open(sys.argv[1]).read()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = s.name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items())) + "}"
            samples[key] = s.value
    failed = []
    for spec in sys.argv[2:]:
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?=(.+)', spec)
        if not m:
            failed.append(f"bad expectation {spec}")
            continue
        name, labels, value = m.group(1), m.group(2) or "{}", float(m.group(3))
        pairs = sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', labels))
        key = name + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"
        if key not in samples:
            failed.append(f"missing {key}")
        elif samples[key] != value:
            failed.append(f"{key} = {samples[key]}, expected {value}")
    for f in failed:
        print(f)
    print(f"{len(samples)} samples parsed; {len(sys.argv) - 2 - len(failed)} of {len(sys.argv) - 2} expectations met")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
