#!/usr/bin/env bash
# Builds Berth's Docker base image from Debian packages, with no registry pull: debootstrap a minimal
# bookworm root filesystem (plus what Berth needs inside a workspace) and `docker import` it.
#
# Cached: when the image already exists with the same package-set hash (label dev.berth.base.inputs), it
# exits at once. Usage: build-base-image.sh [image-ref]   (default berth-base:bookworm)
# Env knobs: BERTH_DEBIAN_MIRROR (default: the first Debian mirror configured for apt on this machine),
# BERTH_BASE_SUITE (default bookworm), BERTH_BASE_BUILD_DIR (default: a fresh mktemp dir, removed after).
set -euo pipefail

image="${1:-${BERTH_BASE_IMAGE:-berth-base:bookworm}}"
suite="${BERTH_BASE_SUITE:-bookworm}"
# What Berth needs inside a workspace: node runs the bundled MCP gateway; tini reaps zombies as PID 1
# (killed commands and fork bombs leave orphans); ripgrep backs Grep, the rest the builtin tools and skill
# installs. What agents reach for: git, python3 with venv, npm/npx (below), and a C toolchain with make
# (native npm and pip packages build from source; so do the projects agents are asked to compile).
packages="nodejs,ca-certificates,coreutils,findutils,grep,sed,tar,gzip,git,procps,ripgrep,tini,python3,python3-venv,make,gcc,libc6-dev"
# Debian's npm package drags in hundreds of node-* packages that debootstrap cannot configure: npm comes
# from the npm registry instead, pinned (npm 10 runs on bookworm's Node 18).
npm_version="${BERTH_BASE_NPM_VERSION:-10.8.2}"
# Bump when the recipe below changes in a way the package list does not show.
recipe_version=3
inputs_hash="$(printf '%s\0%s\0%s\0%s' "$suite" "$packages" "$npm_version" "$recipe_version" | sha256sum | cut -c1-16)"

say() { echo "[build-base-image] $*" >&2; }

existing="$(docker image inspect --format '{{ index .Config.Labels "dev.berth.base.inputs" }}' "$image" 2>/dev/null || true)"
if [ "$existing" = "$inputs_hash" ]; then
  say "$image is up to date (inputs $inputs_hash)"
  exit 0
fi

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
fi

find_mirror() {
  # deb822 files first (URIs: ...), then one-line sources (deb URL suite ...); skip security and third
  # party repositories: debootstrap needs the main archive.
  local uri
  uri="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2}' \
    | grep -E '/debian/?$' | head -n1 || true)"
  if [ -z "$uri" ]; then
    uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; break}}' \
      | grep -E '/debian/?$' | head -n1 || true)"
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}
mirror="${BERTH_DEBIAN_MIRROR:-$(find_mirror)}"

build_dir="${BERTH_BASE_BUILD_DIR:-}"
cleanup_dir=""
if [ -z "$build_dir" ]; then
  build_dir="$(mktemp -d /tmp/berth-base-rootfs.XXXXXX)"
  cleanup_dir="$build_dir"
fi
trap '[ -n "$cleanup_dir" ] && as_root rm -rf "$cleanup_dir"' EXIT

started=$SECONDS
say "debootstrap $suite from $mirror into $build_dir (packages: $packages)"
as_root debootstrap --variant=minbase --include="$packages" "$suite" "$build_dir" "$mirror" >&2
say "debootstrap took $((SECONDS - started))s"

# The workspace user: commands run as uid 1000, never root. Written directly (no chroot) so this also
# works where chroot with /proc is not allowed.
if ! grep -q '^berth:' "$build_dir/etc/passwd"; then
  echo 'berth:x:1000:1000:Berth workspace user:/home/berth:/bin/bash' | as_root tee -a "$build_dir/etc/passwd" >/dev/null
  echo 'berth:x:1000:' | as_root tee -a "$build_dir/etc/group" >/dev/null
  echo 'berth:*:19000:0:99999:7:::' | as_root tee -a "$build_dir/etc/shadow" >/dev/null
fi
as_root mkdir -p "$build_dir/home/berth" "$build_dir/workspace"
as_root chown 1000:1000 "$build_dir/home/berth" "$build_dir/workspace"
# npm and npx, from the registry's tarball (it bundles its own dependencies).
npm_dir="$(mktemp -d /tmp/berth-base-npm.XXXXXX)"
(cd "$npm_dir" && npm pack --silent "npm@$npm_version" >/dev/null)
as_root mkdir -p "$build_dir/usr/local/lib/node_modules/npm" "$build_dir/usr/local/bin"
as_root tar -xzf "$npm_dir"/npm-*.tgz -C "$build_dir/usr/local/lib/node_modules/npm" --strip-components=1 \
  --no-same-owner
rm -rf "$npm_dir"
as_root ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$build_dir/usr/local/bin/npm"
as_root ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$build_dir/usr/local/bin/npx"

# Keep apt usable inside derived images (extra packages when the build has network access).
printf 'deb %s %s main\n' "$mirror" "$suite" | as_root tee "$build_dir/etc/apt/sources.list" >/dev/null
as_root rm -rf "$build_dir/var/cache/apt/archives/"*.deb "$build_dir/var/lib/apt/lists/"* "$build_dir/tmp/"*

say "importing into $image"
as_root tar --numeric-owner -C "$build_dir" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'WORKDIR /workspace' \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL dev.berth.base.inputs=$inputs_hash" \
  --change "LABEL dev.berth.base.suite=$suite" \
  - "$image" >&2
say "built $image in $((SECONDS - started))s"
docker run --rm --network none "$image" sh -c 'node --version && npm --version && python3 --version' >&2
