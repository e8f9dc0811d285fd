// Types of `ratelane-wasm/server` (node and web builds): the server-side stores of
// js/CONTRACT.md (js/server_objects.js over their own wasm module's ServerLimit and ServerStore),
// as the napi package `ratelane` exports them.
import type { CoreFixedWindowStore, CoreGcraStore, CoreLeakyBucketStore, CoreModule } from './core.js'

export declare const GcraStore: CoreModule['GcraStore']
export type GcraStore = CoreGcraStore
export declare const LeakyBucketStore: CoreModule['LeakyBucketStore']
export type LeakyBucketStore = CoreLeakyBucketStore
export declare const FixedWindowStore: CoreModule['FixedWindowStore']
export type FixedWindowStore = CoreFixedWindowStore

/**
 * Instantiates the server-side limiters' module (ratelane_wasm_server_bg.wasm): needed once
 * with the `web` build before a store is constructed; a no-op with the node build. `input`: a
 * URL, a `Response`, a `WebAssembly.Module` or the module's bytes.
 */
export declare function init(
  input?: string | URL | Request | Response | BufferSource | WebAssembly.Module,
): Promise<void>
/** Instantiates the module synchronously from a `WebAssembly.Module` or its bytes. */
export declare function initSync(module?: BufferSource | WebAssembly.Module): void
export default init
