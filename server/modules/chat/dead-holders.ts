import type { Db } from "@/server/db";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { Logger } from "@/server/logger";
import {
  listLeaseOwnersForSystem,
  releaseLeasesOfOwnersForSystem,
} from "@/server/modules/workspace/workspace.data";
import { interruptTurn, listRunningTurns } from "./chat-turn.data";
import type { Liveness } from "./turn-registry";

/**
 * Releases what a crashed process held, from any live process, within a heartbeat TTL or so: its running
 * turns are interrupted (the user's message and the marker stored, the session INTERRUPTED), and its
 * workspace leases (`turn:` and `call:`) are deleted with a `lease_released` event. A turn is dead when
 * its owner is known dead (the `holders` heartbeats), or when its claim's own heartbeat is older than the
 * turn TTL and its owner is not known alive (which holds even when Redis lost its data). A live owner
 * whose claim renewals lag (its connection pool saturated under load) still stores its turn's end: taking
 * the turn from it stored the turn twice, as interrupted and then as it ran. Every update is conditional,
 * so several processes reaping at once do no harm.
 */
export async function reapDeadHolders(deps: {
  /** The process' database client (the Berth root's). */
  db: Db;
  liveness: Liveness;
  turnTtlMs: number;
  /** Turns running in this process are never reaped here (their heartbeat may lag during an outage). */
  isRunningHere: (sessionId: string) => boolean;
  log: Logger;
}): Promise<{ interruptedTurns: number; releasedLeases: number }> {
  const { db } = deps;
  const turns = await listRunningTurns(undefined, db);
  const owners = new Set([...turns.map((turn) => turn.ownerId), ...(await listLeaseOwnersForSystem(db))]);
  owners.delete(deps.liveness.ownerId);
  const liveness = await deps.liveness.classify([...owners]).catch((error: unknown) => {
    deps.log.warn({ err: error }, "process liveness unknown; only stale turn claims are released");
    return { alive: [], dead: [] };
  });
  const dead = new Set(liveness.dead);
  const alive = new Set(liveness.alive);
  const staleBefore = Date.now() - deps.turnTtlMs;
  let interruptedTurns = 0;
  for (const turn of turns) {
    const mine = turn.ownerId === deps.liveness.ownerId;
    if (mine && deps.isRunningHere(turn.sessionId)) continue;
    const stale = turn.heartbeatAt.getTime() < staleBefore;
    // This process' own turn that no longer runs here (its end could not be stored) goes once stale.
    if (!dead.has(turn.ownerId) && !(stale && (mine || !alive.has(turn.ownerId)))) continue;
    const scope = await resolveSystemTenantScope(turn.tenantId, {}, db).catch(() => null);
    if (scope && (await interruptTurn(scope, turn.sessionId, turn.id, db))) {
      interruptedTurns += 1;
      deps.log.warn(
        { sessionId: turn.sessionId, turnId: turn.id, ownerId: turn.ownerId },
        "interrupted a chat turn whose process stopped",
      );
    }
  }
  const releasedLeases = await releaseLeasesOfOwnersForSystem(
    [...dead],
    "the process holding the lease stopped (no heartbeat)",
    db,
  );
  if (releasedLeases > 0) {
    deps.log.warn(
      { owners: [...dead], releasedLeases },
      "released the workspace leases of stopped processes",
    );
  }
  return { interruptedTurns, releasedLeases };
}

/** Runs `reapDeadHolders` every `intervalMs` (unref'd) until stopped; a failed pass is retried next time. */
export function startDeadHolderReaper(deps: Parameters<typeof reapDeadHolders>[0] & { intervalMs: number }): {
  stop(): void;
} {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    reapDeadHolders(deps)
      .catch((error: unknown) => deps.log.warn({ err: error }, "releasing dead holders failed"))
      .finally(() => (running = false));
  }, deps.intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
