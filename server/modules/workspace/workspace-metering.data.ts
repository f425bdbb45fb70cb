import { randomUUID } from "node:crypto";
import type { Prisma } from "@/generated/prisma/client";
import { type Db } from "@/server/db";
import { insertUsageRecordInTx } from "@/server/modules/metering/metering.data";

/**
 * Workspace-seconds: a READY period is metered from `metered_at` (set on → READY) to when it ends (any
 * transition out of READY, in that transition's transaction) and, for long-running workspaces, up to each
 * accrual tick (the sweep), which moves `metered_at` on under the row lock. Each second lands in the
 * ledger exactly once, whichever worker or replica does it.
 */
type MeteredRow = {
  meteredAt: Date | null;
  meteredSize: string | null;
  backendKind: string;
  agentId: string | null;
  userId: string | null;
};

export async function accrueWorkspaceSeconds(
  tx: Prisma.TransactionClient,
  tenantId: string,
  workspaceId: string,
  row: MeteredRow,
  now: Date,
): Promise<void> {
  if (!row.meteredAt) return;
  const seconds = (now.getTime() - row.meteredAt.getTime()) / 1000;
  if (seconds <= 0) return;
  await insertUsageRecordInTx(tx, {
    id: randomUUID(),
    tenantId,
    kind: "workspace_seconds",
    quantity: seconds,
    backend: row.backendKind,
    size: row.meteredSize ?? "default",
    agentId: row.agentId,
    sessionId: null,
    userId: row.userId,
    workspaceId,
    at: now,
  });
}

type RawMetered = {
  metered_at: Date | null;
  metered_size: string | null;
  backend_kind: string;
  agent_id: string | null;
  user_id: string | null;
  tenant_id: string;
};

/** Accrues READY workspaces metered up to before `before` (at most `limit`); returns how many. */
export async function accrueRunningWorkspaces(before: Date, limit: number, db: Db): Promise<number> {
  const due = await db.workspace.findMany({
    where: { state: "READY", meteredAt: { lt: before } },
    select: { id: true },
    orderBy: { meteredAt: "asc" },
    take: limit,
  });
  let accrued = 0;
  for (const { id } of due) {
    await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<RawMetered[]>`
        SELECT metered_at, metered_size, backend_kind::text, agent_id, user_id, tenant_id FROM workspaces
        WHERE id = ${id} AND state = 'READY' FOR UPDATE`;
      if (!row?.metered_at) return;
      const now = new Date();
      await accrueWorkspaceSeconds(
        tx,
        row.tenant_id,
        id,
        {
          meteredAt: row.metered_at,
          meteredSize: row.metered_size,
          backendKind: row.backend_kind,
          agentId: row.agent_id,
          userId: row.user_id,
        },
        now,
      );
      await tx.workspace.update({ where: { id }, data: { meteredAt: now } });
      accrued += 1;
    });
  }
  return accrued;
}
