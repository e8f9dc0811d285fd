// Type-checked by test/types.test.cjs (tsc --noEmit, never run): the package's types as a user
// of each build sees them, and the contract: every build's main entry, with the simulator's and
// the stores' entries, satisfies js/core.d.ts's CoreModule.
import init, * as pkg from 'ratelane-wasm';
import * as web from 'ratelane-wasm/web';
import * as bundler from 'ratelane-wasm/bundler';
import * as node from 'ratelane-wasm/node';
import * as sim from 'ratelane-wasm/sim';
import * as server from 'ratelane-wasm/server';
import type { CoreModule, Output, RateLimitedEvent } from 'ratelane-wasm';

type SimNames = 'SimServer' | 'Simulation';
type ServerNames = 'GcraStore' | 'LeakyBucketStore' | 'FixedWindowStore';
export const cores: Omit<CoreModule, SimNames | ServerNames>[] = [pkg, web, bundler, node];
export const simulators: Pick<CoreModule, SimNames>[] = [sim];
export const stores: Pick<CoreModule, ServerNames>[] = [server];
export const whole: CoreModule = { ...pkg, ...sim, ...server };

export async function example(wasm: WebAssembly.Module): Promise<number> {
  await init();
  await web.init(new URL('https://example.invalid/ratelane_wasm_bg.wasm'));
  web.initSync(wasm);
  await sim.init();
  server.initSync(wasm);
  const limiter = new pkg.RateLimiter({
    maxWait: 5_000,
    identity: 'bot',
    onRateLimited: (event: RateLimitedEvent) => console.log(event.scope, event.retryAfter),
  });
  limiter.on('bucketLearned', (event) => console.log(event.route, event.bucket));
  const controller = new AbortController();
  const response = await limiter.run(
    'POST',
    '/channels/1/messages',
    ({ signal, attempt }) => fetch(`https://example.invalid/?attempt=${attempt}`, { signal }),
    { signal: controller.signal, deadline: 10_000 },
  );
  const status: number = response.status;
  const wait: number = limiter.predictWait('GET', '/users/@me');
  try {
    await limiter.run('GET', '/users/@me', () => ({ status: 200, headers: {} }));
  } catch (error) {
    if (error instanceof pkg.RateLimitError) {
      const code: pkg.FailCode = error.code;
      const attempts: number | null = error.attempts;
      console.log(code, attempts);
    } else if (error instanceof pkg.UsageError) {
      console.log(error.code);
    }
  }
  await limiter.close();

  const core = new pkg.Limiter('{"global_limit": 40}');
  const id: number = core.enqueue(0, { method: 'GET', path: '/users/@me', deadlineNs: null });
  const outputs: Output[] = core.drain();
  for (const output of outputs) {
    if (output.type === 'wait_until') console.log(output.atNs);
  }
  const disposition: 'complete' | 'retry' | 'failed' = core.handleFailure(1, id, 'not_sent');
  const codes: readonly pkg.FailCode[] = pkg.FAIL_CODES;
  const report = new sim.Simulation(null, '{}', undefined).run();
  const served = new sim.SimServer().handle(0, { method: 'GET', path: '/users/@me' });
  console.log(disposition, codes, served.bodyText, report.succeeded);

  const limits = server.GcraStore.perWindow(10, 60e9, { maxKeys: 1000 });
  const decision: pkg.ServerDecision = limits.check('203.0.113.7', 0);
  const headers: Array<[string, string]> = decision.ietfHeaders('default').concat(decision.xRateLimitHeaders());
  const retry: number | null = decision.retryAfterS;
  const legacy = server.LeakyBucketStore.fromLegacy({ max: 10, durationNs: 60e9, minIntervalNs: 1e9 });
  const scaled = legacy.checkScaled('user', 0, 0.5);
  const jobs = new server.FixedWindowStore(10, 10e9);
  const slot: pkg.Scheduled = jobs.schedule('guild', 0);
  const released: boolean = jobs.release('guild', slot.releaseAtNs);
  console.log(headers, retry, scaled.allowed, released, limits.len + limits.untracked + limits.maxKeys);
  try {
    limits.checkN('batch', 0, 11);
  } catch (error) {
    const typed = pkg.fromCoreError(error);
    if (typed instanceof pkg.InsufficientCapacityError) console.log(typed.requested, typed.capacity);
  }
  try {
    await limiter.run('POST', '/v1/chat/completions', () => fetch('https://example.invalid/'), { costs: { tokens: 1200 } });
  } catch (error) {
    if (error instanceof pkg.InsufficientCapacityError) {
      const dimension: string | null = error.dimension;
      const over: number = error.cost - error.limit;
      console.log(dimension, over, error.method);
    }
  }
  const costly = core.enqueue(0, { method: 'POST', path: '/v1/chat/completions', costs: { tokens: 1200 } });
  core.handleResponse(1, costly, { status: 200, headers: [], body: { usage: { total_tokens: 950 } } });
  const usage: Record<string, number> | undefined = new sim.SimServer().handle(0, { method: 'GET', path: '/' }, 5).body.usage;
  for (const output of core.drain()) {
    if (output.type === 'fail' && output.code === 'insufficient_capacity') console.log(output.dimension, output.cost, output.limit);
  }
  console.log(usage);
  return status + wait + id;
}
