// The web build needs nothing but web-standard APIs:
//
// * each wasm module (client, sim, server) imports only wasm-bindgen's generated glue;
// * the JavaScript shipped for the web and bundler builds mentions no Node API;
// * imported into a V8 context whose only globals are the JavaScript built-ins plus a list of
//   web-standard APIs (no process, Buffer, require, fs), the package initialises with
//   initSync({ module }) (as an edge runtime does) and a RateLimiter sends a burst through a
//   fake fetch without a 429, directly and through ratelaneFetch.
//
// The last check needs vm.SourceTextModule, so this file starts itself again as a child
// process with --experimental-vm-modules (RATELANE_WEB_GLOBALS_CHILD=1).
import fs from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const pkgWeb = new URL('../pkg/web/', import.meta.url);
const pkgBundler = new URL('../pkg/bundler/', import.meta.url);

if (process.env.RATELANE_WEB_GLOBALS_CHILD === '1') {
  await child();
} else {
  await parent();
}

async function parent() {
  const { default: test } = await import('node:test');
  const { default: assert } = await import('node:assert/strict');
  const { execFileSync } = await import('node:child_process');

  test('each wasm module imports nothing but the wasm-bindgen glue', () => {
    for (const name of ['ratelane_wasm', 'ratelane_wasm_sim', 'ratelane_wasm_server']) {
      const module = new WebAssembly.Module(fs.readFileSync(new URL(`${name}_bg.wasm`, pkgWeb)));
      const imports = WebAssembly.Module.imports(module);
      assert.ok(imports.length > 0);
      for (const { module: from, name: imported } of imports) {
        assert.equal(from, `./${name}_bg.js`, `${from}.${imported}`);
        assert.match(imported, /^__wbg_|^__wbindgen_/, `${from}.${imported}`);
      }
      // Every import is provided by the generated glue itself.
      const glue = fs.readFileSync(new URL(`${name}.js`, pkgWeb), 'utf8');
      for (const { name: imported } of imports) assert.ok(glue.includes(imported), `${imported} not in the glue`);
    }
  });

  test('the JavaScript of the web and bundler builds uses no Node API', () => {
    const files = [];
    for (const dir of [pkgWeb, pkgBundler]) {
      for (const name of fs.readdirSync(dir)) if (/\.m?js$/.test(name)) files.push(new URL(name, dir));
    }
    assert.ok(files.length >= 8);
    const nodeOnly = /\bprocess\b|\bBuffer\b|\brequire\s*\(|\b__dirname\b|\b__filename\b|['"](node:)?(fs|path|os|child_process|events|crypto|worker_threads)['"]|\bmodule\.exports\b|\bglobal\./;
    for (const file of files) {
      const code = fs.readFileSync(file, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '') // block comments
        .replace(/^\s*\/\/.*$/gm, '') // line comments
        .replace(/\s\/\/ .*$/gm, ''); // trailing comments
      const hit = code.match(nodeOnly);
      assert.equal(hit, null, `${fileURLToPath(file)}: ${hit && hit[0]}`);
    }
  });

  test('imported with only web-standard globals, it runs a rate-limited burst', () => {
    const out = execFileSync(process.execPath, ['--experimental-vm-modules', '--no-warnings', fileURLToPath(import.meta.url)], {
      env: { ...process.env, RATELANE_WEB_GLOBALS_CHILD: '1' },
      encoding: 'utf8',
    });
    const result = JSON.parse(out.trim().split('\n').pop());
    assert.deepEqual(result.nodeGlobals, { process: 'undefined', Buffer: 'undefined', require: 'undefined', module: 'undefined', global: 'undefined' });
    assert.equal(result.statuses.length, 24);
    assert.ok(result.statuses.every((s) => s === 200), JSON.stringify(result.statuses));
    assert.equal(result.fetches, 24, 'nothing sent twice');
    assert.equal(result.count429, 0);
    assert.deepEqual(result.learned, ['msgs']);
    assert.equal(result.beforeInit, 'ratelane-wasm: call init() or initSync() before using the package');
  });
}

/** The web-standard globals the context gets, on top of the JavaScript built-ins. */
function webGlobals() {
  const names = [
    'console', 'performance', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval',
    'queueMicrotask', 'structuredClone', 'atob', 'btoa', 'crypto', 'TextEncoder', 'TextDecoder',
    'URL', 'URLSearchParams', 'AbortController', 'AbortSignal', 'Event', 'EventTarget',
    'DOMException', 'Headers', 'Request', 'Response', 'Blob',
  ];
  return Object.fromEntries(names.map((name) => [name, globalThis[name]]));
}

async function child() {
  const vm = await import('node:vm');
  const context = vm.createContext({
    ...webGlobals(),
    // The bytes an edge runtime would have as an imported module; compiled inside the context.
    wasmBytes: new Uint8Array(fs.readFileSync(new URL('ratelane_wasm_bg.wasm', pkgWeb))),
    simBytes: new Uint8Array(fs.readFileSync(new URL('ratelane_wasm_sim_bg.wasm', pkgWeb))),
  });

  const cache = new Map();
  function load(url) {
    if (!cache.has(url)) {
      const source = fs.readFileSync(new URL(url), 'utf8');
      cache.set(url, new vm.SourceTextModule(source, {
        identifier: url,
        context,
        initializeImportMeta(meta) { meta.url = url; },
      }));
    }
    return cache.get(url);
  }
  const entry = new URL('index.js', pkgWeb).href;
  const simEntry = new URL('sim.js', pkgWeb).href;
  async function link(specifier, referencing) {
    // The package's files import each other by relative paths only (no node: or bare names).
    if (!specifier.startsWith('.') && specifier !== entry && specifier !== simEntry) {
      throw new Error(`${referencing.identifier} imports ${specifier}: only relative imports are allowed`);
    }
    return load(new URL(specifier, referencing.identifier).href);
  }

  const workload = new vm.SourceTextModule(`
    import * as ratelane from ${JSON.stringify(entry)};
    import * as sim from ${JSON.stringify(simEntry)};

    const nodeGlobals = {
      process: typeof process, Buffer: typeof Buffer, require: typeof require,
      module: typeof module, global: typeof global,
    };
    let beforeInit = null;
    try { new ratelane.Limiter(); } catch (e) { beforeInit = e.message; }

    ratelane.initSync({ module: new WebAssembly.Module(wasmBytes) });
    sim.initSync({ module: new WebAssembly.Module(simBytes) });

    // A fake server: Discord's model from the core's simulator, 5 messages per 100 ms.
    const server = new sim.SimServer(JSON.stringify({
      buckets: { msgs: { limit: 5, window_ns: 100e6 } },
      routes: { 'POST /channels/:id/messages': { bucket: 'msgs' } },
    }));
    let fetches = 0;
    async function fakeFetch(path, init) {
      fetches += 1;
      const answer = server.handle(Math.round(performance.now() * 1e6), { method: init.method, path });
      return new Response(answer.bodyText, { status: answer.status, headers: answer.headers });
    }

    const limiter = new ratelane.RateLimiter();
    const learned = [];
    limiter.on('bucketLearned', (e) => learned.push(e.bucket));
    const path = '/channels/100000000000000001/messages';
    const responses = await Promise.all(Array.from({ length: 12 }, () =>
      limiter.run('POST', path, ({ signal }) => fakeFetch(path, { method: 'POST', signal }))));
    await limiter.close();

    // The fetch adapter, as an SDK in an edge function calls it: another burst, another channel.
    const viaFetch = ratelane.ratelaneFetch({}, { fetch: (url, init) => fakeFetch(new URL(url).pathname, init) });
    const other = 'https://discord.com/api/v10/channels/100000000000000002/messages';
    const adapted = await Promise.all(Array.from({ length: 12 }, () => viaFetch(other, { method: 'POST', body: '{}' })));
    await viaFetch.limiter.close();
    console.log(JSON.stringify({
      nodeGlobals, beforeInit, learned, fetches,
      statuses: responses.map((r) => r.status).concat(adapted.map((r) => r.status)), count429: server.count429(),
    }));
  `, { identifier: pathToFileURL('/workload.mjs').href, context });

  await workload.link(link);
  await workload.evaluate();
}
