import { Cluster, Redis, type RedisOptions } from "ioredis";
import { parseRedisTopology, type RedisConfig } from "@/server/config/redis";
import { processRoot } from "@/server/shared/process-root";

/**
 * - `producer`: API-side commands (enqueue, audit buffer, health). Commands issued before the first
 *   connect are queued (a fresh process must not fail its first request), but `maxRetriesPerRequest: 2`
 *   makes a request fail within about a second while Redis is down instead of hanging until its HTTP
 *   timeout.
 * - `worker`: BullMQ Workers and QueueEvents, which block on Redis; BullMQ requires
 *   `maxRetriesPerRequest: null` so a blocking command is never cut short by ioredis.
 */
export type RedisRole = "producer" | "worker";

export function createRedisConnection(config: RedisConfig, role: RedisRole, name = `berth-${role}`): Redis {
  const options: RedisOptions =
    role === "worker"
      ? { maxRetriesPerRequest: null, connectionName: name }
      : { maxRetriesPerRequest: 2, connectionName: name };
  const redis = openTopology(config.url, options);
  // Without a listener ioredis prints every reconnect error as an unhandled 'error' event.
  redis.on("error", () => undefined);
  return redis;
}

/**
 * One server, a Sentinel-watched master or a Cluster (see parseRedisTopology). A Cluster is returned typed
 * as `Redis`: both are ioredis Commanders with the same command methods, BullMQ recognises a Cluster itself
 * (`isCluster`), and on a Cluster every Berth key shares the `{prefix}` hash tag, so the single-node
 * commands Berth sends (multi-key Lua scripts, MULTI, pipelines) stay valid there.
 */
function openTopology(url: string, options: RedisOptions): Redis {
  const topology = parseRedisTopology(url);
  if (topology.kind === "single") return new Redis(url, options);
  const tls = topology.tls ? { tls: {} } : {};
  if (topology.kind === "sentinel") {
    return new Redis({
      ...options,
      ...topology.auth,
      ...tls,
      sentinels: topology.sentinels.map((node) => ({ ...node })),
      name: topology.masterName,
      ...(topology.tls ? { enableTLSForSentinelMode: true } : {}),
    });
  }
  const cluster = new Cluster(
    topology.nodes.map((node) => ({ ...node })),
    // Sharded pub/sub (see publishMessage); its per-node subscriber connections open only when used.
    { redisOptions: { ...options, ...topology.auth, ...tls }, shardedSubscribers: true },
  );
  return cluster as unknown as Redis;
}

/**
 * Pub/sub that also holds on a Cluster. There a PUBLISH reaches every node but counts only the subscribers of
 * the node it was sent to, and Berth reads that count (a terminal relay link nobody listens to is lost; a
 * cancel nobody received is reported). Sharded pub/sub (Redis 7: SPUBLISH, SSUBSCRIBE) routes a channel to
 * the node of its slot, where the count is exact; Berth's channels carry the `{prefix}` hash tag.
 */
export function publishMessage(redis: Redis, channel: string, message: string): Promise<number> {
  return redis.isCluster
    ? (redis.spublish(channel, message) as Promise<number>)
    : redis.publish(channel, message);
}

export function subscribeChannel(subscriber: Redis, channel: string): Promise<unknown> {
  return subscriber.isCluster ? subscriber.ssubscribe(channel) : subscriber.subscribe(channel);
}

export function unsubscribeChannel(subscriber: Redis, channel: string): Promise<unknown> {
  return subscriber.isCluster ? subscriber.sunsubscribe(channel) : subscriber.unsubscribe(channel);
}

/** Listens to what subscribeChannel subscribed (`message` on one server, `smessage` on a Cluster). */
export function onChannelMessage(
  subscriber: Redis,
  listener: (channel: Buffer, payload: Buffer) => void,
): () => void {
  const event = subscriber.isCluster ? "smessageBuffer" : "messageBuffer";
  subscriber.on(event, listener);
  return () => void subscriber.off(event, listener);
}

/** Namespaces a Berth key under the configured prefix: `redisKey("berth", "audit", "buffer")`. */
export function redisKey(prefix: string, ...parts: string[]): string {
  return [prefix, ...parts].join(":");
}

/** The process root's producer connection, for tests and bench/ only: server code is handed the root's. */
export function getRedis(): Redis {
  return processRoot<{ redis: Redis }>().redis;
}
