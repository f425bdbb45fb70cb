import type { RawEnv } from "@/server/shared/env-parsing";

export { parseEnv, type RawEnv } from "@/server/shared/env-parsing";

/**
 * The one place in server code that touches `process.env`. Everything else receives a RawEnv or, better,
 * a parsed config object (see config.ts).
 */
export function readProcessEnv(): RawEnv {
  return process.env;
}
