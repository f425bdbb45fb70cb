import { ProvisionStopwatch, provisionPathOf } from "./provision-stopwatch";
import type { StageSampleRecorder } from "./stage-buffer.service";
import type { TStagePath } from "./stage-sample.schema";

/**
 * The provision job's instrumentation: the path from the record's state, a stopwatch fed by the driver's
 * progress steps, and `done`, which buffers the samples (one un-awaited RPUSH) when the provision ends.
 */
export function startProvisionTimings(
  timing: { requestedAt: number; pickedUpAt: number },
  record: { id: string; tenantId: string; backendKind: string; state: string; backendHandle: unknown },
  stageSamples: StageSampleRecorder,
  onError: (error: unknown) => void,
) {
  const stopwatch = new ProvisionStopwatch(timing.requestedAt, timing.pickedUpAt);
  let path: TStagePath = provisionPathOf(record.state, record.backendHandle !== null);
  return {
    get path(): TStagePath {
      return path;
    },
    /** The machine came from a warm pool (`warm`) or a pool could not serve it (`pool_miss`). */
    pooled(outcome: "warm" | "pool_miss"): void {
      path = outcome;
    },
    progress: (step: string) => stopwatch.progress(step),
    done(ok: boolean): void {
      const samples = stopwatch.samples({
        tenantId: record.tenantId,
        workspaceId: record.id,
        backend: record.backendKind,
        path,
        ok,
      });
      void stageSamples.record(samples, onError);
    },
  };
}
