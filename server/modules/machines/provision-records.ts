import type { UsageRecorder } from "@/server/modules/metering/metering.service";
import type { TenantScope } from "@/server/auth/scope";
import type { Db } from "@/server/db";
import type { Logger } from "@/server/logger";
import type { startProvisionTimings } from "@/server/modules/metrics/provision-timings";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { appendWorkspaceEvent } from "@/server/modules/workspace/workspace.data";
import { transitionFrom, type WorkspaceRecord } from "@/server/modules/workspace/workspace-lifecycle.data";
import { redactHostPaths } from "@/server/shared/host-paths";
import type { CreateProgress } from "@/server/workspace/drivers/driver";
import { recordDataLostEvent } from "./data-lost";

/**
 * What a provision writes besides its transitions (machine-jobs.service.ts): each step of the machine's
 * creation as a workspace event, a data loss once, and a failure with its webhook.
 */

/** The data-lost event, recorded once per job, whoever notices first (the job or the driver). */
export function dataLossRecorder(scope: TenantScope, record: WorkspaceRecord, db: Db) {
  let recorded = false;
  return {
    recorded: () => recorded,
    async record(reason: string) {
      recorded = true;
      await recordDataLostEvent(scope, record, reason, db);
    },
  };
}

/**
 * Each provisioning step (image build output, container created or reattached, gateway ready) becomes a
 * WorkspaceEvent, in order, so an admin can watch a slow first build and see where a failure happened.
 */
export function progressRecorder(
  scope: TenantScope,
  record: WorkspaceRecord,
  timings: ReturnType<typeof startProvisionTimings>,
  dataLoss: ReturnType<typeof dataLossRecorder>,
  log: Logger,
  db: Db,
) {
  let progressEvents = Promise.resolve();
  const onProgress = (progress: CreateProgress) => {
    timings.progress(progress.step);
    progressEvents = progressEvents
      .then(async () => {
        const reason = progress.detail ? `${progress.step}: ${progress.detail.slice(0, 500)}` : progress.step;
        // The driver found the machine's files gone (an E2B sandbox that vanished or came back empty).
        if (progress.dataLost && !dataLoss.recorded()) return dataLoss.record(reason);
        await appendWorkspaceEvent(
          scope,
          record.id,
          {
            kind: "provisioning",
            reason,
            data: { step: progress.step },
          },
          db,
        );
      })
      .catch((error: unknown) => log.warn({ err: error }, "could not record a provisioning step"));
  };
  /** Resolves once every step reported so far is recorded. */
  const recorded = () => progressEvents;
  return { onProgress, recorded };
}

/** PROVISIONING → FAILED with the error, the failed timing, and the `workspace.failed` webhook. */
export async function recordProvisionFailure(
  scope: TenantScope,
  record: WorkspaceRecord,
  error: unknown,
  timings: ReturnType<typeof startProvisionTimings>,
  lifecycle: LifecycleEvents,
  log: Logger,
  db: Db,
) {
  const message = error instanceof Error ? error.message : String(error);
  await transitionFrom(
    scope,
    record.id,
    {
      from: ["PROVISIONING"],
      to: "FAILED",
      reason: "provisioning failed",
      error: message.slice(0, 4000),
    },
    db,
  ).catch((transitionError: unknown) =>
    log.warn({ err: transitionError }, "could not record the failed provision"),
  );
  timings.done(false);
  lifecycle.emit(record.tenantId, "workspace.failed", {
    workspaceId: record.id,
    backend: record.backendKind,
    // Sent outside the installation: host paths never leave it (server/shared/host-paths.ts).
    error: redactHostPaths(message).slice(0, 1_000),
  });
}

/** A provision's usage, buffered for the ledger; a failure to buffer is logged, never the provision's. */
export async function meterProvision(
  usage: UsageRecorder,
  record: WorkspaceRecord,
  size: string,
  log: Logger,
): Promise<void> {
  await usage
    .record([
      {
        tenantId: record.tenantId,
        kind: "provision",
        quantity: 1,
        backend: record.backendKind,
        size,
        agentId: record.agentId,
        userId: record.userId,
        workspaceId: record.id,
      },
    ])
    .catch((error: unknown) => log.warn({ err: error }, "could not meter a provision"));
}
