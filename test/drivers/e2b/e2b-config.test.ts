import { describe, expect, it } from "vitest";
import { instantiateDriver } from "@/server/workspace/drivers/driver";
import { e2bDriver } from "@/server/workspace/drivers/e2b/driver";
import { sandboxTimeoutMs, ZE2bDriverConfig } from "@/server/workspace/drivers/e2b/e2b-config";
import { SandboxKeepAlive } from "@/server/workspace/drivers/e2b/e2b-keepalive";
import { shellQuote } from "@/server/workspace/drivers/e2b/e2b-commands";

const context = { basedir: "/var/lib/berth/workspaces", cwd: "/srv/berth", uid: 1000 };
const parse = (env: Record<string, string>) =>
  ZE2bDriverConfig.safeParse(e2bDriver.configFromEnv(env, context));
const messages = (env: Record<string, string>) => {
  const result = parse(env);
  return result.success ? [] : result.error.issues.map((issue) => issue.message);
};

describe("E2B driver configuration from the environment", () => {
  it("needs only the API key; everything else has a default", () => {
    const result = parse({ E2B_API_KEY: "e2b_key" });
    expect(result.success).toBe(true);
    expect(result.data).toMatchObject({
      apiKey: "e2b_key",
      template: "base",
      user: "user",
      workdir: "/home/user/workspace",
      onTimeout: "pause",
      pauseKeepsMemory: true,
      allowInternetAccess: false,
      gateway: { port: 49990, callTimeoutMs: 30_000, startTimeoutMs: 30_000 },
    });
    // Unset: the driver labels with the installation's own id (server/modules/installation).
    expect(result.data?.installation).toBeUndefined();
    expect(sandboxTimeoutMs(result.data!)).toBe(3_600_000); // 1 h idle TTL + 5 min, capped at E2B's 1 h
  });

  it("reads every variable and says which one is wrong", () => {
    const result = parse({
      E2B_API_KEY: "k",
      E2B_DOMAIN: "e2b.example",
      BERTH_E2B_API_URL: "http://127.0.0.1:3000",
      BERTH_E2B_SANDBOX_URL: "http://127.0.0.1:3000",
      BERTH_E2B_TEMPLATE: "berth-big",
      BERTH_E2B_WORKDIR: "/work/",
      BERTH_WORKSPACE_IDLE_TTL_MS: "600000",
      BERTH_E2B_MAX_SANDBOX_TIMEOUT_MS: "86400000",
      BERTH_E2B_ON_TIMEOUT: "kill",
      BERTH_E2B_PAUSE_KEEPS_MEMORY: "false",
      BERTH_E2B_INTERNET: "1",
      BERTH_E2B_CPU_COUNT: "4",
      BERTH_E2B_MEMORY_MB: "4096",
      BERTH_E2B_GATEWAY_PORT: "50500",
    });
    expect(result.data).toMatchObject({
      domain: "e2b.example",
      template: "berth-big",
      workdir: "/work",
      onTimeout: "kill",
      pauseKeepsMemory: false,
      allowInternetAccess: true,
      minCpuCount: 4,
      minMemoryMB: 4096,
      gateway: { port: 50500 },
    });
    expect(sandboxTimeoutMs(result.data!)).toBe(600_000 + 300_000);

    expect(messages({})).toEqual([expect.stringContaining("E2B_API_KEY is required")]);
    expect(messages({ E2B_API_KEY: "k", BERTH_E2B_ON_TIMEOUT: "sleep" })).toEqual([
      "BERTH_E2B_ON_TIMEOUT must be pause or kill",
    ]);
    expect(messages({ E2B_API_KEY: "k", BERTH_E2B_SANDBOX_URL: "http://127.0.0.1:1" })).toEqual([
      expect.stringContaining("needs BERTH_E2B_API_URL"),
    ]);
    expect(messages({ E2B_API_KEY: "k", BERTH_E2B_WORKDIR: "relative" })).toEqual([
      "BERTH_E2B_WORKDIR must be an absolute path",
    ]);
    expect(messages({ E2B_API_KEY: "k", BERTH_E2B_INTERNET: "maybe" })).toEqual([
      "BERTH_E2B_INTERNET must be true or false",
    ]);
  });

  it("states the capabilities the brief asks for", () => {
    const driver = instantiateDriver(e2bDriver, ZE2bDriverConfig.parse({ apiKey: "k" }), context);
    expect(driver.persistent).toBe(true);
    expect(driver.isolation).toEqual({ isolated: true, sandbox: null });
    expect(driver.capabilities).toEqual({
      hostPaths: false,
      pauseKeepsMemory: true,
      gateway: "sandbox-url",
      mayVanish: true,
      pty: true,
      previews: false,
      warmPool: true,
    });
    expect(driver.kind).toBe("e2b");
  });
});

describe("E2B keepalive and quoting", () => {
  it("refreshes the timeout only when half of it is used, and keeps refreshing while held", async () => {
    const calls: number[] = [];
    let now = 1_000_000;
    const realNow = Date.now;
    Date.now = () => now;
    try {
      const keepAlive = new SandboxKeepAlive((ms) => {
        calls.push(ms);
        return Promise.resolve(true);
      }, 60_000);
      await keepAlive.touch();
      expect(calls).toEqual([]);
      now += 40_000; // 20 s left, less than half: awaited refresh (less than a quarter is not yet reached)
      await keepAlive.touch();
      await Promise.resolve();
      expect(calls).toEqual([60_000]);
      await keepAlive.touch();
      expect(calls).toHaveLength(1);
      keepAlive.close();
    } finally {
      Date.now = realNow;
    }
  });

  it("quotes argv words for bash", () => {
    expect(shellQuote("plain/path-1.txt")).toBe("plain/path-1.txt");
    expect(shellQuote("")).toBe("''");
    expect(shellQuote("it's $HOME `x`")).toBe(`'it'"'"'s $HOME \`x\`'`);
  });
});
