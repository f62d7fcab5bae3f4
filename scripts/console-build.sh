#!/usr/bin/env bash
# console-build.sh: rebuild the console's committed bundle (controlplane/console/dist) from
# controlplane/console/web with the locked packages, and print its gzipped size
# (docs/console.md, "Rebuilding"). Needs node >= 20 and npm. Usage: bash scripts/console-build.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
web=controlplane/console/web
if [ -n "${CI:-}" ] || [ ! -x "$web/node_modules/.bin/esbuild" ]; then
  npm ci --prefix "$web" --no-audit --no-fund
fi
npm run --prefix "$web" --silent typecheck
npm test --prefix "$web" --silent >/dev/null || { npm test --prefix "$web"; exit 1; }
node "$web/build.mjs" "$@"
