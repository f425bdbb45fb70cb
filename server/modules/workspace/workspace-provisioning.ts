import type { Job } from "bullmq";
import type { Logger } from "@/server/logger";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { deterministicJobId } from "@/server/queue/types";
import { AppError, isAppError } from "@/server/shared/errors";
import { defaultQuotaDeps, precheckProvision, type QuotaDeps } from "@/server/modules/quota/quota.service";
import type { ProvisionedMachine } from "@/server/engine/attach-provider";
import type { WorkspaceSpec } from "@/server/workspace/backend/driver";
import { findWorkspaceRecordForSystem, type WorkspaceRecord } from "./workspace-lifecycle.data";
import { handleOfRecord } from "./workspace-spec";

export type ProvisionGateDeps = {
  queues: QueueSet<BerthJobCatalog>;
  /** How long one call waits for the workers before answering UNAVAILABLE. */
  waitMs: number;
  log: Logger;
  /** Quota checks before a provision is asked for (default: the installation's, built on first use). */
  quota?: QuotaDeps;
};

/**
 * The API side of provisioning: makes sure the workers have provisioned the workspace, without ever
 * provisioning itself. READY → nothing to do (a PURGED record gets its next generation this way). Otherwise enqueue `workspace.provision` under the workspace's
 * deterministic job id (any number of callers, in any number of API processes, share that one job) and wait
 * for it on the queue's events. A finished provision job under the id is replaced, so a later call can
 * try again after a failure (which stays recorded on the workspace: state FAILED, error, event) or a stop.
 */
export function createProvisionGate(
  deps: ProvisionGateDeps,
): (spec: WorkspaceSpec) => Promise<ProvisionedMachine> {
  const enqueue = createEnqueue(deps.queues);
  let quota = deps.quota;
  // Refused before any job or backend call: live workspaces, budget, provisions per minute. The worker's
  // transition is the admission itself (atomic); this only answers the caller at once, with the limit.
  const precheck = (spec: WorkspaceSpec) =>
    precheckProvision(spec.tenantId, spec.workspaceId, (quota ??= defaultQuotaDeps()));
  return async (spec) => {
    // Two rounds at most: the job we waited for may have finished (and been removed) in between, in which
    // case the record, not the job, says whether the workspace is ready.
    for (let round = 0; ; round++) {
      const record = await currentRecord(spec);
      if (record.state === "READY") return machineOf(record);
      // A workspace already being provisioned holds its slot: only a new provision is checked.
      if (record.state !== "PROVISIONING") await precheck(spec);
      try {
        await provisionOnce(spec, record.state);
        const after = await currentRecord(spec);
        if (after.state === "READY") return machineOf(after);
        throw new Error(`the provision job finished but the workspace is ${after.state}`);
      } catch (error) {
        const after = await currentRecord(spec);
        if (after.state === "READY") return machineOf(after);
        // The worker refused it at admission (another replica took the last slot meanwhile): the typed
        // refusal, not "try again shortly".
        await precheck(spec).catch((refusal: unknown) => {
          if (isAppError(refusal) && refusal.code === "QUOTA_EXCEEDED") throw refusal;
        });
        if (round >= 1) {
          deps.log.warn({ workspaceId: spec.workspaceId, err: error }, "workspace provisioning failed");
          throw new AppError(
            "UNAVAILABLE",
            `provisioning workspace ${spec.workspaceId} failed: ${String(error)}`,
            {
              cause: error,
              userMessage: "The workspace could not be started; try again shortly.",
              details: { workspaceId: spec.workspaceId },
            },
          );
        }
      }
    }
  };

  async function provisionOnce(spec: WorkspaceSpec, state: string): Promise<void> {
    // A finished job under the id (a provision before the last stop, or one that failed for good) is
    // replaced by enqueue: `workspace.provision` is rerunnable (server/modules/workspace/workspace.jobs.ts).
    const jobId = deterministicJobId("workspace.provision", spec.workspaceId);
    const job: Job = await enqueue(
      "workspace.provision",
      { tenantId: spec.tenantId, workspaceId: spec.workspaceId, reason: `first use (was ${state})` },
      { jobId },
    );
    await job.waitUntilFinished(await deps.queues.events("workspace"), deps.waitMs);
  }
}

async function currentRecord(spec: WorkspaceSpec): Promise<WorkspaceRecord> {
  const record = await findWorkspaceRecordForSystem(spec.workspaceId);
  if (!record || record.tenantId !== spec.tenantId) {
    throw new AppError(
      "NOT_FOUND",
      `workspace ${spec.workspaceId} has no record in tenant ${spec.tenantId}`,
      {
        userMessage: "Workspace not found.",
      },
    );
  }
  // PURGED is provisioned like any other state that is not READY: the job starts the next generation.
  return record;
}

/** The record's backend and the handle its last provision stored: what attaching needs. */
function machineOf(record: WorkspaceRecord): ProvisionedMachine {
  return { kind: record.backendKind, handle: handleOfRecord(record) };
}
