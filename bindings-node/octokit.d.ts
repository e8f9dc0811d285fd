// Types of `ratelane/octokit` (octokit.js): the adapter types are js/adapters/adapters.d.ts.
export { ratelaneOctokit } from './adapters'
export type { OctokitThrottleOptions, OctokitRateLimitHook, RatelaneOctokitOptions } from './adapters'
