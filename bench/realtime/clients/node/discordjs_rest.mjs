// What the two discord.js clients of the Scoreboard share (discordjs_client.mjs, discord.js
// alone, and discordjs_ratelane_client.mjs, with ratelane under it): how a workload request is
// submitted to a REST manager and how its errors are reported, so that the two differ only in
// how the REST manager is made.
import { parseResponse, DiscordAPIError, HTTPError, RateLimitError } from '@discordjs/rest'

/**
 * runWorkload's `send` and `describeError` for `rest`: each request is `rest.queueRequest(...)`
 * (the path as `fullRoute`, the JSON body, `query: ?rid=`, `auth`, the AbortSignal), then
 * `parseResponse(res)`, which is what `rest.request()` does inside, so that the report has the
 * response's real status. Errors by class name (discord.js's), else by `code` (ratelane's).
 */
export function restCalls(rest) {
  return {
    async send(request, signal) {
      const res = await rest.queueRequest({
        fullRoute: request.path,
        method: request.method,
        body: request.json ?? undefined,
        query: new URLSearchParams({ rid: String(request.rid) }),
        auth: request.auth,
        signal,
      })
      await parseResponse(res)
      return res.status
    },
    describeError(error) {
      for (const cls of [DiscordAPIError, HTTPError, RateLimitError]) {
        if (error instanceof cls) return { status: error.status ?? null, error: cls.name }
      }
      return { status: null, error: (error && (error.code || error.name)) || String(error) }
    },
  }
}
