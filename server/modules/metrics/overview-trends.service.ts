import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { failedTurnCounts, gettingStartedFacts, workspaceStateCounts } from "./overview-trends.data";
import type { Db } from "@/server/db";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const HOURS = 24;
const DAYS = 14;

/** The states the chart shows (STOPPING counts as stopped, PENDING as provisioning, PURGING as purged). */
type Shown = "ready" | "provisioning" | "stopped" | "failed" | "purged";
const SHOWN_AS: Record<string, Shown> = {
  PENDING: "provisioning",
  PROVISIONING: "provisioning",
  READY: "ready",
  STOPPING: "stopped",
  STOPPED: "stopped",
  PURGING: "purged",
  PURGED: "purged",
  FAILED: "failed",
};

const ZStateBucket = z.object({
  at: z.date(),
  ready: z.number().int(),
  provisioning: z.number().int(),
  stopped: z.number().int(),
  failed: z.number().int(),
  purged: z.number().int(),
});
export const ZOverviewTrends = z.object({
  /** Workspaces in each state at the end of each hour, last 24 hours (UTC); the last bucket is now. */
  workspaceStates: z.array(ZStateBucket),
  /** Failed and interrupted chat turns per UTC day, last 14 days, zero-filled. */
  failedTurns: z.array(z.object({ at: z.date(), failed: z.number().int(), interrupted: z.number().int() })),
});

/** The Overview's trend charts: workspaces by state over time and failed turns per day. */
export async function overviewTrends(
  scope: TenantScope,
  now = Date.now(),
  db: Db,
): Promise<z.output<typeof ZOverviewTrends>> {
  assertCan(scope, "tenant:read");
  const lastHour = Math.floor(now / HOUR) * HOUR;
  const lastDay = Math.floor(now / DAY) * DAY;
  const [states, turns] = await Promise.all([
    workspaceStateCounts(scope, new Date(lastHour - (HOURS - 1) * HOUR), HOURS, db),
    failedTurnCounts(scope, new Date(lastDay - (DAYS - 1) * DAY), db),
  ]);
  const byHour = new Map<number, z.output<typeof ZStateBucket>>();
  for (let index = 0; index < HOURS; index++) {
    const at = lastHour - (HOURS - 1 - index) * HOUR;
    byHour.set(at, { at: new Date(at), ready: 0, provisioning: 0, stopped: 0, failed: 0, purged: 0 });
  }
  for (const row of states) {
    const bucket = byHour.get(row.at.getTime());
    const shown = SHOWN_AS[row.state];
    if (bucket && shown) bucket[shown] += row.count;
  }
  const byDay = new Map(turns.map((row) => [row.at.getTime(), row]));
  return {
    workspaceStates: [...byHour.values()],
    failedTurns: Array.from({ length: DAYS }, (_, index) => {
      const at = lastDay - (DAYS - 1 - index) * DAY;
      return byDay.get(at) ?? { at: new Date(at), failed: 0, interrupted: 0 };
    }),
  };
}

const STEPS = ["agent", "model", "session", "message", "teammate"] as const;
export const ZGettingStarted = z.object({
  /** Every step done: the Overview hides the checklist. */
  complete: z.boolean(),
  steps: z.array(z.object({ id: z.enum(STEPS), done: z.boolean() })),
});

/**
 * The getting-started checklist, each step checked from the tenant's data: an agent exists; a model is
 * connected (an agent holds a model key, or a turn completed, which a keyless local model also shows); a
 * session exists; a user message was sent; someone else was invited or joined.
 */
export async function gettingStarted(scope: TenantScope, db: Db): Promise<z.output<typeof ZGettingStarted>> {
  assertCan(scope, "tenant:read");
  const facts = await gettingStartedFacts(scope, db);
  const done: Record<(typeof STEPS)[number], boolean> = {
    agent: facts.agents > 0,
    model: facts.agentsWithKey > 0 || facts.completedTurns > 0,
    session: facts.sessions > 0,
    message: facts.userMessages > 0,
    teammate: facts.members > 1 || facts.invitations > 0,
  };
  const steps = STEPS.map((id) => ({ id, done: done[id] }));
  return { complete: steps.every((step) => step.done), steps };
}
