#!/usr/bin/env bash
# Re-vendors the web UI's ES-module libraries from the npm registry (see
# README.md): preact, preact/hooks, htm and preact-iso's router. Their
# bare imports ("preact", "preact/hooks") are rewritten to the vendored
# files, so the browser loads them without an import map or a bundler.
# chartjs-chart-sankey's ES module has its "chart.js" and
# "chart.js/helpers" imports rewritten to chart-esm.mjs (Chart.js's UMD
# build re-exported).
# Usage: bash server/ui/vendor/update.sh [PREACT_VERSION HTM_VERSION ISO_VERSION SANKEY_VERSION]
set -euo pipefail
cd "$(dirname "$0")"
PREACT="${1:-11.2.0}" HTM="${2:-3.1.1}" ISO="${3:-2.12.2}" SANKEY="${4:-0.19.1}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "preact@$PREACT" "htm@$HTM" "preact-iso@$ISO" "chartjs-chart-sankey@$SANKEY" >/dev/null)
for p in "preact-$PREACT" "htm-$HTM" "preact-iso-$ISO" "chartjs-chart-sankey-$SANKEY"; do mkdir -p "$tmp/${p%-*}" && tar xzf "$tmp/$p.tgz" -C "$tmp/${p%-*}"; done
cp "$tmp/preact/package/dist/preact.mjs" preact.mjs
sed 's#from"preact"#from"./preact.mjs"#' "$tmp/preact/package/hooks/dist/hooks.mjs" >preact-hooks.mjs
cp "$tmp/htm/package/dist/htm.mjs" htm.mjs
sed -e "s#from 'preact';#from './preact.mjs';#" -e "s#from 'preact/hooks';#from './preact-hooks.mjs';#" \
  "$tmp/preact-iso/package/src/router.js" >preact-iso-router.js
sed -e "s#from 'chart.js';#from './chart-esm.mjs';#" -e "s#from 'chart.js/helpers';#from './chart-esm.mjs';#" \
  "$tmp/chartjs-chart-sankey/package/dist/chartjs-chart-sankey.esm.js" >chartjs-chart-sankey.esm.js
cp "$tmp/preact/package/LICENSE" LICENSE-preact
cp "$tmp/htm/package/LICENSE" LICENSE-htm
cp "$tmp/preact-iso/package/LICENSE" LICENSE-preact-iso
cp "$tmp/chartjs-chart-sankey/package/LICENSE" LICENSE-chartjs-chart-sankey
# No source maps are vendored: drop the comments that point at them.
sed -i '/^\/\/# sourceMappingURL=/d' preact.mjs preact-hooks.mjs htm.mjs
if grep -n "from *['\"]\(preact\|chart\.js\)" preact-hooks.mjs preact-iso-router.js chartjs-chart-sankey.esm.js; then
  echo "update.sh: a bare preact or chart.js import is left (above): adjust the rewrite" >&2
  exit 1
fi
sha256sum preact.mjs preact-hooks.mjs htm.mjs preact-iso-router.js chart.umd.min.js chartjs-chart-sankey.esm.js
