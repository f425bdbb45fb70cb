import { describe, expect, it } from "vitest";
import { loadRedisConfig, parseRedisTopology } from "@/server/config/redis";

describe("REDIS_URL topologies", () => {
  it("keeps a plain redis:// URL and the plain prefix exactly as before", () => {
    expect(parseRedisTopology("redis://:pw@127.0.0.1:6379/2")).toEqual({
      kind: "single",
      url: "redis://:pw@127.0.0.1:6379/2",
    });
    expect(loadRedisConfig({ REDIS_URL: "rediss://h:6380", BERTH_REDIS_PREFIX: "acme" }).prefix).toBe("acme");
  });

  it("reads a cluster's seed nodes, credentials and TLS, and wraps the prefix as a hash tag", () => {
    expect(parseRedisTopology("rediss+cluster://berth:p%40ss@10.0.0.1:7000,[::1]:7001, node-c:7002")).toEqual(
      {
        kind: "cluster",
        nodes: [
          { host: "10.0.0.1", port: 7000 },
          { host: "::1", port: 7001 },
          { host: "node-c", port: 7002 },
        ],
        auth: { username: "berth", password: "p@ss" },
        tls: true,
      },
    );
    expect(loadRedisConfig({ REDIS_URL: "redis+cluster://a:1" }).prefix).toBe("{berth}");
  });

  it("reads Sentinels and the master name; the prefix stays plain", () => {
    expect(parseRedisTopology("redis+sentinel://:secret@s1:26379,s2:26379/mymaster")).toEqual({
      kind: "sentinel",
      sentinels: [
        { host: "s1", port: 26379 },
        { host: "s2", port: 26379 },
      ],
      masterName: "mymaster",
      auth: { password: "secret" },
      tls: false,
    });
    expect(loadRedisConfig({ REDIS_URL: "redis+sentinel://s1:26379/m" }).prefix).toBe("berth");
  });

  it("names what is wrong at boot", () => {
    expect(() => loadRedisConfig({ REDIS_URL: "http://x" })).toThrow(/redis\+cluster:\/\//);
    expect(() => loadRedisConfig({ REDIS_URL: "redis+cluster://a:1,b" })).toThrow(/"b" is not host:port/);
    expect(() => loadRedisConfig({ REDIS_URL: "redis+cluster://a:99999" })).toThrow(/is not host:port/);
    expect(() => loadRedisConfig({ REDIS_URL: "redis+cluster://a:1/2" })).toThrow(/no path/);
    expect(() => loadRedisConfig({ REDIS_URL: "redis+sentinel://a:26379" })).toThrow(/master name/);
  });
});
