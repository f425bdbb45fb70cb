import { ProvisionStopwatch, provisionPathOf } from "./provision-stopwatch";
import type { StageSampleRecorder } from "./stage-buffer.service";

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
  const path = provisionPathOf(record.state, record.backendHandle !== null);
  return {
    path,
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
