// What every Node client of the real-time Scoreboard shares (bench/realtime/CLIENTS.md): the
// workload file and the extra arguments, the clock, the deadline, the one-line report.
//
// A client sets itself up (not timed), then calls runWorkload() with `send(request, signal)`:
// the library's own request call for one workload request, resolving with the final HTTP
// status (after the body is read) or rejecting with the library's error. runWorkload starts
// every request at once, records when each one's outcome is known (performance.now(), one
// monotonic clock, zero just before the first request is submitted), and at the workload's
// deadline aborts what is still pending (the AbortSignal given to `send`) and reports it as
// "unfinished". The report goes to stdout as one JSON line; logs go to stderr. The process
// exits 0 once the report is written, whatever the library still has queued or open.
//
// Several processes (the orchestrator's --processes): the workload file has `"barrier": true`
// (after the set-up, print `ready` on stdout and wait for one line on stdin before submitting,
// so that the K processes start together) and `"shared"` (the Redis store to configure; see
// CLIENTS.md). The report then also carries `t0_unix_s` (the wall clock at the zero of `t`) and
// `store` when the client passes `storeStats()`. Every report carries `loop_lag_ms` (p99 and
// max of how late the event loop ran a 10 ms timer during the run).
import { setMaxListeners } from 'node:events'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'

/** Barrier: says "ready" on stdout and resolves at the first line on stdin. */
function startSignal() {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin })
    lines.once('line', () => {
      lines.close()
      resolve()
    })
    lines.once('close', resolve) // stdin closed: start anyway
    process.stdout.write('ready\n')
  })
}

/** The workload file named by the first argument, and the options after it (`--name value`). */
export function loadWorkload(argv = process.argv.slice(2)) {
  const [file, ...rest] = argv
  if (!file) throw new Error('usage: <client> <workload.json> [--option value ...]')
  const workload = JSON.parse(readFileSync(file, 'utf8'))
  const options = {}
  for (let i = 0; i < rest.length; i++) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(rest[i])
    if (!m) throw new Error(`unexpected argument ${rest[i]}`)
    options[m[1]] = m[2] !== undefined ? m[2] : rest[++i]
  }
  return { workload, options }
}

/**
 * Opens `workload.warm_connections` connections at once with log-ins (`GET /users/@me`,
 * answered outside the accounting), as a bot that has been running has them open in its pool:
 * `get(url, headers)` makes one request through the client's own HTTP stack (not through its
 * rate limiter) and reads the answer.
 */
export async function warmUp(workload, get) {
  const n = workload.warm_connections ?? 0
  const url = `${workload.base_url}/users/@me`
  const headers = { Authorization: `Bot ${workload.token}` }
  await Promise.all(Array.from({ length: n }, () => get(url, headers)))
}

/** The request's URL: `base_url + path + "?rid=" + rid` (for clients that build it themselves). */
export function requestUrl(workload, request) {
  return `${workload.base_url}${request.path}?rid=${request.rid}`
}

export function log(...parts) {
  process.stderr.write(`${parts.join(' ')}\n`)
}

/**
 * Runs every request of the workload concurrently and prints the report.
 *
 * - `send(request, signal)`: resolves with the final status (a non-2xx is reported as
 *   `"HTTP <status>"`) or rejects with the library's error;
 * - `describeError(error)`: `{ status, error }` for a rejection (`status` null when the
 *   library raised without one);
 * - `close()` (optional): releases the library's resources after the report; given one second.
 */
export async function runWorkload({ client, library, workload, send, describeError, close, storeStats }) {
  const requests = workload.requests
  const results = new Map()
  const controller = new AbortController()
  setMaxListeners(0, controller.signal) // one signal for every request: no leak warning
  const setupS = performance.now() / 1000 // since the process started (imports included)
  if (workload.barrier) await startSignal()

  let timer
  const deadline = new Promise((resolve) => {
    timer = setTimeout(resolve, workload.deadline_s * 1000)
  })
  const t0 = performance.now()
  const t0UnixS = (performance.timeOrigin + t0) / 1000
  const lag = monitorEventLoopDelay({ resolution: 10 }) // how late the loop runs a 10 ms timer
  lag.enable()
  const all = requests.map((request) => {
    const record = (status, error) => {
      if (!results.has(request.rid)) {
        results.set(request.rid, { rid: request.rid, t: (performance.now() - t0) / 1000, status, error })
      }
    }
    let pending
    try {
      pending = Promise.resolve(send(request, controller.signal))
    } catch (error) {
      pending = Promise.reject(error)
    }
    return pending.then(
      (status) => record(status, status >= 200 && status < 300 ? null : `HTTP ${status}`),
      (error) => {
        if (controller.signal.aborted) return // past the deadline: reported as unfinished
        const described = describeError(error)
        record(described.status ?? null, described.error)
      },
    )
  })
  await Promise.race([Promise.all(all), deadline])
  clearTimeout(timer)
  lag.disable()
  const unfinished = requests.filter((r) => !results.has(r.rid)).length
  if (unfinished > 0) {
    log(`${client}: deadline (${workload.deadline_s} s) reached with ${unfinished} request(s) pending; aborting them`)
    controller.abort(new Error('deadline'))
  }
  const report = {
    client,
    library,
    setup_s: Math.round(setupS * 1e6) / 1e6,
    t0_unix_s: t0UnixS,
    // The histogram counts the whole delay of each 10 ms tick: less the tick, as in Python.
    loop_lag_ms: lag.count > 0
      ? { p99: Math.max(0, lag.percentile(99) / 1e6 - 10), max: Math.max(0, lag.max / 1e6 - 10) }
      : null,
    results: requests.map((r) => results.get(r.rid) ?? { rid: r.rid, t: null, status: null, error: 'unfinished' }),
  }
  if (storeStats) report.store = storeStats()
  const failed = report.results.filter((r) => r.error !== null).length
  log(`${client}: ${requests.length} requests, ${failed} not 2xx, last outcome at ` +
    `${Math.max(0, ...report.results.map((r) => r.t ?? 0)).toFixed(3)} s`)
  await new Promise((resolve) => process.stdout.write(`${JSON.stringify(report)}\n`, resolve))
  if (close) {
    await Promise.race([Promise.resolve().then(close).catch((e) => log(`close: ${e}`)),
      new Promise((resolve) => setTimeout(resolve, 1000).unref())])
  }
  process.exit(0)
}

/** A setup failure: no report, a non-zero exit (counted against the client). */
export function fail(error) {
  log(error && error.stack ? error.stack : String(error))
  process.exit(1)
}
