import type { Db } from "@/server/db";
import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { tokensPerDay, topAgentsByUsage } from "@/server/modules/metering/usage-activity.data";

export const ZUsageOverview = z.object({
  /** Input and output tokens per UTC day, the last 14 days (zero-filled), from the metering ledger. */
  tokensPerDay: z.array(z.object({ at: z.date(), input: z.number(), output: z.number() })),
  /** The agents that used the most tokens (then turns) in the last 7 days. */
  topAgents: z.array(
    z.object({
      agentId: z.string(),
      name: z.string().nullable(),
      turns: z.number(),
      tokens: z.number(),
    }),
  ),
});

const DAY = 86_400_000;
const DAYS = 14;
const TOP_AGENTS_DAYS = 7;
const TOP_AGENTS = 5;

/** The Overview's usage tiles: tokens per day and the top agents, read from `usage_records`. */
export async function tenantUsageOverview(
  scope: TenantScope,
  now = Date.now(),
  db: Db,
): Promise<z.output<typeof ZUsageOverview>> {
  assertCan(scope, "tenant:read");
  const today = Math.floor(now / DAY) * DAY;
  const [days, topAgents] = await Promise.all([
    tokensPerDay(scope, new Date(today - (DAYS - 1) * DAY), db),
    topAgentsByUsage(scope, new Date(now - TOP_AGENTS_DAYS * DAY), TOP_AGENTS, db),
  ]);
  const byDay = new Map(days.map((day) => [day.at.getTime(), day]));
  return {
    tokensPerDay: Array.from({ length: DAYS }, (_, index) => {
      const at = today - (DAYS - 1 - index) * DAY;
      return byDay.get(at) ?? { at: new Date(at), input: 0, output: 0 };
    }),
    topAgents,
  };
}
