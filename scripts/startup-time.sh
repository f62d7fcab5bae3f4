#!/usr/bin/env bash
# Start-up cost of the CLI's cheap commands: `rbook --help`, `rbook version` and
# `rbook validate demo` (run from the repository root, so demo is runbooks/demo.yaml).
# Target: <= 20 ms of wall time each on an idle machine. For each command, REPS runs give:
#   wall    median and minimum of the whole process (fork to exit), ms
#   cpu     median user + system time, ms (all threads; steadier than wall on a busy machine)
#   rss     median peak resident set, MiB
#   init    median sum of the package initialisers' clock time (GODEBUG=inittrace=1, its own
#           REPS runs), ms; and their heap bytes and allocations, which do not depend on load
#   own     the same bytes for github.com/rbookhq/… packages alone (gen/ excepted: generated)
# With -i, also the instructions executed (valgrind's callgrind): a count
# that a busy machine does not change, for comparing two builds (median of 3 runs; "n/a" when
# valgrind cannot run the binary: it does not decode every instruction Go's runtime may use).
#
# Usage: scripts/startup-time.sh [-r REPS] [-b RBOOK_BINARY] [-t TOP] [-i]
#   -r REPS   runs per command (default 20; at least 1)
#   -b BIN    an rbook binary to measure (default: go build ./cmd/rbook into a temporary folder)
#   -t TOP    also list the TOP slowest package initialisers of `rbook --help` (min over runs)
#   -i        also count instructions (needs valgrind)
# Output: a Markdown table on stdout; progress on stderr. Exit 1 when a command fails (its
# output is printed). Needs bash, python3 and Go (unless -b).
set -euo pipefail

reps=20
bin=""
top=0
instr=0
while getopts "r:b:t:ih" opt; do
  case "$opt" in
  r) reps=$OPTARG ;;
  b) bin=$OPTARG ;;
  t) top=$OPTARG ;;
  i) instr=1 ;;
  h) sed -n '2,21p' "$0"; exit 0 ;;
  *) echo "usage: $0 [-r REPS] [-b BIN] [-t TOP] [-i]" >&2; exit 2 ;;
  esac
done
if ! [[ "$reps" =~ ^[1-9][0-9]*$ ]]; then echo "startup-time: -r $reps: want a whole number >= 1" >&2; exit 2; fi
if ! [[ "$top" =~ ^[0-9]+$ ]]; then echo "startup-time: -t $top: want a whole number" >&2; exit 2; fi
if [ "$instr" = 1 ] && ! command -v valgrind >/dev/null 2>&1; then
  echo "startup-time: -i needs valgrind (apt-get install -y valgrind)" >&2; exit 2
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
work=$(mktemp -d "${TMPDIR:-/tmp}/rbook-startup-time.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -z "$bin" ]; then
  echo "startup-time: building rbook" >&2
  (cd "$root" && go build -o "$work/rbook" ./cmd/rbook)
  bin="$work/rbook"
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

cd "$root"
env -u CI -u GITHUB_ACTIONS -u RBOOK_CONTROL_PLANE python3 - "$bin" "$reps" "$top" "$instr" <<'EOF'
import os, re, statistics, subprocess, sys, time

binary, reps, top, instr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
commands = [["--help"], ["version"], ["validate", "demo"]]
own = "github.com/rbookhq/rbook-action/"
line_re = re.compile(r"^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes, ([0-9]+) allocs$")

def stderr_of(args, env=None):
    """Runs rbook once and returns what it wrote to stderr; a failure prints its output and exits 1."""
    p = subprocess.run([binary] + args, stdin=subprocess.DEVNULL, capture_output=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(f"startup-time: rbook {' '.join(args)} exited {p.returncode}:\n{p.stdout.decode()}{p.stderr.decode()}")
        sys.exit(1)
    return p.stderr

def measured(args):
    """One run reaped with wait4, for its own CPU time and peak RSS."""
    t0 = time.perf_counter()
    p = subprocess.Popen([binary] + args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - t0) * 1e3
    if os.waitstatus_to_exitcode(status) != 0:
        stderr_of(args)  # prints the output and exits 1
    return wall, (ru.ru_utime + ru.ru_stime) * 1e3, ru.ru_maxrss / 1024

def inittrace(args):
    env = dict(os.environ, GODEBUG="inittrace=1")
    rows = []
    for line in stderr_of(args, env).decode().splitlines():
        m = line_re.match(line)
        if m:
            rows.append((m.group(1), float(m.group(2)), int(m.group(3)), int(m.group(4))))
    return rows

def instructions(args):
    env = dict(os.environ, GODEBUG="asyncpreemptoff=1")  # callgrind cannot follow Go's preemption signals
    counts = []
    for _ in range(3):
        r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary] + args,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        m = re.search(rb"Collected : ([0-9]+)", r.stderr)
        if r.returncode != 0 or not m:
            # valgrind does not decode every instruction Go's runtime may use (RDTSCP, say).
            last = [l for l in r.stderr.decode().splitlines() if "valgrind:" in l or "unhandled" in l][:2]
            print(f"startup-time: valgrind run of rbook {' '.join(args)} failed (exit {r.returncode}): {'; '.join(last)}", file=sys.stderr)
            return None
        counts.append(int(m.group(1)))
    return statistics.median(counts)

rows, slowest = [], {}
for args in commands:
    name = "rbook " + " ".join(args)
    print(f"startup-time: {name} x {reps}", file=sys.stderr)
    runs = [measured(args) for _ in range(reps)]
    traces = [inittrace(args) for _ in range(reps)]
    init_ms = statistics.median(sum(r[1] for r in t) for t in traces)
    last = traces[-1]
    init_bytes, init_allocs = sum(r[2] for r in last), sum(r[3] for r in last)
    own_bytes = sum(r[2] for r in last if (r[0].startswith(own) and not r[0].startswith(own + "gen/")) or r[0] == "main")
    if args == ["--help"]:
        for t in traces:
            for pkg, ms, _, _ in t:
                slowest[pkg] = min(slowest.get(pkg, ms), ms)
    walls = [r[0] for r in runs]
    row = [name, f"{statistics.median(walls):.1f}", f"{min(walls):.1f}",
           f"{statistics.median(r[1] for r in runs):.1f}", f"{statistics.median(r[2] for r in runs):.1f}",
           f"{init_ms:.1f}", f"{init_bytes / 1024:.0f} KiB / {init_allocs}", f"{own_bytes / 1024:.1f} KiB"]
    if instr:
        print(f"startup-time: {name} under valgrind", file=sys.stderr)
        n = instructions(args)
        row.append("n/a" if n is None else f"{n / 1e6:.1f} M")
    rows.append(row)

print(f"Start-up of {binary}, {reps} runs per command, from {os.getcwd()} (target: wall <= 20 ms on an idle machine):\n")
head = ["command", "wall median (ms)", "wall min (ms)", "cpu median (ms)", "peak RSS (MiB)",
        "init clock (ms)", "init heap / allocs", "rbook packages' init heap"]
if instr:
    head.append("instructions")
print("| " + " | ".join(head) + " |")
print("|" + " --- |" * len(head))
for r in rows:
    print("| " + " | ".join(r) + " |")
if top:
    print(f"\nSlowest package initialisers of `rbook --help` (ms, minimum of {reps} runs):\n")
    print("| package | ms |")
    print("| --- | --- |")
    for pkg, ms in sorted(slowest.items(), key=lambda kv: -kv[1])[:top]:
        print(f"| {pkg} | {ms:.2f} |")
EOF
