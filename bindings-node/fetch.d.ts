// Types of `ratelane/fetch` (fetch.js): the adapter types are js/adapters/adapters.d.ts.
export { ratelaneFetch } from './adapters'
export type { FetchOptions, RatelaneFetch, LlmEstimate, EstimateRequest } from './adapters'
