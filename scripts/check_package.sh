#!/usr/bin/env bash
# What the packages ship, checked against what they may ship: `check_package.sh cargo` lists the
# crate (`cargo package --list`), `check_package.sh npm` the npm tarball (`npm pack --dry-run`,
# after scripts/build_web.sh) and prints its size. Any other file (test data, datasets, build
# outputs, node_modules, benchmark results, the bundler build) fails the check.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  cargo)
    allowed='^(Cargo\.toml|Cargo\.toml\.orig|Cargo\.lock|\.cargo_vcs_info\.json|README\.md|CHANGELOG\.md|LICENSE|build\.rs|src/.+\.rs|shaders/[^/]+\.wgsl|examples/.+\.rs)$'
    list=$(cargo package --list --allow-dirty 2>/dev/null)
    must="src/lib.rs"
    ;;
  npm)
    allowed='^(package\.json|README\.md|LICENSE|js/wgrad\.(js|d\.ts)|js/gpt\.js|pkg/web/(wgrad\.js|wgrad\.d\.ts|wgrad_bg\.wasm|wgrad_bg\.wasm\.d\.ts))$'
    json=$(npm pack --dry-run --json 2>/dev/null)
    list=$(node -e 'for (const f of JSON.parse(process.argv[1])[0].files) console.log(f.path)' "$json")
    must="js/wgrad.js pkg/web/wgrad_bg.wasm"
    node -e 'const p = JSON.parse(process.argv[1])[0];
      console.log(`npm tarball: ${p.size} bytes packed, ${p.unpackedSize} unpacked`)' "$json"
    ;;
  *)
    echo "usage: $0 cargo|npm" >&2
    exit 2
    ;;
esac
bad=$(grep -Ev "$allowed" <<<"$list" || true)
if [ -n "$bad" ]; then
  echo "the $1 package would ship files it must not:" >&2
  echo "$bad" >&2
  exit 1
fi
for f in README.md LICENSE $must; do
  grep -qx "$f" <<<"$list" || { echo "the $1 package lacks $f" >&2; exit 1; }
done
echo "$1 package: $(wc -l <<<"$list") files, all expected"
