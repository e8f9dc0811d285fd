// Types of `ratelane/undici` (undici.js): the adapter types are js/adapters/adapters.d.ts.
export { interceptor, install } from './adapters'
export type { InterceptorOptions, InstallOptions, RatelaneInterceptor, Refusal } from './adapters'
