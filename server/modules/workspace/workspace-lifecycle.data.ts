import { Prisma, type WorkspaceState } from "@/generated/prisma/client";
import { actorLabel, type TenantScope } from "@/server/auth/scope";
import { type Db, type DbClient } from "@/server/db";
import { AppError } from "@/server/shared/errors";
import type { BackendKind } from "@/server/workspace/drivers/kind";
import { canTransitionWorkspace, type WorkspaceLeaseDTO } from "@/server/modules/workspace/workspace.types";
import { announceChange } from "@/server/modules/live/change-feed";
import { accrueWorkspaceSeconds } from "./workspace-metering.data";

/**
 * Lifecycle queries that need row locks or cross-tenant reads (workers, the sweeper, reconcile), next to
 * H4's workspace.data.ts. Leases live in Postgres (not Redis) because the sweeper's "idle and unleased →
 * STOPPING" decision must be atomic with lease acquisition: both lock the workspace row (FOR UPDATE), so a
 * lease taken a microsecond before the sweep is always seen, and a lease can never be granted on a
 * workspace the sweeper has just begun to stop without the caller seeing STOPPING.
 */

export type WorkspaceRecord = {
  id: string;
  tenantId: string;
  state: WorkspaceState;
  generation: number;
  backendKind: BackendKind;
  isolationPolicy: string;
  agentId: string | null;
  userId: string | null;
  lastActivityAt: Date | null;
  stateChangedAt: Date;
  /** What the last provision returned (the driver's reattach key); null before it and after a purge. */
  backendHandle: unknown;
};

const recordSelect = {
  id: true,
  tenantId: true,
  state: true,
  generation: true,
  backendKind: true,
  backendHandle: true,
  isolationPolicy: true,
  agentId: true,
  userId: true,
  lastActivityAt: true,
  stateChangedAt: true,
} satisfies Prisma.WorkspaceSelect;

/** A workspace by id across tenants: for jobs, which re-check the payload's tenant against it. */
export async function findWorkspaceRecordForSystem(
  workspaceId: string,
  db: DbClient,
): Promise<WorkspaceRecord | null> {
  return db.workspace.findUnique({ where: { id: workspaceId }, select: recordSelect });
}

/** Every record of one backend kind that may still own backend resources (reconcile). */
export async function listLiveRecordsForSystem(
  backendKind: BackendKind,
  db: DbClient,
): Promise<WorkspaceRecord[]> {
  return db.workspace.findMany({
    where: { backendKind, state: { not: "PURGED" } },
    select: recordSelect,
  });
}

/** Records in PROVISIONING or STOPPING since before `before`, oldest first (reconcile resumes them). */
export async function listStuckTransitionsForSystem(
  before: Date,
  db: DbClient,
  limit = 500,
): Promise<WorkspaceRecord[]> {
  return db.workspace.findMany({
    where: { state: { in: ["PROVISIONING", "STOPPING"] }, stateChangedAt: { lt: before } },
    select: recordSelect,
    orderBy: { stateChangedAt: "asc" },
    take: limit,
  });
}

const idleSince = (idleBefore: Date): Prisma.WorkspaceWhereInput => ({
  OR: [{ lastActivityAt: null }, { lastActivityAt: { lt: idleBefore } }],
});

/**
 * READY workspaces idle since before `idleBefore`, leased or not (the sweeper decides per row).
 * `tenantIdleBefore` gives tenants with a shorter idle TTL of their own a later cut-off than `idleBefore`.
 */
export async function findSweepCandidates(
  options: {
    idleBefore: Date;
    tenantIdleBefore?: readonly { tenantId: string; idleBefore: Date }[];
    limit: number;
  },
  db: DbClient,
): Promise<{ id: string; tenantId: string }[]> {
  const own = options.tenantIdleBefore ?? [];
  return db.workspace.findMany({
    where: {
      state: "READY",
      OR: [
        {
          ...(own.length > 0 ? { tenantId: { notIn: own.map((tenant) => tenant.tenantId) } } : {}),
          ...idleSince(options.idleBefore),
        },
        ...own.map((tenant) => ({ tenantId: tenant.tenantId, ...idleSince(tenant.idleBefore) })),
      ],
    },
    select: { id: true, tenantId: true },
    orderBy: { lastActivityAt: "asc" },
    take: options.limit,
  });
}

export type SweepDecision =
  | { outcome: "stopping"; idleSinceMs: number | null; droppedLeases: string[] }
  | { outcome: "leased"; holders: string[] }
  | { outcome: "skipped"; why: string };

/**
 * Under the row lock: if the workspace is READY, idle past `idleBefore`, and holds no live lease younger
 * than the hard maximum, moves it to STOPPING (event with the reason). Leases older than the maximum are
 * dropped first, each with a `lease_released` event saying why.
 */
export async function stopIfIdle(
  scope: TenantScope,
  workspaceId: string,
  options: { idleBefore: Date; leaseBornAfter: Date; reason: string },
  db: Db,
): Promise<SweepDecision> {
  let userId: string | null = null;
  const decision = await db.$transaction(async (tx): Promise<SweepDecision> => {
    const row = await lockWorkspace(tx, scope, workspaceId);
    if (!row) return { outcome: "skipped", why: "not found" };
    if (row.state !== "READY") return { outcome: "skipped", why: `state ${row.state}` };
    if (row.lastActivityAt && row.lastActivityAt >= options.idleBefore) {
      return { outcome: "skipped", why: "active again" };
    }
    const now = new Date();
    const leases = await tx.workspaceLease.findMany({
      where: { workspaceId, OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] },
      select: { holder: true, createdAt: true },
    });
    const overAge = leases.filter((lease) => lease.createdAt < options.leaseBornAfter);
    const live = leases.filter((lease) => lease.createdAt >= options.leaseBornAfter);
    if (live.length > 0) return { outcome: "leased", holders: live.map((lease) => lease.holder) };
    for (const lease of overAge) {
      await tx.workspaceLease.deleteMany({ where: { workspaceId, holder: lease.holder } });
      await insertEvent(tx, scope, workspaceId, "lease_released", "lease exceeded the maximum lease age", {
        holder: lease.holder,
        acquiredAt: lease.createdAt.toISOString(),
      });
    }
    await setState(tx, scope, workspaceId, row, "STOPPING", options.reason, {
      lastActivityAt: row.lastActivityAt?.toISOString() ?? null,
    });
    userId = row.metering.userId;
    return {
      outcome: "stopping",
      idleSinceMs: row.lastActivityAt ? now.getTime() - row.lastActivityAt.getTime() : null,
      droppedLeases: overAge.map((lease) => lease.holder),
    };
  });
  if (decision.outcome === "stopping") announceState(scope, workspaceId, "STOPPING", userId);
  return decision;
}

/** After the commit (a page that refetches on it must read the new state): see change-feed.ts. */
function announceState(
  scope: TenantScope,
  workspaceId: string,
  state: WorkspaceState,
  userId: string | null,
) {
  announceChange(scope.tenantId, { topic: "workspace", id: workspaceId, state, userId });
}

/**
 * Takes (or renews) `holder`'s lease under a SHARED row lock, records why, then bumps the activity clock.
 * Returns the state the workspace is in, so the caller knows whether it must (re)provision.
 * The shared lock conflicts only with the sweeper's and transitions' FOR UPDATE (so a lease is never
 * granted on a workspace being stopped without the caller seeing STOPPING), while any number of turns on
 * one workspace take leases in parallel. The activity bump is a separate statement after the commit:
 * writing the row inside the transaction would upgrade the shared lock, and concurrent upgrades deadlock.
 */
export async function acquireLeaseLocked(
  scope: TenantScope,
  workspaceId: string,
  lease: { holder: string; reason: string; expiresAt: Date; ownerId?: string | null },
  db: Db,
  /** `quiet`: a read's lease (the dashboard's browsing) writes no `lease_acquired` ledger event. */
  options: { refuseStates?: readonly WorkspaceState[]; quiet?: boolean } = {},
): Promise<{ lease: WorkspaceLeaseDTO; state: WorkspaceState; record: WorkspaceRecord }> {
  const acquired = await db.$transaction(async (tx) => {
    // A PURGED workspace is leased too (a use provisions its next generation), unless the caller works on
    // the current generation's data only (`refuseStates`).
    const row = await lockWorkspace(tx, scope, workspaceId, "share");
    if (!row) throw notFound(workspaceId);
    // A checkpoint restore writing the files owns the workspace until it ends (checkpoint.data.ts).
    if (row.restoringId && lease.holder !== restoreLeaseHolder(row.restoringId)) {
      throw new AppError("CONFLICT", `workspace ${workspaceId} is being restored (${row.restoringId})`, {
        userMessage: "The workspace is being restored from a checkpoint; try again when the restore ends.",
        details: { restoreId: row.restoringId },
      });
    }
    if (options.refuseStates?.includes(row.state)) {
      throw new AppError("CONFLICT", `workspace ${workspaceId} is ${row.state}`, {
        userMessage: "The workspace changed state; reload and try again.",
      });
    }
    const saved = await tx.workspaceLease.upsert({
      where: { workspaceId_holder: { workspaceId, holder: lease.holder } },
      create: {
        tenantId: scope.tenantId,
        workspaceId,
        holder: lease.holder,
        reason: lease.reason,
        expiresAt: lease.expiresAt,
        ownerId: lease.ownerId ?? null,
      },
      update: { reason: lease.reason, expiresAt: lease.expiresAt, ownerId: lease.ownerId ?? null },
      select: { id: true, workspaceId: true, holder: true, reason: true, expiresAt: true, createdAt: true },
    });
    if (!options.quiet) {
      await insertEvent(tx, scope, workspaceId, "lease_acquired", lease.reason, { holder: lease.holder });
    }
    return { lease: saved, state: row.state, record: row.record };
  });
  // Only work moves the idle clock: a read's quiet lease (dashboard browsing, file listings, status
  // probes) holds the workspace while it runs but never keeps it awake afterwards.
  if (!options.quiet) await touchWorkspaceActivity(scope, workspaceId, new Date(), db);
  return acquired;
}

// Activity is an idle clock for the sweeper: a bump within this window adds nothing, and skipping it
// spares the row lock when many turns on one workspace start or end together.
const ACTIVITY_GRANULARITY_MS = 1000;

/** Moves the workspace's activity clock to `at` unless it is already within a second of it. */
export async function touchWorkspaceActivity(
  scope: TenantScope,
  workspaceId: string,
  at: Date,
  db: DbClient,
): Promise<void> {
  await db.workspace.updateMany({
    where: {
      id: workspaceId,
      tenantId: scope.tenantId,
      OR: [
        { lastActivityAt: null },
        { lastActivityAt: { lt: new Date(at.getTime() - ACTIVITY_GRANULARITY_MS) } },
      ],
    },
    data: { lastActivityAt: at },
  });
}

/**
 * Moves to `to` when the workspace is in one of `from` (CONFLICT otherwise); writes the event. PURGED →
 * PROVISIONING starts the next generation (the counter goes up in the same statement, and the event says
 * which generation is now being provisioned). Returns the state it left and the generation it is now in.
 */
export async function transitionFrom(
  scope: TenantScope,
  workspaceId: string,
  change: {
    from: readonly WorkspaceState[];
    to: WorkspaceState;
    reason: string;
    error?: string;
    backendHandle?: Record<string, unknown> | null;
    data?: Record<string, unknown>;
    /** Runs first in the transition's transaction (a quota admission: it may lock and refuse). */
    admit?: (tx: Prisma.TransactionClient) => Promise<void>;
    /** On → READY: the size class the READY period is metered at. */
    meteredSize?: string;
    /** On → PROVISIONING: the run that takes the provision claim with the state (provision-claim.data.ts). */
    provisionClaim?: { holder: string; heldUntil: Date };
    /** A step that led to this change, recorded in the same transaction just before the change's event. */
    step?: { kind: "provisioning"; reason: string; data: Record<string, unknown> };
  },
  db: Db,
): Promise<WorkspaceState> {
  return (await transitionWithGeneration(scope, workspaceId, change, db)).from;
}

/** transitionFrom, answering the generation the workspace is in after the change too. */
export async function transitionWithGeneration(
  scope: TenantScope,
  workspaceId: string,
  change: Parameters<typeof transitionFrom>[2],
  db: Db,
): Promise<{ from: WorkspaceState; generation: number }> {
  const done = await db.$transaction(async (tx) => {
    // The tenant's quota lock (if any) before the workspace's: one order everywhere, no deadlock.
    if (change.admit) await change.admit(tx);
    const row = await lockWorkspace(tx, scope, workspaceId);
    if (!row) throw notFound(workspaceId);
    if (!change.from.includes(row.state)) {
      throw new AppError(
        "CONFLICT",
        `workspace ${workspaceId} is ${row.state}, not ${change.from.join("|")}`,
        {
          userMessage: "The workspace changed state; reload and try again.",
          details: { workspaceId, state: row.state },
        },
      );
    }
    if (change.step)
      await insertEvent(tx, scope, workspaceId, change.step.kind, change.step.reason, change.step.data);
    const generation = await setState(
      tx,
      scope,
      workspaceId,
      row,
      change.to,
      change.reason,
      change.data ?? {},
      {
        ...(change.error !== undefined ? { error: change.error } : {}),
        ...(change.backendHandle !== undefined ? { backendHandle: change.backendHandle } : {}),
        ...(change.meteredSize !== undefined ? { meteredSize: change.meteredSize } : {}),
        ...(change.provisionClaim !== undefined ? { provisionClaim: change.provisionClaim } : {}),
      },
    );
    return { from: row.state, generation, userId: row.metering.userId };
  });
  announceState(scope, workspaceId, change.to, done.userId);
  return { from: done.from, generation: done.generation };
}

type LockedRow = {
  /** The whole record as the lock read it (a lease's one read of its workspace: workspace.service.ts). */
  record: WorkspaceRecord;
  state: WorkspaceState;
  generation: number;
  lastActivityAt: Date | null;
  /** The RUNNING checkpoint restore that owns the workspace, if any. */
  restoringId: string | null;
  metering: {
    meteredAt: Date | null;
    meteredSize: string | null;
    backendKind: string;
    agentId: string | null;
    userId: string | null;
  };
};

type RawLockedRow = {
  id: string;
  tenant_id: string;
  isolation_policy: string;
  state_changed_at: Date;
  backend_handle: unknown;
  state: WorkspaceState;
  generation: number;
  last_activity_at: Date | null;
  metered_at: Date | null;
  metered_size: string | null;
  backend_kind: string;
  agent_id: string | null;
  user_id: string | null;
  restoring_id: string | null;
};

/** The lease holder name of a checkpoint restore: the one lease a restoring workspace takes. */
export function restoreLeaseHolder(restoreId: string): string {
  return `restore:${restoreId}`;
}

/** The row under FOR UPDATE (or FOR SHARE); null when it is not the tenant's. Also workspace-purge.data.ts'. */
export async function lockWorkspace(
  tx: Prisma.TransactionClient,
  scope: TenantScope,
  workspaceId: string,
  mode: "update" | "share" = "update",
): Promise<LockedRow | null> {
  const rows =
    mode === "update"
      ? await tx.$queryRaw<RawLockedRow[]>`
          SELECT id, tenant_id, state, generation, last_activity_at, state_changed_at, metered_at, metered_size,
            backend_kind::text, backend_handle, isolation_policy::text, agent_id, user_id, restoring_id
          FROM workspaces WHERE id = ${workspaceId} AND tenant_id = ${scope.tenantId} FOR UPDATE`
      : await tx.$queryRaw<RawLockedRow[]>`
          SELECT id, tenant_id, state, generation, last_activity_at, state_changed_at, metered_at, metered_size,
            backend_kind::text, backend_handle, isolation_policy::text, agent_id, user_id, restoring_id
          FROM workspaces WHERE id = ${workspaceId} AND tenant_id = ${scope.tenantId} FOR SHARE`;
  const row = rows[0];
  if (!row) return null;
  return {
    record: {
      id: row.id,
      tenantId: row.tenant_id,
      state: row.state,
      generation: row.generation,
      backendKind: row.backend_kind,
      isolationPolicy: row.isolation_policy,
      agentId: row.agent_id,
      userId: row.user_id,
      lastActivityAt: row.last_activity_at,
      stateChangedAt: row.state_changed_at,
      backendHandle: row.backend_handle,
    },
    state: row.state,
    generation: row.generation,
    lastActivityAt: row.last_activity_at,
    restoringId: row.restoring_id,
    metering: {
      meteredAt: row.metered_at,
      meteredSize: row.metered_size,
      backendKind: row.backend_kind,
      agentId: row.agent_id,
      userId: row.user_id,
    },
  };
}

const EVENT_FOR: Record<WorkspaceState, Prisma.WorkspaceEventCreateManyInput["kind"]> = {
  PENDING: "created",
  PROVISIONING: "provisioning",
  READY: "provisioned",
  STOPPING: "stopping",
  STOPPED: "stopped",
  PURGING: "purging",
  PURGED: "purged",
  FAILED: "failed",
};

/** The one state change (transition table, metering, event); the row locked first. Also the purge's. */
export async function setState(
  tx: Prisma.TransactionClient,
  scope: TenantScope,
  workspaceId: string,
  current: Pick<LockedRow, "state" | "generation" | "metering">,
  to: WorkspaceState,
  reason: string,
  data: Record<string, unknown>,
  extra: {
    error?: string;
    backendHandle?: Record<string, unknown> | null;
    meteredSize?: string;
    provisionClaim?: { holder: string; heldUntil: Date };
  } = {},
): Promise<number> {
  const from = current.state;
  // The one lifecycle: whatever `from` set a caller names, only the table's transitions happen.
  if (!canTransitionWorkspace(from, to)) {
    throw new AppError("CONFLICT", `workspace ${workspaceId}: illegal transition ${from} → ${to}`, {
      userMessage: "The workspace changed state; reload and try again.",
      details: { workspaceId, state: from },
    });
  }
  const now = new Date();
  const nextGeneration = from === "PURGED" && to === "PROVISIONING";
  const generation = nextGeneration ? current.generation + 1 : current.generation;
  // Leaving READY ends a metered period: its seconds go to the ledger in this transaction (exactly once).
  if (from === "READY" && to !== "READY")
    await accrueWorkspaceSeconds(tx, scope.tenantId, workspaceId, current.metering, now);
  await tx.workspace.update({
    where: { id: workspaceId },
    data: {
      state: to,
      generation,
      stateChangedAt: now,
      error: to === "FAILED" ? (extra.error ?? "unknown error") : null,
      // A provision claim (server/modules/machines/provision-claim.data.ts) holds within one PROVISIONING
      // period: cleared by every change, unless this one enters PROVISIONING with its claim taken at once.
      provisionHolder: to === "PROVISIONING" ? (extra.provisionClaim?.holder ?? null) : null,
      provisionHeldUntil: to === "PROVISIONING" ? (extra.provisionClaim?.heldUntil ?? null) : null,
      ...(extra.backendHandle !== undefined
        ? {
            backendHandle:
              extra.backendHandle === null ? Prisma.DbNull : (extra.backendHandle as Prisma.InputJsonValue),
          }
        : {}),
      ...(to === "READY"
        ? { lastActivityAt: now, meteredAt: now, meteredSize: extra.meteredSize ?? "default" }
        : { meteredAt: null }),
    },
  });
  await insertEvent(tx, scope, workspaceId, EVENT_FOR[to], reason, {
    from,
    to,
    generation,
    ...(nextGeneration ? { previousGeneration: current.generation } : {}),
    ...(extra.error ? { error: extra.error } : {}),
    ...data,
  });
  return generation;
}

async function insertEvent(
  tx: Prisma.TransactionClient,
  scope: TenantScope,
  workspaceId: string,
  kind: Prisma.WorkspaceEventCreateManyInput["kind"],
  reason: string | null,
  data: Record<string, unknown>,
): Promise<void> {
  await tx.workspaceEvent.create({
    data: {
      tenantId: scope.tenantId,
      workspaceId,
      kind,
      reason,
      actor: actorLabel(scope),
      data: data as Prisma.InputJsonValue,
    },
    select: { id: true },
  });
}

function notFound(workspaceId: string): AppError {
  return new AppError("NOT_FOUND", `workspace ${workspaceId} not found`, {
    userMessage: "Workspace not found.",
  });
}
