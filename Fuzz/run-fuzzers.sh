#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 30) from the committed seeds.
# Usage: Fuzz/run-fuzzers.sh [SECONDS]    — exits non-zero on any crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-30}
swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
bin=$(swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld --show-bin-path)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in FuzzFrameDecoder FuzzHandshake FuzzBLIP FuzzReplication FuzzHTTP FuzzREST FuzzDNS; do
  mkdir -p "$work/$t"
  cp seeds/$t/* "$work/$t/"
  # A Multicast DNS packet may be 9000 bytes (RFC 6762 §17); the other inputs stay under 4 KiB.
  len=4096; if [ "$t" = FuzzDNS ]; then len=9000; fi
  echo "fuzz: $t for ${secs}s"
  "$bin/$t" -max_total_time="$secs" -max_len="$len" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/$t" 2>&1 | grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY)' || true
  if ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* >/dev/null 2>&1; then
    echo "fuzz: $t FAILED; artifacts:"; ls "$work"; exit 1
  fi
done
echo "fuzz: clean"
