// Types of `ratelane-wasm/sim` (node and web builds): the Discord simulator of js/CONTRACT.md
// from its own wasm module, as the napi package `ratelane` exports it.
import type { CoreModule, CoreSimServer, CoreSimulation } from './core.js'

export declare const SimServer: CoreModule['SimServer']
export type SimServer = CoreSimServer
export declare const Simulation: CoreModule['Simulation']
export type Simulation = CoreSimulation

/**
 * Instantiates the simulator's module (ratelane_wasm_sim_bg.wasm): needed once with the `web`
 * build before anything is constructed (apart from the main entry's init()); a no-op with the
 * node build. `input`: a URL, a `Response`, a `WebAssembly.Module` or the module's bytes.
 */
export declare function init(
  input?: string | URL | Request | Response | BufferSource | WebAssembly.Module,
): Promise<void>
/** Instantiates the simulator's module synchronously from a `WebAssembly.Module` or its bytes. */
export declare function initSync(module?: BufferSource | WebAssembly.Module): void
export default init
