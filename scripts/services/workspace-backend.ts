import { loadEngineConfig } from "@/server/engine/engine-config";
import { createDriverSet } from "@/server/engine/driver-set";
import { S3CheckpointStore } from "@/server/workspace/checkpoints/s3-checkpoint-store";
import { isAppError } from "@/server/shared/errors";

/** Why `npm start` refuses to boot on the configured workspace backend. */
export class WorkspaceBackendUnavailableError extends Error {}

/**
 * The boot check of `npm start`: every enabled backend's driver checks that it works on this machine (the
 * default `local` backend runs one tiny bubblewrap sandbox), and Berth refuses to start when one does not,
 * saying what to install or configure. Config errors (host-unconfined as root without the second
 * variable, a half-configured checkpoint bucket) surface as thrown AppErrors. The checkpoint bucket, when
 * one is configured, must exist and accept these credentials: a turn would otherwise fail at its end.
 */
export async function checkWorkspaceBackend(say: (line: string) => void): Promise<void> {
  const config = loadEngineConfig();
  const drivers = createDriverSet(config);
  try {
    for (const driver of drivers.all) {
      const probe = await driver.probe?.();
      if (!probe) continue;
      if (!probe.ok) throw new WorkspaceBackendUnavailableError(`${probe.reason}.\n${probe.hint}`);
      say(`workspaces (${driver.name}${driver === drivers.default ? ", default" : ""}): ${probe.summary}`);
    }
  } finally {
    await drivers.close();
  }
  if (config.checkpointS3) {
    const store = new S3CheckpointStore(config.checkpointS3);
    try {
      say(`checkpoints: ${await store.probe()}`);
    } catch (error) {
      if (!isAppError(error)) throw error;
      throw new WorkspaceBackendUnavailableError(
        `${error.message}.\nCreate the bucket or fix the BERTH_CHECKPOINT_S3_* variables (README, Turn checkpoints).`,
      );
    } finally {
      store.close();
    }
  }
}
