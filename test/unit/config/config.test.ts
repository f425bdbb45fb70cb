import { describe, expect, it } from "vitest";
import { loadConfig } from "@/server/config/config";
import { loadDatabaseConfig } from "@/server/config/database";
import { loadHttpConfig } from "@/server/config/http";
import { loadLoggingConfig } from "@/server/config/logging";
import { loadQuotaConfig } from "@/server/config/quotas";
import { loadRedisConfig } from "@/server/config/redis";
import { loadSecretsConfig } from "@/server/config/secrets";
import { loadWorkersConfig } from "@/server/config/workers";
import { AppError } from "@/server/shared/errors";

const validEnv = {
  DATABASE_URL: "postgresql://root@localhost/berth?host=/var/run/postgresql",
  REDIS_URL: "redis://127.0.0.1:6379",
  BERTH_AUTH_SECRET: "s".repeat(40),
  BERTH_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString("base64"),
};

describe("config", () => {
  it("parses a complete environment with typed defaults", () => {
    const config = loadConfig(validEnv);
    expect(config.database.url).toBe(validEnv.DATABASE_URL);
    expect(config.redis).toEqual({ url: "redis://127.0.0.1:6379", prefix: "berth" });
    expect(config.http).toEqual({
      port: 3000,
      host: "127.0.0.1",
      baseUrl: "http://localhost:3000",
      trustedProxies: [],
      terminalReattachGraceMs: 30_000,
      preview: null,
    });
    expect(config.secrets.encryptionKey).toEqual(Buffer.alloc(32, 7));
    expect(config.logging.level).toBe("info");
    expect(config.workers).toMatchObject({ concurrency: 4, healthPort: 3001, heartbeatTtlMs: 15_000 });
  });

  it("quotas: installation defaults, overridable per variable; metering rates are JSON per backend", () => {
    const defaults = loadQuotaConfig({});
    expect(defaults.defaults).toEqual({
      liveWorkspaces: 50,
      totalWorkspaces: 1_000,
      concurrentTurns: 50,
      provisionsPerMinute: 60,
      warmClaimsPerMinute: 0,
      workspaceCpus: 0,
      workspaceMemoryBytes: 0,
      workspaceDiskBytes: 0,
      mcpServersPerScope: 20,
      skillStorageBytes: 512 * 1024 * 1024,
    });
    expect(defaults.rates).toEqual({
      "*": {
        workspaceHour: 1,
        provision: 0,
        turn: 0,
        inputTokensPerMillion: 0,
        outputTokensPerMillion: 0,
        toolCall: 0,
      },
    });
    const custom = loadQuotaConfig({
      BERTH_QUOTA_LIVE_WORKSPACES: "3",
      BERTH_METERING_RATES: JSON.stringify({ docker: { workspaceHour: 4, turn: 0.5 } }),
    });
    expect(custom.defaults.liveWorkspaces).toBe(3);
    expect(custom.rates.docker).toMatchObject({ workspaceHour: 4, turn: 0.5, provision: 0 });
    for (const bad of [
      "{not json",
      JSON.stringify({ Moon: { turn: 1 } }), // not a kind's form (which kinds exist: engine-backend.test.ts)
      JSON.stringify({ "*": { tunr: 1 } }),
    ]) {
      expect(() => loadQuotaConfig({ BERTH_METERING_RATES: bad })).toThrow(/BERTH_METERING_RATES/);
    }
    expect(() => loadQuotaConfig({ BERTH_QUOTA_CONCURRENT_TURNS: "-1" })).toThrow(
      /BERTH_QUOTA_CONCURRENT_TURNS/,
    );
  });

  it("quotas: warm pool claims per minute are unlimited (0) unless set, and a whole number of 0 or more", () => {
    expect(loadQuotaConfig({}).defaults.warmClaimsPerMinute).toBe(0);
    expect(loadQuotaConfig({ BERTH_QUOTA_WARM_CLAIMS_PER_MINUTE: "" }).defaults.warmClaimsPerMinute).toBe(0);
    expect(loadQuotaConfig({ BERTH_QUOTA_WARM_CLAIMS_PER_MINUTE: "5" }).defaults.warmClaimsPerMinute).toBe(5);
    for (const bad of ["-1", "1.5", "many"])
      expect(() => loadQuotaConfig({ BERTH_QUOTA_WARM_CLAIMS_PER_MINUTE: bad })).toThrow(
        /BERTH_QUOTA_WARM_CLAIMS_PER_MINUTE/,
      );
  });

  it("fails at load with every missing variable named, and how to get it", () => {
    let error: unknown;
    try {
      loadConfig({});
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).message).toMatch(/DATABASE_URL: required \(or run `npm start`/);
    // The first failing concern stops the load; each concern lists all of its own problems.
    expect(() => loadSecretsConfig({})).toThrow(/BERTH_AUTH_SECRET[\s\S]*BERTH_ENCRYPTION_KEY/);
  });

  it("treats empty strings as unset", () => {
    expect(() => loadDatabaseConfig({ DATABASE_URL: "" })).toThrow(/DATABASE_URL: required/);
    expect(loadHttpConfig({ PORT: "" }).port).toBe(3000);
  });

  it("serves previews only on an origin apart from the dashboard's, and not at all unless set", () => {
    expect(loadHttpConfig({}).preview).toBeNull();
    expect(loadHttpConfig({ PORT: "3000", BERTH_PREVIEW_PORT: "3001" }).preview).toEqual({
      port: 3001,
      url: "http://localhost:3001",
    });
    const behindProxy = loadHttpConfig({
      BERTH_BASE_URL: "https://berth.example.com",
      BERTH_PREVIEW_PORT: "3001",
      BERTH_PREVIEW_URL: "https://preview.example.net/",
    });
    expect(behindProxy.preview).toEqual({ port: 3001, url: "https://preview.example.net" });
    expect(() =>
      loadHttpConfig({
        BERTH_BASE_URL: "https://berth.example.com",
        BERTH_PREVIEW_PORT: "3001",
        BERTH_PREVIEW_URL: "https://berth.example.com/p",
      }),
    ).toThrow(/must differ/);
    expect(() => loadHttpConfig({ BERTH_PREVIEW_URL: "https://preview.example.net" })).toThrow(
      /BERTH_PREVIEW_PORT/,
    );
  });

  it("coerces and bounds numbers", () => {
    expect(loadHttpConfig({ PORT: "8080" }).port).toBe(8080);
    expect(() => loadHttpConfig({ PORT: "http" })).toThrow(/PORT/);
    expect(() => loadHttpConfig({ PORT: "70000" })).toThrow(/PORT/);
    const grace = (value: string) => loadHttpConfig({ BERTH_TERMINAL_REATTACH_GRACE_MS: value });
    expect(grace("5000").terminalReattachGraceMs).toBe(5_000);
    expect(() => grace("999")).toThrow(/BERTH_TERMINAL_REATTACH_GRACE_MS/);
    expect(() => grace("soon")).toThrow(/BERTH_TERMINAL_REATTACH_GRACE_MS/);
    expect(loadWorkersConfig({ WORKERS_CONCURRENCY: "8" }).concurrency).toBe(8);
    expect(() => loadWorkersConfig({ WORKERS_CONCURRENCY: "0" })).toThrow(/WORKERS_CONCURRENCY/);
  });

  it("validates URL schemes and the Redis prefix", () => {
    expect(() => loadDatabaseConfig({ DATABASE_URL: "mysql://x" })).toThrow(/postgres/);
    expect(() => loadRedisConfig({ REDIS_URL: "http://x" })).toThrow(/redis:\/\//);
    expect(() => loadRedisConfig({ REDIS_URL: "redis://x", BERTH_REDIS_PREFIX: "a:b" })).toThrow(
      /BERTH_REDIS_PREFIX/,
    );
  });

  it("accepts a 32-byte encryption key as hex or base64 and rejects other sizes", () => {
    const hex = Buffer.alloc(32, 1).toString("hex");
    expect(loadSecretsConfig({ ...validEnv, BERTH_ENCRYPTION_KEY: hex }).encryptionKey).toEqual(
      Buffer.alloc(32, 1),
    );
    const short = Buffer.alloc(16).toString("base64");
    expect(() => loadSecretsConfig({ ...validEnv, BERTH_ENCRYPTION_KEY: short })).toThrow(/32 bytes/);
    expect(() => loadSecretsConfig({ ...validEnv, BERTH_AUTH_SECRET: "short" })).toThrow(/at least 32/);
  });

  it("trusts no proxy by default and validates BERTH_TRUSTED_PROXIES as addresses or CIDRs", () => {
    expect(loadHttpConfig({}).trustedProxies).toEqual([]);
    expect(loadHttpConfig({ BERTH_TRUSTED_PROXIES: " 10.0.0.5, 172.16.0.0/12,::1 " }).trustedProxies).toEqual(
      ["10.0.0.5", "172.16.0.0/12", "::1"],
    );
    expect(() => loadHttpConfig({ BERTH_TRUSTED_PROXIES: "everyone" })).toThrow(/BERTH_TRUSTED_PROXIES/);
  });

  it("uses BERTH_BASE_URL without a trailing slash", () => {
    expect(loadHttpConfig({ BERTH_BASE_URL: "https://berth.example.com/" }).baseUrl).toBe(
      "https://berth.example.com",
    );
  });

  it("defaults logging to warn under tests and honours LOG_LEVEL", () => {
    expect(loadLoggingConfig({ NODE_ENV: "test" }).level).toBe("warn");
    expect(loadLoggingConfig({ NODE_ENV: "test", LOG_LEVEL: "debug" }).level).toBe("debug");
    expect(() => loadLoggingConfig({ LOG_LEVEL: "loud" })).toThrow(/LOG_LEVEL/);
  });

  it("never echoes a secret value in the error", () => {
    try {
      loadSecretsConfig({ BERTH_AUTH_SECRET: "hunter2-is-not-long-enough", BERTH_ENCRYPTION_KEY: "zz" });
    } catch (error) {
      expect((error as Error).message).not.toContain("hunter2");
      return;
    }
    expect.unreachable("invalid secrets must throw");
  });
});
