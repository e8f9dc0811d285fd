#!/usr/bin/env bash
# Builds the npm package's pkg/ folder: three wasm modules (the client engine, the simulator,
# the server-side limiters; one cargo feature each) for the wasm-bindgen targets, shrunk with
# npm binaryen's wasm-opt, wrapped by the entry files in entries/ and the shared Promise driver
# from ../js, and prints each module's size at each stage.
#
#   pkg/node/     --target nodejs   CommonJS; the .wasm is read synchronously at require time
#   pkg/web/      --target web      ES module; call init() or initSync({ module }) before use
#   pkg/bundler/  --target bundler  ES module importing the .wasm, for webpack/Vite-style bundlers
#                                   (the client module only)
#
# Needs: the wasm32-unknown-unknown target, wasm-bindgen-cli equal to Cargo.lock's
# wasm-bindgen (in ../.tools/bin or on PATH) and `npm ci` here (binaryen). The repository's
# test part scripts/tests.d/30-wasm.sh installs all three.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PWD/../.tools/bin:$PATH"

want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3 }' ../Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null || true)
if [ "$have" != "wasm-bindgen $want" ]; then
  echo "build.sh: need wasm-bindgen $want (Cargo.lock), found '${have:-none}';" \
       "run: cargo install --root .tools wasm-bindgen-cli --version $want --no-default-features --bin wasm-bindgen --debug" >&2
  exit 1
fi
wasm_opt=node_modules/.bin/wasm-opt   # npm binaryen 132; never Debian's binaryen (miscompiles)
if [ ! -x "$wasm_opt" ]; then
  echo "build.sh: run 'npm ci' in bindings-wasm first (binaryen)" >&2
  exit 1
fi

# One module per feature of the crate (Cargo.toml): `client`, the engine the package's main
# entry loads; `sim` and `server`, the simulator's and the server-side limiters' modules, which
# only the `ratelane-wasm/sim` and `ratelane-wasm/server` entries load. A browser bot downloads
# the client module alone (its gzip budget: test/size.test.cjs). Each module's out-name:
declare -A out=([client]=ratelane_wasm [sim]=ratelane_wasm_sim [server]=ratelane_wasm_server)
# and the wasm-bindgen targets it is built for (the bundler build is the client's alone).
declare -A targets=([client]="nodejs web bundler" [sim]="nodejs web" [server]="nodejs web")
declare -A dir=([nodejs]=node [web]=web [bundler]=bundler)
rawdir=../target/wasm32-unknown-unknown/wasm-release

rm -rf pkg
mkdir -p pkg
for module in client sim server; do
  # Profile wasm-release (root Cargo.toml): fat LTO and opt-level "z".
  cargo build -p ratelane-wasm --target wasm32-unknown-unknown --profile wasm-release --locked \
    --no-default-features --features "$module"
  cp "$rawdir/ratelane_wasm.wasm" "pkg/$module.cargo.wasm"
  for target in ${targets[$module]}; do
    wasm-bindgen --target "$target" --out-dir "pkg/${dir[$target]}" --out-name "${out[$module]}" "pkg/$module.cargo.wasm"
  done
done

# The targets share each module byte for byte (only the JS glue differs), so it is optimised
# once and copied; a target whose module differs gets its own run. --no-inline: binaryen's
# inlining makes the module larger once gzipped (BENCHMARKS.md, "Module size").
declare -A bindgen_size
for module in client sim server; do
  optimised=""
  for target in ${targets[$module]}; do
    wasm=pkg/${dir[$target]}/${out[$module]}_bg.wasm
    bindgen_size[$module]=$(stat -c %s "$wasm")
    if [ -n "$optimised" ] && cmp -s "$wasm" "$optimised.in"; then
      cp "$optimised" "$wasm"
    else
      cp "$wasm" "$wasm.in"
      "$wasm_opt" --no-inline='*' -Oz --strip-debug --strip-producers "$wasm.in" -o "$wasm"
      optimised=$wasm
    fi
  done
  rm -f pkg/*/"${out[$module]}"_bg.wasm.in
done

# Entries (entries/): the contract's core object per target and the package entry points.
echo '{ "type": "commonjs" }' > pkg/node/package.json
echo '{ "type": "module" }' > pkg/web/package.json
echo '{ "type": "module" }' > pkg/bundler/package.json
for d in node web bundler; do
  cp entries/"$d"/* "pkg/$d/"
  cp entries/types/index.d.ts "pkg/$d/"
done
cp entries/types/index.d.ts pkg/node/index.d.mts   # the same types for index.mjs (ES module)
for entry in sim server; do
  for d in node web; do cp "entries/types/$entry.d.ts" "pkg/$d/"; done
  cp "entries/types/$entry.d.ts" "pkg/node/$entry.d.mts"
done

# The shared Promise driver, written once in ../js (js/README.md): one export line appended
# makes the CommonJS and the ES module file. Its types come along as they are (they import
# './core.js', which resolves in the ES module folders too).
driver=../js/driver.js
{ cat "$driver"; echo 'module.exports = { createRatelane };'; } > pkg/node/driver.cjs
for d in web bundler; do
  { cat "$driver"; echo 'export { createRatelane };'; } > "pkg/$d/driver.mjs"
done
# The server-side stores and their answers (js/server_objects.js), the same way; core.* builds
# them over the module's ServerLimit and ServerStore.
objects=../js/server_objects.js
{ cat "$objects"; echo 'module.exports = { createServerObjects };'; } > pkg/node/server_objects.cjs
for d in web bundler; do
  { cat "$objects"; echo 'export { createServerObjects };'; } > "pkg/$d/server_objects.mjs"
done
for d in node web bundler; do
  cp ../js/core.d.ts ../js/driver.d.ts ../js/adapters/adapters.d.ts "pkg/$d/"
done
# The adapters every runtime has (js/adapters/common.js and fetch.js: ratelaneFetch), the same
# way: their sources one after the other, one export line.
adapters="../js/adapters/common.js ../js/adapters/fetch.js"
{ cat $adapters; echo 'module.exports = { createAdapterCommon, createFetchAdapter };'; } > pkg/node/adapters.cjs
for d in web bundler; do
  { cat $adapters; echo 'export { createAdapterCommon, createFetchAdapter };'; } > "pkg/$d/adapters.mjs"
done

# The ES module entries name every export of createRatelane; read them from the driver itself.
names=$(node -e 'console.log(Object.keys(require("./pkg/node/index.cjs")).filter((k) => !["createRatelane", "init", "initSync", "default"].includes(k)).join(", "))')
sed -i "s/__RATELANE_EXPORTS__/$names/" pkg/node/index.mjs pkg/web/index.js pkg/bundler/index.js

# The failure and error codes, read from the module itself, for the web build: the driver
# checks them when the package is imported, before init() has instantiated the module
# (init() then checks they still match).
node -e '
  const w = require("./pkg/node/ratelane_wasm.js");
  const codes = { FAIL_CODES: w.failCodes(), ERROR_CODES: w.errorCodes() };
  const lines = Object.entries(codes).map(([k, v]) => `export const ${k} = Object.freeze(${JSON.stringify(v)});`);
  require("fs").writeFileSync("pkg/web/codes.js", "// Generated by build.sh from the wasm module.\n" + lines.join("\n") + "\n");
'

for module in client sim server; do
  final=pkg/web/${out[$module]}_bg.wasm
  printf 'wasm module %s: cargo %d B, wasm-bindgen %d B, wasm-opt --no-inline -Oz %d B, gzip -9 %d B\n' "$module" \
    "$(stat -c %s "pkg/$module.cargo.wasm")" "${bindgen_size[$module]}" "$(stat -c %s "$final")" "$(gzip -9 -c "$final" | wc -c)"
done
rm -f pkg/*.cargo.wasm
