#!/usr/bin/env bash
# Builds the `berth:latest` image that deploy/kubernetes names (deploy/docker/Dockerfile).
#
# The app tree is prepared here, on the build machine, and sent as the whole build context: the files git
# knows (tracked and untracked, minus .gitignore'd ones, tests and benches), `npm ci --omit=dev` (which
# runs `prisma generate`) and the dashboard's `next build` output. So `docker build` runs with
# `--network none` and no RUN step needs the npm registry; only `npm ci` here does (or its cache).
#
# Usage: build-image.sh [--tag berth:latest] [--base IMAGE] [--local-base]
#   --base IMAGE   a Debian bookworm image with Node 20+ and npm (default node:20-bookworm-slim, pulled
#                  from your registry)
#   --local-base   no registry: derive the base from berth-base:bookworm (scripts/docker/build-base-image.sh)
#                  plus this machine's node binary and npm (local-base.Dockerfile, tagged berth-node:bookworm)
# Env: BERTH_IMAGE_BUILD_DIR (default: a fresh mktemp dir, removed after).
set -euo pipefail

tag="berth:latest"
base="node:20-bookworm-slim"
local_base=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --base) base="$2"; shift 2 ;;
    --local-base) local_base=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

say() { echo "[build-image] $*" >&2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
stage="${BERTH_IMAGE_BUILD_DIR:-}"
cleanup=""
if [ -z "$stage" ]; then
  stage="$(mktemp -d /tmp/berth-image.XXXXXX)"
  cleanup="$stage"
fi
trap '[ -n "$cleanup" ] && rm -rf "$cleanup"' EXIT
started=$SECONDS

# 1. The dashboard build, in the repository (next build needs the dev dependencies: TypeScript).
state="$(cd "$repo" && node --import tsx -e \
  'import("./scripts/services/next-build.ts").then(async (m) => console.log(await m.buildState(process.cwd())))')"
if [ "$state" != "fresh" ]; then
  say "next build ($state)"
  (cd "$repo" && npm run build --silent >&2)
fi

# 2. The app tree: what git knows of the working tree, without tests, benches and docs.
app="$stage/app-tree"
mkdir -p "$app"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard -- . \
  ':!test/' ':!bench/' ':!docs/' ':!.helpers/' \
  | xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' | tar --null -T - -cf -) | tar -C "$app" -xf -
say "app tree copied ($((SECONDS - started))s)"
(cd "$repo" && tar --exclude=./.next/cache --exclude=./.next/dev -cf - ./.next) | tar -C "$app" -xf -

# 3. Production dependencies only (postinstall: prisma generate into generated/).
(cd "$app" && npm ci --omit=dev --no-audit --no-fund --prefer-offline >&2)
say "npm ci --omit=dev done ($((SECONDS - started))s)"

# 4. The base image.
if [ "$local_base" = 1 ]; then
  base="berth-node:bookworm"
  ctx="$stage/local-base"
  mkdir -p "$ctx"
  cp "$(readlink -f "$(command -v node)")" "$ctx/node"
  npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
  cp -a "$npm_dir" "$ctx/npm"
  docker build --network none -q -t "$base" -f "$here/local-base.Dockerfile" "$ctx" >&2
  say "local base $base built from berth-base:bookworm and $(node --version)"
fi

# 5. The image.
docker build --network none -q --build-arg "BASE=$base" -t "$tag" -f "$here/Dockerfile" "$stage" >&2
say "$tag built on $base in $((SECONDS - started))s"
