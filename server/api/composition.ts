/**
 * The web app's server side of the process' Berth: the tRPC runtime (the root itself, its logger, auth and
 * origin policy) that route handlers hand to the tRPC context, so procedures reach the root as `ctx.berth`.
 */
import { type ApiRuntime } from "@/server/api/context";
import type { Berth } from "@/server/composition/berth";
import { processBerth } from "@/server/composition/process-berth";

const runtimes = new WeakMap<Berth, ApiRuntime>();

/** The tRPC runtime over `berth` (one per root). */
function apiRuntimeOf(berth: Berth): ApiRuntime {
  let runtime = runtimes.get(berth);
  if (!runtime) {
    const { logger, auth, origins } = berth.api;
    runtime = { berth, logger, auth, origins };
    runtimes.set(berth, runtime);
  }
  return runtime;
}

/** The runtime over this process' Berth: what Next's route handlers use (they are entered by Next). */
export function processApiRuntime(): ApiRuntime {
  return apiRuntimeOf(processBerth());
}
