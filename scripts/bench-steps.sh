#!/usr/bin/env bash
# Per-step cost of `rbook run` (docs/development.md, "Benchmarks"): whole-process wall time of `rbook run` on a
# generated chain runbook of N simulated deploy steps, in three modes:
#   off       rbook run --control-plane off      (engine + durable state file)
#   embedded  rbook run                          (the embedded control plane, its SQLite in .rbook/)
#   serve     rbook run --control-plane URL      (a separate `rbook serve` process, SQLite)
# Each (mode, N) runs REPS times in a fresh folder; the table shows medians. "per step" is
# reported two ways: t(N)/N, and the marginal cost between two lengths, (t(N2)-t(N1))/(N2-N1),
# which takes out the fixed start-up cost (process start, embedded control plane, report).
# Targets (docs/control-plane.md, "Two replicas on one PostgreSQL"): off <= 1 ms/step at N = 1,000 and flat from 200 to 2,000; embedded
# <= 1.5 ms/step at N = 1,000, flat in N.
#
# Usage: scripts/bench-steps.sh [-r REPS] [-n "50 200 1000 2000"] [-m "off embedded serve"]
#                               [-b RBOOK_BINARY] [-d WORK_DIR] [-k]
#   -r REPS    runs per (mode, N), median taken (default 3; at least 1)
#   -n LIST    chain lengths (default "50 200 1000 2000"), ascending
#   -m LIST    modes (default "off embedded serve")
#   -b BIN     an rbook binary to measure (default: go build ./cmd/rbook into WORK_DIR)
#   -d DIR     where the run folders and databases go (default: mktemp -d; its disk is measured)
#   -k         keep WORK_DIR (default: removed at exit)
# Output: a Markdown table on stdout; progress on stderr. Exit 1 when a run fails (its output
# is printed). Needs bash, python3 (the runbook generator and the medians) and Go (unless -b).
set -euo pipefail

reps=3
lengths="50 200 1000 2000"
modes="off embedded serve"
bin=""
work=""
keep=0
while getopts "r:n:m:b:d:kh" opt; do
  case "$opt" in
  r) reps=$OPTARG ;;
  n) lengths=$OPTARG ;;
  m) modes=$OPTARG ;;
  b) bin=$OPTARG ;;
  d) work=$OPTARG ;;
  k) keep=1 ;;
  h) sed -n '2,22p' "$0"; exit 0 ;;
  *) echo "usage: $0 [-r REPS] [-n LENGTHS] [-m MODES] [-b BIN] [-d DIR] [-k]" >&2; exit 2 ;;
  esac
done
if ! [[ "$reps" =~ ^[1-9][0-9]*$ ]]; then echo "bench-steps: -r $reps: want a whole number >= 1" >&2; exit 2; fi
for n in $lengths; do
  if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then echo "bench-steps: -n: $n is not a step count" >&2; exit 2; fi
done
for m in $modes; do
  case "$m" in off | embedded | serve) ;; *) echo "bench-steps: -m: unknown mode $m (off, embedded, serve)" >&2; exit 2 ;; esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "$work" ]; then work=$(mktemp -d "${TMPDIR:-/tmp}/rbook-bench-steps.XXXXXX"); else mkdir -p "$work"; fi
work="$(cd "$work" && pwd)"
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  if [ "$keep" = 0 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

if [ -z "$bin" ]; then
  echo "bench-steps: building rbook" >&2
  (cd "$root" && go build -o "$work/rbook" ./cmd/rbook)
  bin="$work/rbook"
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

# gen N DIR: runbooks/chain.yaml with N deploy steps (simulated in v1) and its values file.
gen() {
  mkdir -p "$2/runbooks"
  python3 - "$1" "$2/runbooks/chain.yaml" <<'EOF'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write("runbook_name: chain\nsubscriptions: [sub-bench]\nstate_file_path: .rbook/chain.state.json\n")
    f.write("max_step_timeout_seconds: 300\nrunbook_steps:\n")
    for i in range(n):
        f.write(f"  - name: deploy-{i:05d}\n    type: deploy\n    kql_or_template: remediation/app-{i:05d}.json\n"
                f"    params: {{ appName: app-{i:05d} }}\n    on_fail: halt\n")
EOF
  echo "{}" >"$2/runbooks/chain.values.yaml"
}

serve_url=""
start_serve() {
  mkdir -p "$work/serve"
  RBOOK_APPROVAL_SECRET=bench-steps-secret-0123456789abcdef \
    "$bin" serve --addr 127.0.0.1:0 --db "$work/serve/cp.db" >"$work/serve/out" 2>"$work/serve/err" &
  serve_pid=$!
  for _ in $(seq 1 200); do
    serve_url=$(grep -o 'listening on http://[^ ]*' "$work/serve/out" 2>/dev/null | sed 's/listening on //' || true)
    [ -n "$serve_url" ] && return 0
    if ! kill -0 "$serve_pid" 2>/dev/null; then break; fi
    sleep 0.05
  done
  echo "bench-steps: rbook serve did not start:" >&2; cat "$work/serve/err" >&2; exit 1
}

# one MODE N REP: prints the wall time of one rbook run in nanoseconds.
one() {
  local mode=$1 n=$2 rep=$3 dir="$work/$1-$2-$3" args=()
  rm -rf "$dir"; gen "$n" "$dir"
  case "$mode" in
  off) args=(--control-plane off) ;;
  serve) args=(--control-plane "$serve_url") ;;
  esac
  local t0 t1 rc=0
  t0=$(date +%s%N)
  (cd "$dir" && env -u RBOOK_CONTROL_PLANE -u CI -u GITHUB_ACTIONS "$bin" run chain "${args[@]}" </dev/null >out 2>err) || rc=$?
  t1=$(date +%s%N)
  if [ "$rc" != 0 ] || ! grep -q "COMPLETED" "$dir/out"; then
    echo "bench-steps: $mode N=$n run $rep failed (exit $rc):" >&2; tail -n 20 "$dir/out" "$dir/err" >&2; exit 1
  fi
  rm -rf "$dir"
  echo $((t1 - t0))
}

case " $modes " in *" serve "*) start_serve ;; esac
results="$work/results.tsv"
: >"$results"
# Rounds rather than one length at a time: each round runs every (N, mode) once, so a disk whose
# synced-write time drifts over the minutes (a shared machine's does) weighs on every length
# alike instead of bending the marginal costs.
for rep in $(seq 1 "$reps"); do
  for n in $lengths; do
    for mode in $modes; do
      ns=$(one "$mode" "$n" "$rep")
      printf '%s\t%s\t%s\n' "$mode" "$n" "$ns" >>"$results"
      echo "bench-steps: $mode N=$n run $rep: $((ns / 1000000)) ms" >&2
    done
  done
done

python3 "$(dirname "$0")/bench-summary.py" "$results" "$reps" "$modes" "$lengths" step \
  'Whole-process wall time of `rbook run` on a chain of N simulated deploy steps' \
  'off=`--control-plane off`' 'embedded=embedded control plane' 'serve=separate `rbook serve`'
