import type { Db, DbClient } from "@/server/db";
import type { QuotaConfig, QuotaLimits } from "@/server/config/quotas";
import { monthSpend } from "@/server/modules/metering/budget.service";
import {
  admitHeldTurn,
  admitProvisionInWindow,
  admitWarmClaimInWindow,
  releaseHeldTurn,
  releaseWarmClaim,
  renewHeldTurn,
  withQuotaLock,
  type QuotaCounterDeps,
} from "./quota-counters";
import {
  countLiveWorkspaces,
  countTotalWorkspaces,
  getTenantQuota,
  lockTenantQuota,
  workspaceExists,
  type QuotaTx,
  type TenantQuotaRow,
} from "./quota.data";
import { quotaExceeded } from "./quota.types";

/**
 * Admission against the tenant's quotas, BEFORE any backend call. Row-counting quotas (live workspaces,
 * workspaces in total) are checked and acted on under the tenant's quota row lock in the same transaction
 * as the write that uses them; event quotas (concurrent turns, provisions per minute) are one Lua script
 * each (quota-counters.ts). Never check-then-act: the admission IS the write.
 */
export type QuotaDeps = QuotaCounterDeps & { config: QuotaConfig };

/** The installation's defaults with the tenant's overrides applied. */
export function effectiveLimits(row: TenantQuotaRow, defaults: QuotaLimits): QuotaLimits {
  const pick = <K extends keyof QuotaLimits>(key: K): number => row[key] ?? defaults[key];
  return {
    liveWorkspaces: pick("liveWorkspaces"),
    totalWorkspaces: pick("totalWorkspaces"),
    concurrentTurns: pick("concurrentTurns"),
    provisionsPerMinute: pick("provisionsPerMinute"),
    warmClaimsPerMinute: pick("warmClaimsPerMinute"),
    workspaceCpus: pick("workspaceCpus"),
    workspaceMemoryBytes: pick("workspaceMemoryBytes"),
    workspaceDiskBytes: pick("workspaceDiskBytes"),
    mcpServersPerScope: pick("mcpServersPerScope"),
    skillStorageBytes: pick("skillStorageBytes"),
  };
}

export async function tenantLimits(
  tenantId: string,
  deps: Pick<QuotaDeps, "config">,
  db: Db,
): Promise<QuotaLimits> {
  return effectiveLimits(await getTenantQuota(tenantId, db), deps.config.defaults);
}

/** The hard stop: QUOTA_EXCEEDED once this month's spend reached a budget that has `budgetHardStop`. */
async function assertWithinBudget(
  tenantId: string,
  deps: Pick<QuotaDeps, "config">,
  row: TenantQuotaRow | undefined,
  db: DbClient,
): Promise<void> {
  const quota = row ?? (await getTenantQuota(tenantId, db));
  if (quota.monthlyBudgetUnits === null || !quota.budgetHardStop) return;
  const spent = await monthSpend(tenantId, deps.config.rates, undefined, db);
  if (spent >= quota.monthlyBudgetUnits)
    throw quotaExceeded("monthlyBudgetUnits", quota.monthlyBudgetUnits, spent);
}

/** A turn's hold on one of the tenant's concurrent-turn slots; renew it while the turn runs. */
export type TurnAdmission = { renew(): Promise<void>; release(): Promise<void> };

const TURN_SLOT_TTL_MS = 2 * 60_000;

/** Admits a turn: within the budget, and one of `concurrentTurns` slots taken atomically. */
export async function admitTurn(
  tenantId: string,
  turnId: string,
  deps: QuotaDeps,
  db: Db,
): Promise<TurnAdmission> {
  const row = await getTenantQuota(tenantId, db);
  await assertWithinBudget(tenantId, deps, row, db);
  const limit = effectiveLimits(row, deps.config.defaults).concurrentTurns;
  const slot = await admitHeldTurn(deps, tenantId, turnId, limit, TURN_SLOT_TTL_MS);
  if (!slot.admitted) throw quotaExceeded("concurrentTurns", limit, slot.count);
  return {
    renew: () => renewHeldTurn(deps, tenantId, turnId, TURN_SLOT_TTL_MS),
    release: () => releaseHeldTurn(deps, tenantId, turnId),
  };
}

/** How often a running turn renews its slot (a crashed replica's slots lapse after TURN_SLOT_TTL_MS). */
export const TURN_SLOT_RENEW_MS = TURN_SLOT_TTL_MS / 3;

/**
 * Inside the transaction that creates a workspace record: takes the tenant's quota lock and refuses the
 * record past `totalWorkspaces`.
 */
export async function admitWorkspaceRecord(
  tx: QuotaTx,
  tenantId: string,
  workspaceId: string,
  deps: Pick<QuotaDeps, "config">,
): Promise<void> {
  const row = await lockTenantQuota(tx, tenantId);
  // A racing request for the same id inserted it while this one waited for the lock: nothing new.
  if (await workspaceExists(tx, workspaceId)) return;
  const limit = effectiveLimits(row, deps.config.defaults).totalWorkspaces;
  const used = await countTotalWorkspaces(tenantId, tx);
  if (used >= limit) throw quotaExceeded("totalWorkspaces", limit, used);
}

/**
 * The provision's admission, run inside the transition to PROVISIONING (under the tenant's quota lock, so
 * no two workers admit the same last slot): live workspaces, budget, and one provision of the minute.
 */
export function provisionAdmission(
  tenantId: string,
  workspaceId: string,
  deps: QuotaDeps,
): (tx: QuotaTx) => Promise<void> {
  return async (tx) => {
    const row = await lockTenantQuota(tx, tenantId);
    const limits = effectiveLimits(row, deps.config.defaults);
    const live = await countLiveWorkspaces(tenantId, { except: workspaceId }, tx);
    if (live >= limits.liveWorkspaces) throw quotaExceeded("liveWorkspaces", limits.liveWorkspaces, live);
    await assertWithinBudget(tenantId, deps, row, tx);
    const rate = await admitProvisionInWindow(deps, tenantId, limits.provisionsPerMinute, { consume: true });
    if (!rate.admitted) throw quotaExceeded("provisionsPerMinute", limits.provisionsPerMinute, rate.count);
  };
}

/**
 * The API side's check before it asks the workers for a provision, so a refusal is typed and immediate.
 * Not the admission (the worker's transition is): it only spares a job that would be refused.
 */
export async function precheckProvision(
  tenantId: string,
  workspaceId: string,
  deps: QuotaDeps,
  db: Db,
): Promise<void> {
  const row = await getTenantQuota(tenantId, db);
  const limits = effectiveLimits(row, deps.config.defaults);
  const live = await countLiveWorkspaces(tenantId, { except: workspaceId }, db);
  if (live >= limits.liveWorkspaces) throw quotaExceeded("liveWorkspaces", limits.liveWorkspaces, live);
  await assertWithinBudget(tenantId, deps, row, db);
  const rate = await admitProvisionInWindow(deps, tenantId, limits.provisionsPerMinute, { consume: false });
  if (!rate.admitted) throw quotaExceeded("provisionsPerMinute", limits.provisionsPerMinute, rate.count);
}

/** A warm pool machine counted against the tenant's `warmClaimsPerMinute`; `release` gives it back. */
export type WarmClaimAdmission = { release(): Promise<void> };

/**
 * Counts one warm pool machine in the tenant's sliding minute, or null when `limit` (the tenant's
 * `warmClaimsPerMinute`) is reached: the caller then creates the machine cold, never refuses the first use
 * (the pool is a speed-up, not an entitlement). Called once a machine is claimed, so an empty pool consumes
 * nothing; a claim that ends up binding nothing (its transaction rolled back, its bind failed) gives the
 * unit back with `release`. 0 is no limit, still counted, so the tenant's use shows.
 */
export async function admitWarmClaim(
  tenantId: string,
  limit: number,
  deps: QuotaCounterDeps,
): Promise<WarmClaimAdmission | null> {
  const member = crypto.randomUUID();
  const within = limit > 0 ? limit : Number.MAX_SAFE_INTEGER;
  const { admitted } = await admitWarmClaimInWindow(deps, tenantId, within, { consume: true, member });
  return admitted ? { release: () => releaseWarmClaim(deps, tenantId, member) } : null;
}

/**
 * A workspace's resource limits for the drivers (absent: the backend's own setting) and its size label, and
 * the tenant's limits they came from.
 */
export async function workspaceResources(
  tenantId: string,
  deps: Pick<QuotaDeps, "config">,
  db: Db,
): Promise<{
  resources: { cpus?: number; memoryBytes?: number; diskBytes?: number };
  size: string;
  limits: QuotaLimits;
}> {
  const limits = await tenantLimits(tenantId, deps, db);
  const resources = {
    ...(limits.workspaceCpus > 0 ? { cpus: limits.workspaceCpus } : {}),
    ...(limits.workspaceMemoryBytes > 0 ? { memoryBytes: limits.workspaceMemoryBytes } : {}),
    ...(limits.workspaceDiskBytes > 0 ? { diskBytes: limits.workspaceDiskBytes } : {}),
  };
  const parts = [
    resources.cpus !== undefined ? `${resources.cpus}cpu` : null,
    resources.memoryBytes !== undefined ? `${Math.round(resources.memoryBytes / 2 ** 20)}mib` : null,
    resources.diskBytes !== undefined ? `${Math.round(resources.diskBytes / 2 ** 30)}gib-disk` : null,
  ].filter(Boolean);
  return { resources, size: parts.length > 0 ? parts.join("-") : "default", limits };
}

/**
 * Adds an MCP server to a scope within `mcpServersPerScope`: counts the scope's declarations and adds
 * under one lock per workspace and scope, so two replicas never both add the last allowed one.
 */
export async function withinMcpQuota<T>(
  tenantId: string,
  key: { workspaceId: string; agentId: string; sessionId: string },
  count: () => Promise<number>,
  add: () => Promise<T>,
  deps: QuotaDeps,
  db: Db,
): Promise<T> {
  const limit = (await tenantLimits(tenantId, deps, db)).mcpServersPerScope;
  return withQuotaLock(deps, `mcp:${key.workspaceId}:${key.agentId}:${key.sessionId}`, async () => {
    const used = await count();
    if (used >= limit) throw quotaExceeded("mcpServersPerScope", limit, used);
    return add();
  });
}
