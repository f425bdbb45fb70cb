import { spawn } from "node:child_process";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { aliveWorkers } from "@/server/queue/heartbeat";
import { createRedisConnection } from "@/server/redis";
import { findFreePort } from "@/scripts/services/ports";
import { isolatedRedisConfig, redisPrefixEnv } from "../queue/queue-fixtures";

const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");

describe("workers/main.ts (the standalone worker process)", () => {
  it("serves /live and /ready, beats, and on SIGTERM turns unready, deregisters and exits 0", async () => {
    const redis = isolatedRedisConfig();
    const port = await findFreePort();
    const child = spawn(process.execPath, ["--import", "tsx", "workers/main.ts"], {
      cwd: repoRoot,
      env: {
        ...process.env,
        BERTH_REDIS_PREFIX: redisPrefixEnv(redis),
        WORKERS_HEALTH_PORT: String(port),
        LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const connection = createRedisConnection(redis, "producer", "test-main-process");
    try {
      await vi.waitFor(
        async () => {
          if (child.exitCode !== null) throw new Error(`worker process exited early:\n${output}`);
          const ready = await fetch(`http://127.0.0.1:${port}/ready`);
          expect(ready.status).toBe(200);
        },
        { timeout: 60_000, interval: 200 },
      );
      expect((await fetch(`http://127.0.0.1:${port}/live`)).status).toBe(200);
      expect(await aliveWorkers(connection, redis.prefix, 15_000)).toHaveLength(1);

      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(await aliveWorkers(connection, redis.prefix, 15_000)).toEqual([]);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
      await connection.quit();
    }
  });
});

/**
 * `npm run workers` in a process group of its own, as under a terminal or a process manager, with its
 * output collected. `ended` is npm's exit: npm dies by the signal when its child did (it re-sends the signal
 * to itself), so a code of 0 and no signal is the clean stop.
 */
function startWorkersProcess(redis: ReturnType<typeof isolatedRedisConfig>) {
  const child = spawn("npm", ["run", "workers", "--silent"], {
    cwd: repoRoot,
    env: {
      ...process.env,
      BERTH_REDIS_PREFIX: redisPrefixEnv(redis),
      WORKERS_HEALTH_PORT: "0",
      LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const ended = () => ({ code: child.exitCode, signal: child.signalCode });
  return {
    child,
    output: () => output,
    /** Waits for npm to end and expects the clean stop, with the output when it was not one. */
    async expectCleanStop() {
      await vi.waitFor(() => expect(ended()).not.toEqual({ code: null, signal: null }), {
        timeout: 30_000,
        interval: 100,
      });
      expect(ended(), output).toEqual({ code: 0, signal: null });
      expect(output).toMatch(/"msg":"stopped"/);
      expect(output).not.toMatch(/unclean shutdown/);
    },
    kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // the group is gone already (ESRCH): nothing to clean up
      }
    },
  };
}

describe("npm run workers stops cleanly on a signal", () => {
  it.each([
    { name: "SIGINT to the npm process alone", send: (pid: number) => process.kill(pid, "SIGINT") },
    { name: "SIGTERM to the process group", send: (pid: number) => process.kill(-pid, "SIGTERM") },
  ])("$name: logs stopped and exits 0", async ({ send }) => {
    const redis = isolatedRedisConfig();
    const workers = startWorkersProcess(redis);
    const connection = createRedisConnection(redis, "producer", "test-main-process-signals");
    try {
      await vi.waitFor(
        async () => {
          if (workers.child.exitCode !== null)
            throw new Error(`worker process exited early:\n${workers.output()}`);
          expect(await aliveWorkers(connection, redis.prefix, 15_000)).toHaveLength(1);
        },
        { timeout: 60_000, interval: 200 },
      );
      send(workers.child.pid!);
      await workers.expectCleanStop();
    } finally {
      workers.kill();
      await connection.quit();
    }
  });

  it("a SIGTERM to the group while it is still starting lets the start finish, then stops cleanly", async () => {
    const workers = startWorkersProcess(isolatedRedisConfig());
    try {
      // "starting" comes before the runtime connects anything; the signal lands while it does.
      await vi.waitFor(() => expect(workers.output()).toMatch(/"msg":"starting"/), {
        timeout: 60_000,
        interval: 20,
      });
      process.kill(-workers.child.pid!, "SIGTERM");
      await workers.expectCleanStop();
    } finally {
      workers.kill();
    }
  });
});
