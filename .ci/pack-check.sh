#!/usr/bin/env bash
# Proves @klym/core is a package other agents can install: build it, check its public API against the reviewed
# reports (packages/core/api/), pack it, install the tarball in a
# temporary project outside the workspace, then typecheck and run a program that imports its entry
# points (`.`, `./artifacts`, `./engine`, `./testing`, `./mcp`, `./redis`) and runs a task on the runner thread (whose entry is a file of the
# built dist, loaded by path, which no import would prove). Run through scripts/run.sh (`pnpm pack-check`) so that Node 24 and pnpm are on PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The root script, so CI also proves `pnpm build` works (its filter glob once reached the shell unquoted).
pnpm --dir "$root" run build >/dev/null
# The public API, frozen: fails when an entry point's API differs from its report in packages/core/api/ (`pnpm api` updates them).
node "$root/scripts/api-report.ts" --check
tarball="$(cd "$root/packages/core" && pnpm pack --pack-destination "$work" | tail -n 1)"
echo "packed $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB)"

mkdir "$work/consumer"
cp "$root/.ci/pack-consumer/"* "$work/consumer/"
cd "$work/consumer"
client="$(node -p "require('$root/packages/core/package.json').dependencies['@modelcontextprotocol/client']")"
server="$(node -p "require('$root/packages/core/package.json').dependencies['@modelcontextprotocol/server']")"
typescript="$(node -p "require('$root/package.json').devDependencies.typescript")"
npm install --no-audit --no-fund --loglevel=error "$tarball" "@modelcontextprotocol/client@$client" "@modelcontextprotocol/server@$server" zod "typescript@$typescript" "@types/node@24"
npx --no-install tsc -p tsconfig.json
echo "consumer typecheck passed"
node main.ts
