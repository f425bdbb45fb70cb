import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { Logger } from "@/server/logger";
import { effectiveIdleTtlMs } from "@/server/modules/tenant/tenant-policy";
import { listTenantIdleTtlsBelow } from "@/server/modules/tenant/tenant-policy.data";
import { findSweepCandidates, stopIfIdle } from "@/server/modules/workspace/workspace-lifecycle.data";
import type { WorkspaceJobDeps } from "./machine-jobs.service";

/**
 * `workspace.sweep` (a repeating job scheduler): each READY workspace idle past its TTL (the tenant's
 * `workspaceIdleTtlMs` when shorter than the installation's, else the installation's) and holding no lease
 * (leases older than the hard maximum do not count) goes to STOPPING under a row lock and gets its own
 * `workspace.stop` job. Leased workspaces are skipped and reported.
 */
export async function sweepIdleWorkspaces(
  deps: WorkspaceJobDeps,
  log: Logger,
  now = new Date(),
): Promise<{ stopping: string[]; leased: string[]; skipped: number }> {
  const { db } = deps;
  const installationTtlMs = deps.config.idleTtlMs;
  const idleBefore = new Date(now.getTime() - installationTtlMs);
  // A tenant's own idle TTL counts when it is shorter (the installation's is the maximum): min(tenant, installation).
  const tenantTtls = new Map(
    (await listTenantIdleTtlsBelow(installationTtlMs, deps.db)).map((row) => [row.tenantId, row.idleTtlMs]),
  );
  const tenantIdleBefore = [...tenantTtls].map(([tenantId, ttlMs]) => ({
    tenantId,
    idleBefore: new Date(now.getTime() - ttlMs),
  }));
  const leaseBornAfter = new Date(now.getTime() - deps.config.maxLeaseMs);
  const stopping: string[] = [];
  const leased: string[] = [];
  let skipped = 0;
  for (const candidate of await findSweepCandidates({ idleBefore, tenantIdleBefore, limit: 500 }, db)) {
    const scope = await resolveSystemTenantScope(candidate.tenantId, { allowSuspended: true }, db);
    const tenantTtlMs = tenantTtls.get(candidate.tenantId);
    const ttlMs = effectiveIdleTtlMs(tenantTtlMs ?? null, installationTtlMs);
    const reason =
      `idle for more than ${Math.round(ttlMs / 1000)} s` +
      (tenantTtlMs === undefined ? "" : " (tenant setting)");
    const decision = await stopIfIdle(
      scope,
      candidate.id,
      {
        idleBefore: new Date(now.getTime() - ttlMs),
        leaseBornAfter,
        reason,
      },
      db,
    );
    if (decision.outcome === "stopping") {
      stopping.push(candidate.id);
      await deps.requestStop({ tenantId: candidate.tenantId, workspaceId: candidate.id, reason });
    } else if (decision.outcome === "leased") {
      leased.push(candidate.id);
    } else {
      skipped++;
    }
  }
  if (stopping.length > 0 || leased.length > 0) log.info({ stopping, leased }, "workspace sweep");
  return { stopping, leased, skipped };
}
