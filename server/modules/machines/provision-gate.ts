import type { Db } from "@/server/db";
import { AsyncLocalStorage } from "node:async_hooks";
import type { Job } from "bullmq";
import { z } from "zod";
import type { AttachTracker } from "@/server/modules/metrics/attach-tracker";
import { STAGE_PATHS } from "@/server/modules/metrics/stage-sample.schema";
import type { Logger } from "@/server/logger";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { deterministicJobId } from "@/server/queue/types";
import { AppError, isAppError } from "@/server/shared/errors";
import { precheckProvision, type QuotaDeps } from "@/server/modules/quota/quota.service";
import type { EnsureProvisioned, ProvisionedMachine } from "@/server/engine/record-attacher";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import {
  findWorkspaceRecordForSystem,
  type WorkspaceRecord,
} from "@/server/modules/workspace/workspace-lifecycle.data";
import { handleOfRecord } from "@/server/modules/workspace/workspace-spec";

const ZProvisionResult = z.object({ path: z.enum(STAGE_PATHS).optional() });

export type ProvisionGateDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  queues: QueueSet<BerthJobCatalog>;
  /** How long one call waits for the workers before answering UNAVAILABLE. */
  waitMs: number;
  /**
   * While waiting, how often the gate looks at the record and the job itself instead of trusting the queue's
   * events alone: Redis may lose the job (a restart without persistence, a failover) and its events with it.
   */
  checkEveryMs?: number;
  log: Logger;
  /** Quota checks before a provision is asked for (the root's, built on first use). */
  quota: () => QuotaDeps;
  /** Where the path the workers took is noted for this process' attach timing (the root's tracker). */
  attachTracker: () => AttachTracker;
  /**
   * Serves a first use from a warm pool right here (server/modules/pool/warm-first-use.service.ts): the
   * READY record, or null when the workers must provision it. Absent: every provision goes to the workers.
   */
  warmFirstUse?: (record: WorkspaceRecord) => Promise<WorkspaceRecord | null>;
};

const DEFAULT_CHECK_EVERY_MS = 2_000;

/**
 * The record a caller read (under its lease lock) just before asking the engine for the workspace, and
 * the one the gate read once the workers were done. The engine's cache stands between the two and its
 * types carry no record, so it goes down through the async context: the gate's first look is the
 * caller's record instead of a read of its own, and the caller tags the attached handle with the
 * provisioned record's generation instead of reading it again (issue 23: a turn reads its workspace once).
 */
type RecordHandoff = { read: WorkspaceRecord | null; provisioned: WorkspaceRecord | null };
const recordHandoff = new AsyncLocalStorage<RecordHandoff>();

/**
 * Runs `attach` (a call into the engine's cache) with `record`, read by the caller a moment ago, handed
 * to a provision gate that `attach` reaches; answers what `attach` returned and the record the gate read
 * after provisioning (null when it did not provision).
 */
export async function attachWithRecordRead<T>(
  record: WorkspaceRecord,
  attach: () => Promise<T>,
): Promise<{ value: T; provisioned: WorkspaceRecord | null }> {
  const handoff: RecordHandoff = { read: record, provisioned: null };
  const value = await recordHandoff.run(handoff, attach);
  return { value, provisioned: handoff.provisioned };
}

/** The caller's record of this workspace, once (a second look, or a machine found gone, reads afresh). */
function takeRecordRead(spec: WorkspaceSpec): WorkspaceRecord | null {
  const handoff = recordHandoff.getStore();
  const read = handoff?.read;
  if (!handoff || !read || read.id !== spec.workspaceId || read.tenantId !== spec.tenantId) return null;
  handoff.read = null;
  return read;
}

/** Tells the caller which record its attach ended with (see RecordHandoff). */
function provisionedRecord(record: WorkspaceRecord): ProvisionedMachine {
  const handoff = recordHandoff.getStore();
  if (handoff) handoff.provisioned = record;
  return machineOf(record);
}

/**
 * The API side of provisioning: makes sure the workers have provisioned the workspace, without ever
 * provisioning itself. READY → nothing to do (a PURGED record gets its next generation this way). Otherwise enqueue `workspace.provision` under the workspace's
 * deterministic job id (any number of callers, in any number of API processes, share that one job) and wait
 * for it on the queue's events. A finished provision job under the id is replaced, so a later call can
 * try again after a failure (which stays recorded on the workspace: state FAILED, error, event) or a stop.
 */
export function createProvisionGate(deps: ProvisionGateDeps): EnsureProvisioned {
  const { db } = deps;
  const enqueue = createEnqueue(deps.queues);
  // Refused before any job or backend call: live workspaces, budget, provisions per minute. The worker's
  // transition is the admission itself (atomic); this only answers the caller at once, with the limit.
  const precheck = (spec: WorkspaceSpec) =>
    precheckProvision(spec.tenantId, spec.workspaceId, deps.quota(), db);
  return async (spec, options = {}) => {
    // Two rounds at most: the job we waited for may have finished (and been removed) in between, in which
    // case the record, not the job, says whether the workspace is ready.
    for (let round = 0; ; round++) {
      const record =
        (round === 0 && !options.machineGone && takeRecordRead(spec)) || (await currentRecord(spec, db));
      // A READY record whose machine an attach found gone is not ready: the workers look first.
      const trustReady = !(options.machineGone && round === 0);
      if (record.state === "READY" && trustReady) return machineOf(record);
      if (round === 0 && !options.machineGone && deps.warmFirstUse) {
        const served = await deps.warmFirstUse(record);
        if (served?.state === "READY") {
          deps.attachTracker().noteProvisioned(spec.workspaceId, { path: "warm", readyAt: Date.now() });
          return provisionedRecord(served);
        }
      }
      // A workspace already being provisioned holds its slot (and a machine found gone keeps its own):
      // only a new provision is checked.
      if (record.state !== "PROVISIONING" && record.state !== "READY") await precheck(spec);
      try {
        await provisionOnce(spec, record.state, options.machineGone === true);
        const after = await currentRecord(spec, db);
        if (after.state === "READY") return provisionedRecord(after);
        throw new Error(`the provision job finished but the workspace is ${after.state}`);
      } catch (error) {
        const after = await currentRecord(spec, db);
        if (after.state === "READY") return provisionedRecord(after);
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

  /**
   * Enqueues the provision and waits for it, looking every `checkEveryMs` at the record (Postgres holds the
   * truth: READY means done, whatever happened to the job) and at the job: gone from Redis while the
   * record is not READY means it was lost with Redis' data, so it is enqueued again (same deterministic id:
   * every waiter in every replica lands on the one new job); finished without an event reaching us (events
   * lost across a reconnect) ends the wait with the job's own outcome.
   */
  async function provisionOnce(spec: WorkspaceSpec, state: string, machineGone: boolean): Promise<void> {
    // A finished job under the id (a provision before the last stop, or one that failed for good) is
    // replaced by enqueue: `workspace.provision` is rerunnable (server/modules/workspace/workspace.jobs.ts).
    const jobId = deterministicJobId("workspace.provision", spec.workspaceId);
    const payload = {
      tenantId: spec.tenantId,
      workspaceId: spec.workspaceId,
      reason: machineGone ? "the machine was found gone on use" : `first use (was ${state})`,
      machineGone,
    };
    const checkEveryMs = deps.checkEveryMs ?? DEFAULT_CHECK_EVERY_MS;
    const deadline = Date.now() + deps.waitMs;
    let job: Job = await enqueue("workspace.provision", payload, { jobId });
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`no provision result within ${deps.waitMs} ms`);
      const finished = await waitForEvent(job, Math.min(checkEveryMs, remaining));
      if (finished) return notePath(spec.workspaceId, finished.result);
      const record = await currentRecord(spec, db).catch(rethrowIfDefinite);
      // READY means done, except for a machine found gone: its record stays READY until the job runs.
      if (record?.state === "READY" && !machineGone) return;
      const outcome = await jobOutcome(jobId).catch(() => "unknown" as const);
      if (outcome === "completed") return;
      if (outcome === "failed") throw new Error(`the provision job ${jobId} failed`);
      if (outcome === "missing") {
        deps.log.warn(
          { workspaceId: spec.workspaceId, state: record?.state },
          "the provision job vanished from Redis; enqueueing it again",
        );
        job = await enqueue(
          "workspace.provision",
          { ...payload, reason: `${payload.reason}; re-enqueued: the job was lost` },
          { jobId },
        ).catch(() => job);
      }
    }
  }

  /**
   * The job's result once it finished (a failure rejects); false when nothing arrived within `ms`. The path
   * the workers took (cold, resume, replaced) carries over to this process' attach timing.
   */
  function notePath(workspaceId: string, result: unknown): void {
    const parsed = ZProvisionResult.safeParse(result);
    if (parsed.success && parsed.data.path) {
      deps.attachTracker().noteProvisioned(workspaceId, { path: parsed.data.path, readyAt: Date.now() });
    }
  }

  async function waitForEvent(job: Job, ms: number): Promise<false | { result: unknown }> {
    try {
      const result: unknown = await job.waitUntilFinished(await deps.queues.events("workspace"), ms);
      return { result };
    } catch (error) {
      if (error instanceof Error && /timed out before finishing/.test(error.message)) return false;
      // A Redis that is down (or just back) fails the wait itself: keep checking until the deadline.
      if (error instanceof Error && isConnectionTrouble(error)) return false;
      throw error;
    }
  }

  async function jobOutcome(jobId: string): Promise<"missing" | "completed" | "failed" | "pending"> {
    const live = (await deps.queues.get("workspace").getJob(jobId)) as Job | undefined;
    if (!live) return "missing";
    const jobState = await live.getState();
    if (jobState === "completed" || jobState === "failed") return jobState;
    // "unknown": the job's hash survived but it sits in no state list (partially lost): treat as lost.
    return jobState === "unknown" ? "missing" : "pending";
  }
}

/** A NOT_FOUND record is definite; a database hiccup while checking just means "look again later". */
function rethrowIfDefinite(error: unknown): undefined {
  if (error instanceof AppError && error.code === "NOT_FOUND") throw error;
  return undefined;
}

function isConnectionTrouble(error: Error): boolean {
  return /Connection is closed|ECONNREFUSED|ECONNRESET|max retries per request|Stream isn't writeable/i.test(
    error.message,
  );
}

async function currentRecord(spec: WorkspaceSpec, db: Db): Promise<WorkspaceRecord> {
  const record = await findWorkspaceRecordForSystem(spec.workspaceId, db);
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
