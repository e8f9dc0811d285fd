// Types of the package entry; the core's come from wasm-bindgen's generated ratelane_wasm.d.ts.
import type { FailCode } from './ratelane_wasm.js';

export {
  Limiter, SimServer, Simulation,
  RequestSpec, ResponseSpec, Output, SimResponse, FailCode, ErrorCode, Disposition,
} from './ratelane_wasm.js';

/** Every failure code (`FailReason::ALL_CODES`). */
export declare const FAIL_CODES: readonly FailCode[];
/** Every caller-error code of the core (`Error::ALL_CODES`). */
export declare const ERROR_CODES: readonly string[];

/**
 * Instantiates the wasm module (`web` build; a no-op elsewhere). `input`: a URL, a `Response`,
 * a `WebAssembly.Module` or the module's bytes; omitted, ratelane_wasm_bg.wasm is fetched
 * relative to the package's JavaScript.
 */
export declare function init(
  input?: string | URL | Request | Response | BufferSource | WebAssembly.Module,
): Promise<void>;
/** Instantiates the wasm module synchronously from a `WebAssembly.Module` or its bytes. */
export declare function initSync(module?: BufferSource | WebAssembly.Module): void;
export default init;
