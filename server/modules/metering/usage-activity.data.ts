import { type DbClient } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";

/** The ledger read for the Overview's pictures: tokens per day and the agents that used the most. */

export type TokenDay = { at: Date; input: number; output: number };

/** Input and output tokens of the tenant per UTC day since `from`; only days with usage come back. */
export async function tokensPerDay(scope: TenantScope, from: Date, db: DbClient): Promise<TokenDay[]> {
  // usage_records.at is a UTC timestamp without a zone: date_trunc on it is already a UTC day.
  const rows = await db.$queryRaw<{ day: Date; input: number | null; output: number | null }[]>`
    SELECT date_trunc('day', at) AS day,
           sum(quantity) FILTER (WHERE kind = 'input_tokens') AS input,
           sum(quantity) FILTER (WHERE kind = 'output_tokens') AS output
      FROM usage_records
     WHERE tenant_id = ${scope.tenantId} AND at >= ${from}
       AND kind IN ('input_tokens', 'output_tokens')
     GROUP BY 1 ORDER BY 1`;
  return rows.map((row) => ({ at: row.day, input: row.input ?? 0, output: row.output ?? 0 }));
}

export type AgentUsage = { agentId: string; name: string | null; turns: number; tokens: number };

/** The tenant's agents by tokens (then turns) since `from`, `limit` of them; a deleted agent has no name. */
export async function topAgentsByUsage(
  scope: TenantScope,
  from: Date,
  limit: number,
  db: DbClient,
): Promise<AgentUsage[]> {
  const rows = await db.$queryRaw<
    { agent_id: string; name: string | null; turns: number | null; tokens: number | null }[]
  >`
    SELECT u.agent_id, a.name,
           sum(u.quantity) FILTER (WHERE u.kind = 'turn') AS turns,
           sum(u.quantity) FILTER (WHERE u.kind IN ('input_tokens', 'output_tokens')) AS tokens
      FROM usage_records u
      LEFT JOIN agents a ON a.id = u.agent_id AND a.tenant_id = u.tenant_id
     WHERE u.tenant_id = ${scope.tenantId} AND u.at >= ${from} AND u.agent_id IS NOT NULL
       AND u.kind IN ('turn', 'input_tokens', 'output_tokens')
     GROUP BY u.agent_id, a.name
     ORDER BY tokens DESC NULLS LAST, turns DESC NULLS LAST, u.agent_id
     LIMIT ${limit}`;
  return rows.map((row) => ({
    agentId: row.agent_id,
    name: row.name,
    turns: row.turns ?? 0,
    tokens: row.tokens ?? 0,
  }));
}
