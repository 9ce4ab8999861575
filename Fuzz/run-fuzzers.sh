#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 30) from the committed seeds,
# as many at once as there are cores (FERRY_FUZZ_JOBS to change it; each fuzzer is one thread).
# Usage: Fuzz/run-fuzzers.sh [SECONDS]    — exits non-zero on any crash, leak or sanitizer report.
#        Fuzz/run-fuzzers.sh --build      — only builds them (scripts/test does, early, in the background).
set -euo pipefail
cd "$(dirname "$0")"
flags=(-c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld)
swift build "${flags[@]}"
[ "${1:-}" != --build ] || exit 0
secs=${1:-30}
jobs=${FERRY_FUZZ_JOBS:-$(nproc)}
bin=$(swift build "${flags[@]}" --show-bin-path)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
targets=(FuzzFrameDecoder FuzzHandshake FuzzBLIP FuzzReplication FuzzHTTP FuzzREST FuzzDNS)
echo "fuzz: ${targets[*]} for ${secs}s each, $jobs at a time"
for t in "${targets[@]}"; do
  mkdir -p "$work/$t/corpus"
  cp seeds/$t/* "$work/$t/corpus/"
  # A Multicast DNS packet may be 9000 bytes (RFC 6762 §17); the other inputs stay under 4 KiB.
  len=4096; if [ "$t" = FuzzDNS ]; then len=9000; fi
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  "$bin/$t" -max_total_time="$secs" -max_len="$len" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/$t/" "$work/$t/corpus" > "$work/$t/log" 2>&1 &
done
wait || true
failed=0
for t in "${targets[@]}"; do
  echo "fuzz: $t"
  grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY)' "$work/$t/log" || true
  # What decides is an artifact: libFuzzer writes one for every crash, leak and timeout.
  if ls "$work/$t"/crash-* "$work/$t"/leak-* "$work/$t"/timeout-* >/dev/null 2>&1; then
    echo "fuzz: $t FAILED; artifacts:"; ls "$work/$t"; tail -30 "$work/$t/log"; failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "fuzz: clean"
