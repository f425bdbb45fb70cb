import { z } from "zod";
import { JOB_RETENTION } from "@/server/queue/retention";
import { deterministicJobId, defineJob } from "@/server/queue/types";

/**
 * The workspace module's job definitions, spread into server/queue/catalog.ts. Ids are deterministic so
 * any number of API replicas asking for the same thing at once make one job. Finished jobs are kept for the
 * retention window (server/queue/retention.ts), so the jobs page shows recent provisions and stops; those
 * two are `rerunnable` (a new request replaces a finished job under the id: the same workspace must be
 * provisionable again after a stop, and a late duplicate finds the workspace READY and does nothing).
 */
const WORKSPACE_QUEUE = "workspace";
const KEEP = { removeOnComplete: JOB_RETENTION.completed, removeOnFail: JOB_RETENTION.failed };
const KEEP_FAILED = JOB_RETENTION.failed;
// Waits of 1, 2, 4 … 64 s between attempts: about two minutes in all, so a short database or Redis outage
// (a failover, a restart) does not use every attempt up and leave a workspace PROVISIONING for good (five
// attempts from 0.5 s were spent within 8 s of an outage). Non-retryable AppErrors fail at once anyway.
const RETRIES = { attempts: 8, backoff: { type: "exponential", delay: 1_000 } } as const;

const ZWorkspaceRef = z.object({
  tenantId: z.string().min(1).max(200),
  workspaceId: z.string().min(1).max(200),
});

export const ZWorkspaceProvisionPayload = ZWorkspaceRef.extend({
  reason: z.string().max(500).default("first use"),
  /** An attach found the machine of a READY record gone: the provision checks it, never trusts READY. */
  machineGone: z.boolean().default(false),
});
export const ZWorkspaceStopPayload = ZWorkspaceRef.extend({
  reason: z.string().max(500).default("stop requested"),
});
export const ZWorkspacePurgePayload = ZWorkspaceRef.extend({
  reason: z.string().max(500).default("purge requested"),
  actor: z.string().max(200).default("system"),
  /** The generation to purge (absent: the current one); a later generation is never purged by it. */
  generation: z.number().int().positive().optional(),
});
const ZWorkspaceSweepPayload = z.object({
  trigger: z.enum(["schedule", "manual"]).default("schedule"),
});
export const ZWorkspaceReconcilePayload = z.object({
  trigger: z.enum(["schedule", "manual"]).default("schedule"),
  /** Report only; reap and mark nothing. */
  dryRun: z.boolean().default(false),
  /** A PROVISIONING or STOPPING record older than this is resumed (its job enqueued again). */
  stuckAfterMs: z.number().int().min(0).optional(),
});
export const ZSessionPurgePayload = z.object({
  tenantId: z.string().min(1).max(200),
  workspaceId: z.string().min(1).max(200),
  agentId: z.string().min(1).max(200),
  /** The deleted session and the team-worker sessions it led (reference bug #2288). */
  sessionIds: z.array(z.string().min(1).max(200)).min(1).max(1_000),
});
export const ZAgentPurgePayload = z.object({
  tenantId: z.string().min(1).max(200),
  agentId: z.string().min(1).max(200),
  /** Every workspace the agent used (collected before its sessions were deleted). */
  workspaceIds: z.array(z.string().min(1).max(200)).max(10_000),
});

export const workspaceJobs = {
  "workspace.provision": defineJob({
    queue: WORKSPACE_QUEUE,
    schema: ZWorkspaceProvisionPayload,
    options: { ...RETRIES, ...KEEP },
    jobId: (p) => deterministicJobId("workspace.provision", p.workspaceId),
    rerunnable: true,
  }),
  "workspace.stop": defineJob({
    queue: WORKSPACE_QUEUE,
    schema: ZWorkspaceStopPayload,
    options: { ...RETRIES, ...KEEP },
    jobId: (p) => deterministicJobId("workspace.stop", p.workspaceId),
    rerunnable: true,
  }),
  "workspace.purge": defineJob({
    queue: WORKSPACE_QUEUE,
    schema: ZWorkspacePurgePayload,
    options: { ...RETRIES, ...KEEP },
    // Per generation: the completed job of generation n is kept (and deduplicates) for the window.
    jobId: (p) => deterministicJobId("workspace.purge", p.workspaceId, String(p.generation ?? 0)),
  }),
  "workspace.sweep": defineJob({
    queue: WORKSPACE_QUEUE,
    schema: ZWorkspaceSweepPayload,
    options: { attempts: 1, removeOnComplete: { age: 60 * 60, count: 100 }, removeOnFail: KEEP_FAILED },
  }),
  "workspace.reconcile": defineJob({
    queue: WORKSPACE_QUEUE,
    schema: ZWorkspaceReconcilePayload,
    options: { attempts: 1, removeOnComplete: { age: 24 * 60 * 60, count: 100 }, removeOnFail: KEEP_FAILED },
  }),
  "session.purge": defineJob({
    queue: WORKSPACE_QUEUE,
    schema: ZSessionPurgePayload,
    options: { ...RETRIES, ...KEEP },
    jobId: (p) => deterministicJobId("session.purge", p.workspaceId, p.sessionIds[0] ?? ""),
  }),
  "agent.purge": defineJob({
    queue: WORKSPACE_QUEUE,
    schema: ZAgentPurgePayload,
    options: { ...RETRIES, ...KEEP },
    jobId: (p) => deterministicJobId("agent.purge", p.agentId),
  }),
} as const;
