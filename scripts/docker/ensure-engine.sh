#!/usr/bin/env bash
# Ensures a Docker engine is reachable. Idempotent: does nothing when `docker info` already works.
# Otherwise installs Debian's docker.io (+ debootstrap for the base image) if missing and starts dockerd in
# the background WITHOUT a bridge or iptables rules: Berth's containers run with network mode "none" (or a
# user-chosen network), and the host reaches the in-container gateway through a unix socket, so the engine
# never needs to touch the host's network configuration (which CI sandboxes often forbid anyway).
#
# Env knobs: BERTH_DOCKERD_LOG (default /tmp/berth-dockerd.log), BERTH_DOCKERD_PIDFILE
# (default /var/run/berth-dockerd.pid), BERTH_DOCKER_WAIT_SECONDS (default 60),
# BERTH_DOCKER_STORAGE_DRIVER (force one driver instead of trying overlay2, fuse-overlayfs, vfs).
set -euo pipefail

log_file="${BERTH_DOCKERD_LOG:-/tmp/berth-dockerd.log}"
pid_file="${BERTH_DOCKERD_PIDFILE:-/var/run/berth-dockerd.pid}"
wait_seconds="${BERTH_DOCKER_WAIT_SECONDS:-60}"

say() { echo "[ensure-engine] $*" >&2; }

if docker info >/dev/null 2>&1; then
  say "engine already reachable"
  exit 0
fi

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A stale pidfile from a dead daemon would make dockerd refuse to start.
if [ -f "$pid_file" ] && ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then
  as_root rm -f "$pid_file"
fi

wait_for_engine() {
  # Bounded poll: returns 0 as soon as the engine answers, 1 when the daemon died or time ran out.
  local daemon_pid="$1" deadline=$((SECONDS + wait_seconds))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if docker info >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$daemon_pid" 2>/dev/null; then return 1; fi
    sleep 0.2
  done
  return 1
}

start_daemon() {
  local driver="$1"
  say "starting dockerd with storage driver $driver (log: $log_file)"
  as_root bash -c "nohup dockerd --bridge=none --iptables=false --ip6tables=false \
    --storage-driver='$driver' --pidfile='$pid_file' >>'$log_file' 2>&1 & echo \$! > '$pid_file.launcher'"
  local daemon_pid
  daemon_pid="$(cat "$pid_file.launcher")"
  rm -f "$pid_file.launcher"
  if wait_for_engine "$daemon_pid"; then
    say "engine ready (driver $driver, pid $daemon_pid)"
    return 0
  fi
  say "dockerd with $driver did not come up; tail of the log:"
  tail -n 15 "$log_file" >&2 || true
  as_root kill "$daemon_pid" 2>/dev/null || true
  # Wait (bounded) for the failed daemon to exit so the next attempt can take the pidfile and socket.
  for _ in $(seq 1 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.2; done
  as_root rm -f "$pid_file"
  return 1
}

if [ -n "${BERTH_DOCKER_STORAGE_DRIVER:-}" ]; then
  drivers=("$BERTH_DOCKER_STORAGE_DRIVER")
else
  drivers=(overlay2)
  command -v fuse-overlayfs >/dev/null 2>&1 && drivers+=(fuse-overlayfs)
  drivers+=(vfs)
fi

for driver in "${drivers[@]}"; do
  if start_daemon "$driver"; then exit 0; fi
done
say "could not start a Docker engine"
exit 1
