#!/usr/bin/env bash
# Sets up what Klym needs on a fresh machine, then runs `pnpm <args>`:
#   bash scripts/run.sh start    # the main job, on the embedded default
#   bash scripts/run.sh test     # the whole test suite
# Node 24 and pnpm come from the npm registry into .toolchain/ when the system's are older or missing
# (the registry's `node` package ships the binary; corepack's signature check fails on our machines).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

node_major=24
pnpm_version=$(sed -n 's/.*"packageManager": *"pnpm@\([^"]*\)".*/\1/p' package.json)
toolchain="$root/.toolchain"

have_node() { command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge "$node_major" ]; }
have_pnpm() { command -v pnpm >/dev/null 2>&1 && [ "$(pnpm --version 2>/dev/null)" = "$pnpm_version" ]; }

export PATH="$toolchain/node_modules/.bin:$PATH"
if ! have_node || ! have_pnpm; then
  command -v npm >/dev/null 2>&1 || { echo "scripts/run.sh: npm is needed to fetch Node $node_major and pnpm; install Node.js with npm first" >&2; exit 1; }
  echo "Setting up Node $node_major and pnpm $pnpm_version in .toolchain/ …" >&2
  want=("pnpm@$pnpm_version")
  have_node || want+=("node@$node_major")
  npm install --prefix "$toolchain" --no-save --no-audit --no-fund --loglevel=error "${want[@]}" >&2
  hash -r
  have_node || { echo "scripts/run.sh: Node $node_major did not install into .toolchain/" >&2; exit 1; }
fi

# Installs a Debian package with apt-get (as root, else through sudo), or stops naming it.
#   apt_install PACKAGE WHY [apt-get install flags…]
apt_install() {
  local package="$1" why="$2" sudo=""
  shift 2
  echo "Installing Debian's $package for $why …" >&2
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" "$package" >&2 \
    || { echo "scripts/run.sh: could not install $package with apt-get; install Debian's $package package" >&2; exit 1; }
}

case "${1:-}" in
  test|bench)
    # The tests and the benchmark start their own Redis (issue #13).
    command -v redis-server >/dev/null 2>&1 || apt_install redis-server "the tests" --no-install-recommends
    # The dashboard's tests (issue #15) drive Debian's Chromium with playwright-core: playwright's browser
    # download does not work on our machines. Recommends included: they bring the fonts pages render with.
    [ "${1:-}" != test ] || [ -x /usr/bin/chromium ] || apt_install chromium "the dashboard's tests"
    ;;
esac

# Cheap when node_modules is already up to date with the lockfile.
pnpm install --frozen-lockfile --prefer-offline --reporter=silent >&2
exec pnpm "$@"
