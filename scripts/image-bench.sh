#!/usr/bin/env bash
# Benchmark of the control-plane image (docs/deploy.md, "Image size and cold start"):
#   - its size: uncompressed (what `podman images` shows) and gzip-compressed (about what a
#     registry stores and a node pulls);
#   - its cold start: from `podman run` (a new container on a new volume, so the database
#     is created and migrated) to the first SERVING answer of `rbook admin health` from the
#     host over the published port, polled every 50 ms; RUNS runs, their median, min, max.
#
#   scripts/image-bench.sh                      # builds localhost/rbook:bench, 5 runs
#   RUNS=9 scripts/image-bench.sh localhost/rbook:ci   # an image already built
#
# Targets: ≤ 40 MB; cold start is reported, not judged. Exit status: 0 measured, 1 an image
# could not be built or a container did not become SERVING within 60 s.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
# shellcheck source=scripts/podman-env.sh
. scripts/podman-env.sh
podman_setup

work=$(mktemp -d "${TMPDIR:-/tmp}/rbook-image-bench.XXXXXX")
name="rbook-bench-$$"
volume="rbook-bench-$$"
cleanup() {
  pm rm -f -t 0 "$name" >/dev/null 2>&1 || true
  pm volume rm -f "$volume" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

image=${1:-}
if [ -z "$image" ]; then
  image=$(scripts/image.sh --tag bench)
  image=${image%%$'\n'*}
fi
CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w" -o "$work/rbook" ./cmd/rbook

size=$(pm image inspect -f '{{.Size}}' "$image")
pm save -q -o "$work/image.tar" "$image" >/dev/null
gz=$(gzip -6 -c "$work/image.tar" | wc -c)
printf 'image %s\n' "$image"
awk -v s="$size" -v g="$gz" 'BEGIN { printf "size   %.1f MB uncompressed (%d bytes), %.1f MB gzip-compressed (%d bytes); target <= 40 MB\n", s/1e6, s, g/1e6, g }'

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
export RBOOK_APPROVAL_SECRET=bench-secret-0123456789abcdef
times=()
for i in $(seq 1 "$runs"); do
  pm rm -f -t 0 "$name" >/dev/null 2>&1 || true
  pm volume rm -f "$volume" >/dev/null 2>&1 || true
  pm volume create "$volume" >/dev/null
  port=$(( 20000 + (RANDOM % 20000) ))
  t0=$(now_ms)
  # --insecure: the bench's server has no auth file; it listens on loopback only.
  pm run -d --name "$name" -p "127.0.0.1:$port:7070" -v "$volume:/var/lib/rbook" -e RBOOK_APPROVAL_SECRET \
    "$image" --addr 0.0.0.0:7070 --db /var/lib/rbook/controlplane.db --insecure >/dev/null 2>"$work/run.err"
  ok=""
  while [ $(( $(now_ms) - t0 )) -lt 60000 ]; do
    if "$work/rbook" admin health --addr "http://127.0.0.1:$port" --timeout 1s >/dev/null 2>&1; then ok=yes; break; fi
    sleep 0.05
  done
  t1=$(now_ms)
  [ -n "$ok" ] || { cat "$work/run.err" >&2; pm logs "$name" >&2 || true; echo "run $i: not SERVING within 60s" >&2; exit 1; }
  times+=($(( t1 - t0 )))
  printf 'run %d  %d ms from podman run to SERVING\n' "$i" $(( t1 - t0 ))
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(sed -n "$(( (runs + 1) / 2 ))p" <<<"$sorted")
printf 'cold start  median %d ms, min %d ms, max %d ms over %d runs\n' "$median" "$(head -1 <<<"$sorted")" "$(tail -1 <<<"$sorted")" "$runs"
