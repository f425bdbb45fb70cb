import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

/**
 * Where Berth's Redis is, as REDIS_URL spells it:
 * - `redis://[user:pass@]host:port[/db]` (or `rediss://`): one server, the default.
 * - `redis+cluster://[user:pass@]host:port,host:port` (or `rediss+cluster://`): a Redis Cluster, reached
 *   through any of the seed nodes.
 * - `redis+sentinel://[user:pass@]host:port,host:port/<master name>` (or `rediss+sentinel://`): the master
 *   that these Sentinels name; `user:pass` is the master's (Sentinels are asked without credentials).
 */
type RedisNode = { readonly host: string; readonly port: number };
export type RedisTopology =
  | { readonly kind: "single"; readonly url: string }
  | { readonly kind: "cluster"; readonly nodes: RedisNode[]; readonly auth: RedisAuth; readonly tls: boolean }
  | {
      readonly kind: "sentinel";
      readonly sentinels: RedisNode[];
      readonly masterName: string;
      readonly auth: RedisAuth;
      readonly tls: boolean;
    };
type RedisAuth = { readonly username?: string; readonly password?: string };

const MULTI_NODE_URL = /^(rediss?)\+(cluster|sentinel):\/\/(?:([^@/]*)@)?([^/?#@]+)(?:\/([^/?#]*))?$/;
const NODE = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/;

/** Reads REDIS_URL into a topology; throws an Error whose message says what is wrong (zod reports it). */
export function parseRedisTopology(url: string): RedisTopology {
  if (/^rediss?:\/\//.test(url)) return { kind: "single", url };
  const match = MULTI_NODE_URL.exec(url);
  if (!match) {
    throw new Error(
      "must be redis://host:port, redis+cluster://host:port,host:port or " +
        "redis+sentinel://host:port,host:port/<master name> (rediss… for TLS)",
    );
  }
  const [, scheme, kind, credentials, hostList, path] = match;
  const nodes = hostList!.split(",").map((entry) => {
    const node = NODE.exec(entry.trim());
    const port = Number(node?.[2]);
    if (!node || port < 1 || port > 65_535) throw new Error(`"${entry}" is not host:port`);
    return { host: node[1]!.replace(/^\[|\]$/g, ""), port };
  });
  const auth = parseAuth(credentials);
  const tls = scheme === "rediss";
  if (kind === "cluster") {
    if (path) throw new Error("a cluster URL has no path (a cluster has only database 0)");
    return { kind: "cluster", nodes, auth, tls };
  }
  if (!path)
    throw new Error(
      "a sentinel URL ends in /<master name>, e.g. redis+sentinel://h1:26379,h2:26379/mymaster",
    );
  return { kind: "sentinel", sentinels: nodes, masterName: decodeURIComponent(path), auth, tls };
}

function parseAuth(credentials: string | undefined): RedisAuth {
  if (!credentials) return {};
  const [user, ...rest] = credentials.split(":");
  const password = rest.length > 0 ? decodeURIComponent(rest.join(":")) : undefined;
  return { ...(user ? { username: decodeURIComponent(user) } : {}), ...(password ? { password } : {}) };
}

const ZRedisEnv = z.object({
  REDIS_URL: z
    .string({ error: "required (or run `npm start`, which starts redis-server from PATH when it is unset)" })
    .superRefine((url, ctx) => {
      try {
        parseRedisTopology(url);
      } catch (error) {
        ctx.addIssue({ code: "custom", message: (error as Error).message });
      }
    }),
  // Every Redis key Berth writes (BullMQ queues, heartbeats, the audit buffer) starts with this, so
  // test runs and several installations can share one Redis without seeing each other's data.
  BERTH_REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, "letters, digits, _ and - only")
    .default("berth"),
});

export type RedisConfig = { readonly url: string; readonly prefix: string };

/**
 * On a Redis Cluster the prefix becomes a hash tag (`{berth}`): Redis hashes only what is inside the braces,
 * so every key Berth writes (`{berth}:bull:<queue>:…`, `{berth}:audit:buffer`, …) lands in one slot and
 * BullMQ's Lua scripts, Berth's own scripts and its MULTIs never touch keys on two nodes (CROSSSLOT).
 * One server and Sentinel keep the plain prefix, so existing installations keep their keys.
 */
function effectiveRedisPrefix(url: string, prefix: string): string {
  return parseRedisTopology(url).kind === "cluster" ? `{${prefix}}` : prefix;
}

export function loadRedisConfig(env: RawEnv = readProcessEnv()): RedisConfig {
  const parsed = parseEnv(ZRedisEnv, env, "redis");
  return { url: parsed.REDIS_URL, prefix: effectiveRedisPrefix(parsed.REDIS_URL, parsed.BERTH_REDIS_PREFIX) };
}
