#!/usr/bin/env bash
# Build the rbook control-plane image (deploy/container/Containerfile) with podman, FROM
# scratch: nothing is pulled (docs/deploy.md, "Building the image").
#
#   scripts/image.sh                                   # linux/amd64 → localhost/rbook:VERSION
#   scripts/image.sh --platform linux/amd64,linux/arm64
#   scripts/image.sh --image localhost/rbook --tag ci
#   scripts/image.sh --context-only DIR                # assemble the build context in DIR, no build
#                                                      # (the release workflow builds it with buildx)
#
# The binary is built as the release builds it (.ci/release): CGO_ENABLED=0, -trimpath,
# -buildvcs=false, -ldflags "-s -w -X main.version=VERSION", plus the revision stamped with
# -X <buildinfo.RevisionLDFlag>=REVISION, so `rbook version` in the image names the commit
# of the image's org.opencontainers.image.revision label (the release archive cannot carry
# it: its checksum is committed before the tag). VERSION defaults to the tag at HEAD, else
# dev-<12-hex revision>[-dirty]; $VERSION overrides it.
#
# Tags: IMAGE:TAG-ARCH for each platform, and IMAGE:TAG for the first platform given. The
# last lines of stdout are the tags built, one per line. Exit status: 0 built, 1 a build
# failed, 2 usage.
set -euo pipefail
cd "$(dirname "$0")/.."

image=localhost/rbook
tag=""
platforms=linux/amd64
context_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --platform) platforms="$2"; shift 2 ;;
    --image) image="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --context-only) context_only="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

revision=unknown
if git rev-parse --git-dir >/dev/null 2>&1; then
  revision=$(git rev-parse HEAD)
fi
if [ -z "${VERSION:-}" ]; then
  if VERSION=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then :
  elif [ "$revision" != unknown ]; then
    VERSION="dev-${revision:0:12}"
  else
    VERSION=dev
  fi
  if [ "$revision" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    VERSION="$VERSION-dirty"
  fi
fi
tag=${tag:-$VERSION}
if ! [[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "scripts/image.sh: tag $tag: a tag is letters, digits, _ . - (set --tag)" >&2
  exit 2
fi
# The commit's time is the image's creation time and every file's time (podman build
# --timestamp), so the same commit and toolchain give the same image.
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$ca" ]; then
  echo "scripts/image.sh: $ca is missing: install Debian's ca-certificates (apt-get install -y ca-certificates)" >&2
  exit 1
fi

# The build context: the Containerfile, one binary per platform, the root file system.
if [ -n "$context_only" ]; then
  ctx="$context_only"
  mkdir -p "$ctx"
else
  ctx=$(mktemp -d "${TMPDIR:-/tmp}/rbook-image.XXXXXX")
  trap 'rm -rf "$ctx"' EXIT
fi
cp deploy/container/Containerfile "$ctx/Containerfile"
# /var/lib exists (root's) before /var/lib/rbook is copied as the image's user's.
mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/rootfs/var/lib" "$ctx/state"
cp "$ca" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 1777 "$ctx/rootfs/tmp"
chmod 0700 "$ctx/state"
printf 'root:x:0:0:root:/root:/sbin/nologin\nrbook:x:65532:65532:rbook:/var/lib/rbook:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nrbook:x:65532:\n' >"$ctx/rootfs/etc/group"
# The revision rbook version names (internal/buildinfo.RevisionLDFlag); none outside git.
stamp=""
if [ "$revision" != unknown ]; then
  stamp=" -X github.com/rbookhq/rbook-action/internal/buildinfo.revision=$revision"
fi
IFS=, read -r -a plats <<<"$platforms"
for p in "${plats[@]}"; do
  os=${p%/*} arch=${p#*/}
  if [ "$os" != linux ] || [ -z "$arch" ] || [ "$arch" = "$p" ]; then
    echo "scripts/image.sh: --platform $p: want linux/ARCH such as linux/amd64 or linux/arm64" >&2
    exit 2
  fi
  echo "== go build rbook $VERSION for $p" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOFLAGS= go build -trimpath -buildvcs=false \
    -ldflags "-s -w -X main.version=$VERSION$stamp" -o "$ctx/bin/${os}_$arch/rbook" ./cmd/rbook
  chmod 0755 "$ctx/bin/${os}_$arch/rbook"
done
{
  echo "VERSION=$VERSION"
  echo "REVISION=$revision"
  echo "CREATED=$created"
  echo "SOURCE_DATE_EPOCH=$epoch"
} >"$ctx/build-args"
if [ -n "$context_only" ]; then
  echo "context assembled in $ctx (build arguments in $ctx/build-args)" >&2
  exit 0
fi

# shellcheck source=scripts/podman-env.sh
. scripts/podman-env.sh
podman_setup
built=()
for p in "${plats[@]}"; do
  arch=${p#*/}
  echo "== podman build $image:$tag-$arch ($p)" >&2
  # --format docker: the OCI image format has no HEALTHCHECK, podman would drop it.
  pm build --format docker --platform "$p" --timestamp "$epoch" \
    --build-arg VERSION="$VERSION" --build-arg REVISION="$revision" --build-arg CREATED="$created" \
    -f "$ctx/Containerfile" -t "$image:$tag-$arch" "$ctx" >&2
  built+=("$image:$tag-$arch")
done
pm tag "$image:$tag-${plats[0]#*/}" "$image:$tag"
built=("$image:$tag" "${built[@]}")
printf '%s\n' "${built[@]}"
