// Loaded before each README snippet (`node --import ./readme-preload.mjs snippet.mjs`, by
// readme.test.mjs): the APIs the snippets call, as local imitations on 127.0.0.1 in this
// process (the core's simulator in each API's dialect), and undici's global dispatcher
// redirecting their origins there. Node's fetch, undici 6 and 7 (discord.js's REST) all use
// that dispatcher, so a snippet runs as pasted, with the real host names, and without a
// network. The imitations let the process exit when the snippet is done.
import { Agent, setGlobalDispatcher } from 'undici'
import { startServer } from './support.mjs'

const plenty = { limit: 1000, window_ns: 1e9 }
const IMITATIONS = {
  'https://discord.com': {},
  'https://api.openai.com': { profile: 'openai', dialect: 'openai', global: null, default_bucket: plenty },
  'https://api.anthropic.com': { profile: 'anthropic', dialect: 'anthropic', global: null, default_bucket: plenty },
  'https://api.github.com': { profile: 'github', dialect: 'github', global: null, default_bucket: plenty },
}

const targets = new Map()
for (const [origin, config] of Object.entries(IMITATIONS)) {
  const server = await startServer({ config, unref: true, lifetimeMs: 120_000 })
  targets.set(origin, server.url)
}

const redirect = (dispatch) => (options, handler) => {
  const origin = typeof options.origin === 'string' ? options.origin : String(options.origin)
  const target = targets.get(origin.replace(/\/$/, ''))
  return dispatch(target === undefined ? options : { ...options, origin: target }, handler)
}

setGlobalDispatcher(new Agent().compose(redirect))
