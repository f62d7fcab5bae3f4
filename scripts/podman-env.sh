# Sourced by scripts/image.sh, scripts/image-bench.sh and .ci/image: podman set up to build
# and run images on a machine without systemd or a registry (docs/deploy.md, "Building the
# image"). Defines
#   podman_setup        install podman (Debian) when missing; write a containers.conf with
#                       default_ulimits = [] and point CONTAINERS_CONF at it (unless set)
#   pm ARGS…            podman with runc and cgroupfs as the runtime and cgroup manager
# Set RBOOK_PODMAN_FLAGS to replace the default global flags (e.g. to use crun).

podman_setup() {
  if ! command -v podman >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
      echo "podman is not installed and there is no apt-get to install it: install podman and runc" >&2
      return 1
    fi
    apt-get update -qq && apt-get install -y -qq podman runc uidmap slirp4netns fuse-overlayfs >/dev/null
  fi
  if [ -z "${CONTAINERS_CONF:-}" ]; then
    local dir="${XDG_RUNTIME_DIR:-${TMPDIR:-/tmp}}/rbook-podman"
    mkdir -p "$dir"
    # The defaults raise RLIMIT_NOFILE beyond what an unprivileged or nested runtime may
    # set; an empty list keeps the runtime's own limits.
    printf '[containers]\ndefault_ulimits = []\n' >"$dir/containers.conf"
    export CONTAINERS_CONF="$dir/containers.conf"
  fi
}

pm() {
  # shellcheck disable=SC2086 # the flags are words
  podman ${RBOOK_PODMAN_FLAGS:---runtime runc --cgroup-manager cgroupfs} "$@"
}
