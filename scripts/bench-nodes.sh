#!/usr/bin/env bash
# Per-node cost of `rbook playbook run` (docs/development.md, "Playbook nodes"): whole-process
# wall time on a generated playbook of N deterministic nodes of `true`, each depending on the
# one before (so one runs at a time), in these modes:
#   spawn     a bash loop that runs `true` N times (the process alone, no rbook)
#   off       rbook playbook run --control-plane off   (engine + durable state file)
#   embedded  rbook playbook run                       (the embedded control plane, SQLite in .rbook/)
# Each (mode, N) runs REPS times in a fresh folder; the table shows medians and the marginal
# cost per node between two lengths, (t(N2)-t(N1))/(N2-N1), which takes out start-up. rbook's
# own bookkeeping per node is the rbook mode's marginal cost minus spawn's (target: at most
# 1 ms).
#
# Usage: scripts/bench-nodes.sh [-r REPS] [-n "50 200"] [-m "spawn off embedded"]
#                               [-b RBOOK_BINARY] [-d WORK_DIR] [-k]
#   -r REPS    runs per (mode, N), median taken (default 3; at least 1)
#   -n LIST    chain lengths (default "50 200"), ascending
#   -m LIST    modes (default "spawn off embedded")
#   -b BIN     an rbook binary to measure (default: go build ./cmd/rbook into WORK_DIR)
#   -d DIR     where the run folders go (default: mktemp -d; its disk is measured)
#   -k         keep WORK_DIR (default: removed at exit)
# Output: a Markdown table on stdout; progress on stderr. Exit 1 when a run fails (its output
# is printed). Needs bash, python3 (the medians) and Go (unless -b).
set -euo pipefail

reps=3
lengths="50 200"
modes="spawn off embedded"
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
  h) sed -n '2,21p' "$0"; exit 0 ;;
  *) echo "usage: $0 [-r REPS] [-n LENGTHS] [-m MODES] [-b BIN] [-d DIR] [-k]" >&2; exit 2 ;;
  esac
done
if ! [[ "$reps" =~ ^[1-9][0-9]*$ ]]; then echo "bench-nodes: -r $reps: want a whole number >= 1" >&2; exit 2; fi
for n in $lengths; do
  if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then echo "bench-nodes: -n: $n is not a node count" >&2; exit 2; fi
done
for m in $modes; do
  case "$m" in spawn | off | embedded) ;; *) echo "bench-nodes: -m: unknown mode $m (spawn, off, embedded)" >&2; exit 2 ;; esac
done
truebin=$(type -P true) || { echo "bench-nodes: no true program on PATH" >&2; exit 2; }

root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "$work" ]; then work=$(mktemp -d "${TMPDIR:-/tmp}/rbook-bench-nodes.XXXXXX"); else mkdir -p "$work"; fi
work="$(cd "$work" && pwd)"
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$work"; fi; }
trap cleanup EXIT

case " $modes " in
*" off "* | *" embedded "*)
  if [ -z "$bin" ]; then
    echo "bench-nodes: building rbook" >&2
    (cd "$root" && go build -o "$work/rbook" ./cmd/rbook)
    bin="$work/rbook"
  fi
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  ;;
esac

# gen N DIR: DIR/chain.cantbook, N deterministic nodes of true in a chain.
gen() {
  mkdir -p "$2"
  {
    printf 'version: "1.0"\nname: chain\nnodes:\n'
    for ((i = 0; i < $1; i++)); do
      printf '  - id: n%05d\n    type: deterministic\n    command: "true"\n    args: []\n' "$i"
      if ((i > 0)); then printf '    depends: [n%05d]\n' $((i - 1)); fi
    done
  } >"$2/chain.cantbook"
}

# one MODE N REP: prints the wall time of one run in nanoseconds.
one() {
  local mode=$1 n=$2 rep=$3 dir="$work/$1-$2-$3" args=() t0 t1 rc=0
  rm -rf "$dir"
  if [ "$mode" = spawn ]; then
    t0=$(date +%s%N)
    for ((i = 0; i < n; i++)); do "$truebin"; done
    t1=$(date +%s%N)
    echo $((t1 - t0))
    return
  fi
  gen "$n" "$dir"
  if [ "$mode" = off ]; then args=(--control-plane off); fi
  t0=$(date +%s%N)
  (cd "$dir" && env -u RBOOK_CONTROL_PLANE -u CI -u GITHUB_ACTIONS "$bin" playbook run chain.cantbook "${args[@]}" </dev/null >out 2>err) || rc=$?
  t1=$(date +%s%N)
  if [ "$rc" != 0 ]; then
    echo "bench-nodes: $mode N=$n run $rep failed (exit $rc):" >&2; tail -n 20 "$dir/out" "$dir/err" >&2; exit 1
  fi
  rm -rf "$dir"
  echo $((t1 - t0))
}

results="$work/results.tsv"
: >"$results"
# Rounds: each runs every (N, mode) once, so a drifting machine weighs on every length alike.
for rep in $(seq 1 "$reps"); do
  for n in $lengths; do
    for mode in $modes; do
      ns=$(one "$mode" "$n" "$rep")
      printf '%s\t%s\t%s\n' "$mode" "$n" "$ns" >>"$results"
      echo "bench-nodes: $mode N=$n run $rep: $((ns / 1000000)) ms" >&2
    done
  done
done

python3 "$(dirname "$0")/bench-summary.py" "$results" "$reps" "$modes" "$lengths" node \
  'Wall time of a chain of N nodes of `true`' \
  'spawn=`true` alone (bash loop)' 'off=`--control-plane off`' 'embedded=embedded control plane'
