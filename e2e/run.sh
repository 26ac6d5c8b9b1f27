#!/usr/bin/env bash
# Browser test of the web UI (see ui.test.mjs): installs Debian's chromium
# when /usr/bin/chromium is missing and the e2e npm packages (npm ci), builds
# spur, imports the bundled data into a temporary store (`spur demo --keep`)
# with the generator's marketing app "shop" (`spur gen`: ad touchpoints,
# installs, purchases, page views) and the app "people" (persons.ndjson:
# three persons of several distinct ids, joined by $identify events, and
# one refused merge), and runs the tests with node's test
# runner, one file after the other; sdk.test.mjs drives the real
# posthog-js and @segment/analytics-next (npm packages pinned in
# package.json) against the same server. Exits non-zero on failure.
# SPUR_SCREENSHOTS=DIR keeps a PNG of each view.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "e2e: installing chromium (Debian package)"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi

(cd e2e && npm ci --no-audit --no-fund --loglevel=error)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/spur" ./cmd/spur
"$tmp/spur" demo --keep "$tmp/data" >"$tmp/demo.log"
"$tmp/spur" --data "$tmp/data" gen --events 300000 --seed 1 --app shop >>"$tmp/demo.log"
# Persons (identity.md): a few events and $identify operations, one of them refused.
"$tmp/spur" --data "$tmp/data" import --app people e2e/persons.ndjson >>"$tmp/demo.log"

cd e2e
# One file after the other, ui.test.mjs first: its first test signs in
# through the login URL of the store's first start.
for f in ui.test.mjs analyses.test.mjs sdk.test.mjs; do
  SPUR_BIN="$tmp/spur" SPUR_DATA="$tmp/data" node --test --test-reporter=spec "$f"
done
