import type { Redis } from "ioredis";
import { z } from "zod";
import type { Logger } from "@/server/logger";
import { onChannelMessage, publishMessage, subscribeChannel, unsubscribeChannel } from "@/server/redis";
import { peekProcessRoot } from "@/server/shared/process-root";

/**
 * The tenant change feed: what makes the dashboard live. A service that changes something a page shows (a
 * workspace's state, a job, a member or invitation, a session) announces it with `announceChange`; the
 * announcement is one Redis PUBLISH on `<prefix>:changes:<tenantId>`, so every API replica hears it whichever
 * process (API or worker) made the change. Each replica holds one subscriber connection and subscribes to a
 * tenant's channel while one of its pages listens (`live.changes`, server/api/routers/live.router.ts), which
 * filters by the listener's role and streams the change to the browser over SSE; the page then refetches.
 *
 * A change names WHAT changed, never its content: the page reads the content through its ordinary (policy
 * checked) queries. Pub/sub loses what a disconnected replica misses, so a page refetches on every
 * (re)connect as well (the `ready` event).
 */
export const CHANGE_TOPICS = ["workspace", "job", "member", "invitation", "session"] as const;
export const ZChangeTopic = z.enum(CHANGE_TOPICS);
export type ChangeTopic = z.output<typeof ZChangeTopic>;

const ZTenantChange = z.discriminatedUnion("topic", [
  z.object({
    topic: z.literal("workspace"),
    id: z.string(),
    state: z.string().optional(),
    /** The user the workspace was derived for: members are told only of workspaces they may list. */
    userId: z.string().nullable().optional(),
  }),
  z.object({ topic: z.literal("job"), id: z.string(), name: z.string(), state: z.string() }),
  z.object({ topic: z.literal("member"), userId: z.string().optional() }),
  z.object({ topic: z.literal("invitation") }),
  z.object({ topic: z.literal("session"), id: z.string(), userId: z.string().nullable().optional() }),
]);
export type TenantChange = z.output<typeof ZTenantChange>;

type Listener = (change: TenantChange) => void;

type ChangeFeedOptions = {
  /** Commands (PUBLISH). */
  redis: Redis;
  /** A dedicated connection, opened on first listen (once subscribed, ioredis allows only (un)subscribe). */
  subscriber: () => Redis;
  prefix: string;
  /** Where a failed publish is reported (the root's logger). */
  log: Pick<Logger, "warn">;
};

export function createChangeFeed(options: ChangeFeedOptions) {
  const channelOf = (tenantId: string) => `${options.prefix}:changes:${tenantId}`;
  const listeners = new Map<string, Set<Listener>>();
  let subscriber: Redis | null = null;

  const connection = (): Redis => {
    if (subscriber) return subscriber;
    const opened = (subscriber = options.subscriber());
    onChannelMessage(opened, (channel, payload) => {
      const tenantListeners = listeners.get(channel.toString("utf8"));
      if (!tenantListeners) return;
      const parsed = ZTenantChange.safeParse(safeJson(payload.toString("utf8")));
      if (!parsed.success) return;
      for (const listener of tenantListeners) listener(parsed.data);
    });
    return opened;
  };

  return {
    /** Fire and forget: a change feed that cannot publish costs a page a refresh, never the operation. */
    publish(tenantId: string, change: TenantChange): void {
      void publishMessage(options.redis, channelOf(tenantId), JSON.stringify(change)).catch(
        (error: unknown) =>
          options.log.warn({ err: error, tenantId, topic: change.topic }, "could not publish a change"),
      );
    },

    /**
     * Calls `listener` with every change of the tenant until the returned function is called. Resolves once
     * Redis confirmed the subscription, so a change published after it is never missed.
     */
    async listen(tenantId: string, listener: Listener): Promise<() => void> {
      const channel = channelOf(tenantId);
      let set = listeners.get(channel);
      if (!set) {
        set = new Set();
        listeners.set(channel, set);
      }
      set.add(listener);
      const stop = () => {
        const current = listeners.get(channel);
        current?.delete(listener);
        if (current?.size === 0) {
          listeners.delete(channel);
          if (subscriber) void unsubscribeChannel(subscriber, channel).catch(() => undefined);
        }
      };
      try {
        // Also for a second listener: SUBSCRIBE is idempotent, and its reply says the channel is live.
        await subscribeChannel(connection(), channel);
      } catch (error) {
        stop();
        throw error;
      }
      return stop;
    },

    async close(): Promise<void> {
      listeners.clear();
      const opened = subscriber;
      subscriber = null;
      if (opened) await opened.quit().catch(() => opened.disconnect());
    },
  };
}

export type ChangeFeed = ReturnType<typeof createChangeFeed>;

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** The process root's feed, if it built one (server/composition/berth.ts); never builds it. */
export function builtChangeFeed(): ChangeFeed | undefined {
  return peekProcessRoot<{ builtChangeFeed(): ChangeFeed | undefined }>()?.builtChangeFeed();
}

/**
 * Announces a change to the tenant's live pages on every replica. A process without a feed (a unit test, a
 * script) announces nothing.
 */
export function announceChange(tenantId: string, change: TenantChange): void {
  builtChangeFeed()?.publish(tenantId, change);
}
