import { Prisma } from "@/generated/prisma/client";
import type { Db, DbClient } from "@/server/db";

/** A machine's handle as its driver returned it (JSON). */
type BackendHandle = Record<string, unknown>;

/** An idle machine as a claim took it. */
export type ClaimedWarmMachine = { id: string; handle: BackendHandle };

/**
 * Takes the oldest IDLE machine of the pool (kind, key) for `workspaceId`, or null when there is none.
 * One statement, `FOR UPDATE SKIP LOCKED`: any number of provisions in any number of workers claim at once,
 * each a different machine, none waiting for another's row.
 */
export async function claimIdleMachine(
  backendKind: string,
  poolKey: string,
  workspaceId: string,
  db: DbClient,
): Promise<ClaimedWarmMachine | null> {
  const rows = await db.$queryRaw<{ id: string; handle: BackendHandle }[]>(Prisma.sql`
    UPDATE warm_machines SET state = 'CLAIMED', workspace_id = ${workspaceId}, claimed_at = now()
    WHERE id = (
      SELECT id FROM warm_machines
      WHERE backend_kind = ${backendKind} AND pool_key = ${poolKey} AND state = 'IDLE'
      ORDER BY ready_at
      LIMIT 1
      FOR UPDATE SKIP LOCKED
    )
    RETURNING id, handle`);
  const row = rows[0];
  return row ? { id: row.id, handle: row.handle } : null;
}

/**
 * `claimIdleMachine` in a transaction with `admit`, run once a machine is claimed: should it throw, the claim
 * rolls back and the machine stays IDLE for another claim. Null: the pool is empty (`admit` never ran).
 */
export async function claimIdleMachineAdmitted<T>(
  backendKind: string,
  poolKey: string,
  workspaceId: string,
  admit: () => Promise<T>,
  db: Db,
): Promise<{ machine: ClaimedWarmMachine; admitted: T } | null> {
  return db.$transaction(async (tx) => {
    const machine = await claimIdleMachine(backendKind, poolKey, workspaceId, tx);
    return machine ? { machine, admitted: await admit() } : null;
  });
}

/** The claim is over (the machine is the workspace's now, or discarded): the row goes. */
export async function deleteWarmMachine(id: string, db: DbClient): Promise<void> {
  await db.warmMachine.deleteMany({ where: { id } });
}

/**
 * Reserves the shortfall of the pool (kind, key) below `target`: inserts one CREATING row per machine to
 * make and returns their ids. Counted and inserted under a transaction-scoped advisory lock per pool, so
 * two refills running at once (a scheduled tick and one a claim asked for) never both fill the same gap.
 */
export async function reserveWarmMachines(
  backendKind: string,
  poolKey: string,
  target: number,
  newId: () => string,
  db: Db,
): Promise<string[]> {
  return db.$transaction(async (tx) => {
    await tx.$executeRaw(Prisma.sql`SELECT pg_advisory_xact_lock(hashtext(${`warm-pool:${backendKind}`}))`);
    const live = await tx.warmMachine.count({
      where: { backendKind, poolKey, state: { in: ["IDLE", "CREATING"] } },
    });
    const ids = Array.from({ length: Math.max(target - live, 0) }, newId);
    if (ids.length > 0)
      await tx.warmMachine.createMany({
        data: ids.map((id) => ({ id, backendKind, poolKey, state: "CREATING" as const })),
      });
    return ids;
  });
}

export async function warmMachineExists(id: string, db: DbClient): Promise<boolean> {
  return (await db.warmMachine.count({ where: { id } })) > 0;
}

/** The machine is made: claimable from now on. */
export async function markMachineIdle(id: string, handle: BackendHandle, db: DbClient): Promise<void> {
  await db.warmMachine.update({
    where: { id },
    data: { state: "IDLE", handle: handle as Prisma.InputJsonValue, readyAt: new Date() },
  });
}

export type WarmMachineRow = {
  id: string;
  state: "CREATING" | "IDLE" | "CLAIMED";
  poolKey: string;
  handle: BackendHandle | null;
  createdAt: Date;
  claimedAt: Date | null;
};

/** Every row of one driver kind's pool, oldest first. */
export async function listWarmMachines(backendKind: string, db: DbClient): Promise<WarmMachineRow[]> {
  const rows = await db.warmMachine.findMany({
    where: { backendKind },
    orderBy: { createdAt: "asc" },
    select: { id: true, state: true, poolKey: true, handle: true, createdAt: true, claimedAt: true },
  });
  return rows.map((row) => ({ ...row, handle: row.handle as BackendHandle | null }));
}

/**
 * Removes the IDLE row `id` unless a claim took it meanwhile: true when this caller may discard the
 * machine (a shrink or a stale key), false when a provision owns it now.
 */
export async function takeIdleForDiscard(id: string, db: DbClient): Promise<boolean> {
  const { count } = await db.warmMachine.deleteMany({ where: { id, state: "IDLE" } });
  return count === 1;
}

/** One first use of a pooled backend: served by the pool or not (the demand the refill follows). */
export async function recordPoolUse(backendKind: string, hit: boolean, db: DbClient): Promise<void> {
  await db.warmPoolUse.create({ data: { backendKind, hit } });
}

/**
 * The busiest minute of first uses of `backendKind` since `since` (hits and misses alike: a miss is demand
 * the pool did not meet), and the rows before `since` deleted.
 */
export async function peakUsesPerMinute(backendKind: string, since: Date, db: DbClient): Promise<number> {
  await db.warmPoolUse.deleteMany({ where: { backendKind, at: { lt: since } } });
  return busiestMinute(backendKind, since, db);
}

async function busiestMinute(backendKind: string, since: Date, db: DbClient): Promise<number> {
  const rows = await db.$queryRaw<{ peak: number | null }[]>(Prisma.sql`
    SELECT max(n)::int AS peak FROM (
      SELECT count(*) AS n FROM warm_pool_uses
      WHERE backend_kind = ${backendKind} AND at >= ${since}
      GROUP BY date_trunc('minute', at)
    ) per_minute`);
  return rows[0]?.peak ?? 0;
}

/** One pool's figures now: machines by state, first uses since `since`, and the p50 of their claim. */
export type WarmPoolFigures = {
  machines: Record<"CREATING" | "IDLE" | "CLAIMED", number>;
  hits: number;
  misses: number;
  peakPerMinute: number;
  /** Median of the `machine` stage (claim and bind) of warm provisions since `since`; null: none. */
  claimP50Ms: number | null;
};

export async function readWarmPoolFigures(
  backendKind: string,
  since: Date,
  db: DbClient,
): Promise<WarmPoolFigures> {
  const machines = { CREATING: 0, IDLE: 0, CLAIMED: 0 };
  const byState = await db.warmMachine.groupBy({
    by: ["state"],
    where: { backendKind },
    _count: { _all: true },
  });
  for (const row of byState) machines[row.state] = row._count._all;
  const uses = await db.warmPoolUse.groupBy({
    by: ["hit"],
    where: { backendKind, at: { gte: since } },
    _count: { _all: true },
  });
  const [claim] = await db.$queryRaw<{ p50: number | null }[]>(Prisma.sql`
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms)::float8 AS p50 FROM stage_samples
    WHERE kind = 'provision' AND path = 'warm' AND stage = 'machine' AND backend = ${backendKind}
      AND at >= ${since}`);
  return {
    machines,
    hits: uses.find((row) => row.hit)?._count._all ?? 0,
    misses: uses.find((row) => !row.hit)?._count._all ?? 0,
    peakPerMinute: await busiestMinute(backendKind, since, db),
    claimP50Ms: claim?.p50 ?? null,
  };
}
