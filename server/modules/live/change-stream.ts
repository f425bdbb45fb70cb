import type { Db } from "@/server/db";
import { roleCan } from "@/server/auth/policy";
import { isRoleAtLeast } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { mayListWorkspace } from "@/server/modules/workspace/workspace-access";
import type { ChangeFeed, ChangeTopic, TenantChange } from "./change-feed";

/** The first event of every stream (and of every reconnection): the page refetches what it may have missed. */
export type LiveEvent = TenantChange | { topic: "ready" };

/** Changes waiting for a slow reader; past this the oldest are dropped (the page refetches all anyway). */
const MAX_PENDING = 500;

/**
 * Whether the scope may hear of a change: what it may list, as the page's own queries decide. Viewers and
 * up read workspaces, sessions and members; members hear only of the workspaces of their own sessions; the
 * jobs page and invitations are for admins.
 */
async function mayHearOf(scope: TenantScope, change: TenantChange, db: Db): Promise<boolean> {
  switch (change.topic) {
    case "workspace":
      if (!roleCan(scope.role, "workspace:read")) return false;
      return mayListWorkspace(scope, { id: change.id, userId: change.userId ?? null }, db);
    case "job":
      return isRoleAtLeast(scope.role, "admin");
    case "invitation":
      return roleCan(scope.role, "member:manage");
    case "member":
      return roleCan(scope.role, "member:read");
    case "session":
      return roleCan(scope.role, "session:read");
  }
}

/**
 * The tenant's changes for one listener, in order, from the moment Redis confirmed the subscription: a
 * `ready` event first, then each change of `topics` the listener may hear of, until `signal` aborts.
 * `currentScope` is asked again for every change (a role changed or a member removed mid-stream counts
 * from the next change on; it throws to end the stream).
 */
export async function* tenantChangeStream(
  feed: ChangeFeed,
  options: {
    /** The process' database client (the Berth root's): who may hear of a workspace is read from it. */
    db: Db;
    tenantId: string;
    topics: readonly ChangeTopic[] | undefined;
    signal: AbortSignal | undefined;
    currentScope: (change: TenantChange) => Promise<TenantScope>;
  },
): AsyncGenerator<LiveEvent, void, undefined> {
  const pending: TenantChange[] = [];
  let wake: (() => void) | null = null;
  const topics = options.topics ? new Set(options.topics) : null;
  const stop = await feed.listen(options.tenantId, (change) => {
    if (topics && !topics.has(change.topic) && change.topic !== "member") return;
    if (pending.length >= MAX_PENDING) pending.shift();
    pending.push(change);
    wake?.();
  });
  const onAbort = () => wake?.();
  options.signal?.addEventListener("abort", onAbort);
  try {
    yield { topic: "ready" };
    while (!options.signal?.aborted) {
      const change = pending.shift();
      if (!change) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
        continue;
      }
      const scope = await options.currentScope(change);
      if (topics && !topics.has(change.topic)) continue;
      if (await mayHearOf(scope, change, options.db)) yield change;
    }
  } finally {
    options.signal?.removeEventListener("abort", onAbort);
    stop();
  }
}
