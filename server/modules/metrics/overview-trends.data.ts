import type { DbClient } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";

/** The Overview's trend charts and getting-started checklist: reads across the tenant's own tables. */

/** The state each ledger event leaves a workspace in (events that change no state are not listed). */
const STATE_AFTER: Record<string, string> = {
  created: "PENDING",
  provisioning: "PROVISIONING",
  provisioned: "READY",
  stopping: "STOPPING",
  stopped: "STOPPED",
  purging: "PURGING",
  purged: "PURGED",
  failed: "FAILED",
};

export type StateCount = { at: Date; state: string; count: number };

/**
 * How many of the tenant's workspaces were in each state at the end of every hour from `from` on, replayed
 * from the workspace event ledger (each workspace's last state-changing event before the hour's end).
 * Only non-zero counts come back; the service fills the gaps.
 */
export async function workspaceStateCounts(
  scope: TenantScope,
  from: Date,
  hours: number,
  db: DbClient,
): Promise<StateCount[]> {
  const kinds = Object.keys(STATE_AFTER);
  const rows = await db.$queryRaw<{ bucket: Date; kind: string; count: bigint }[]>`
    WITH buckets AS (
      SELECT ${from}::timestamptz + make_interval(hours => n) AS bucket
        FROM generate_series(0, ${hours - 1}::int) AS n
    )
    SELECT b.bucket, last.kind, count(*) AS count
      FROM buckets b
      CROSS JOIN LATERAL (
        SELECT DISTINCT ON (e.workspace_id) e.kind::text AS kind
          FROM workspace_events e
         WHERE e.tenant_id = ${scope.tenantId}
           AND e.kind::text = ANY(${kinds})
           AND e.at < b.bucket + interval '1 hour'
         ORDER BY e.workspace_id, e.at DESC, e.id DESC
      ) last
     GROUP BY 1, 2 ORDER BY 1`;
  return rows.map((row) => ({ at: row.bucket, state: STATE_AFTER[row.kind]!, count: Number(row.count) }));
}

export type TurnOutcomeBucket = { at: Date; failed: number; interrupted: number };

/** The tenant's failed and interrupted chat turns per UTC day since `from` (days with any only). */
export async function failedTurnCounts(
  scope: TenantScope,
  from: Date,
  db: DbClient,
): Promise<TurnOutcomeBucket[]> {
  const rows = await db.$queryRaw<{ bucket: Date; failed: bigint; interrupted: bigint }[]>`
    SELECT date_trunc('day', started_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS bucket,
           count(*) FILTER (WHERE status = 'FAILED') AS failed,
           count(*) FILTER (WHERE status = 'INTERRUPTED') AS interrupted
      FROM chat_turns
     WHERE tenant_id = ${scope.tenantId} AND started_at >= ${from}
       AND status IN ('FAILED', 'INTERRUPTED')
     GROUP BY 1 ORDER BY 1`;
  return rows.map((row) => ({
    at: row.bucket,
    failed: Number(row.failed),
    interrupted: Number(row.interrupted),
  }));
}

export type GettingStartedFacts = {
  agents: number;
  agentsWithKey: number;
  completedTurns: number;
  sessions: number;
  userMessages: number;
  members: number;
  invitations: number;
};

/** What the tenant has done so far, each an existence count capped at 1 (the checklist needs no more). */
export async function gettingStartedFacts(scope: TenantScope, db: DbClient): Promise<GettingStartedFacts> {
  const tenantId = scope.tenantId;
  const one = { tenantId };
  const [agents, agentsWithKey, completedTurns, sessions, userMessages, members, invitations, links] =
    await Promise.all([
      db.agent.count({ where: one, take: 1 }),
      db.agent.count({ where: { tenantId, modelApiKeyEncrypted: { not: null } }, take: 1 }),
      db.chatTurn.count({ where: { tenantId, status: "COMPLETED" }, take: 1 }),
      db.session.count({ where: one, take: 1 }),
      db.chatMessage.count({ where: { tenantId, role: "user" }, take: 1 }),
      db.membership.count({ where: one, take: 2 }),
      db.invitation.count({ where: one, take: 1 }),
      db.inviteLink.count({ where: one, take: 1 }),
    ]);
  return {
    agents,
    agentsWithKey,
    completedTurns,
    sessions,
    userMessages,
    members,
    invitations: invitations + links,
  };
}
