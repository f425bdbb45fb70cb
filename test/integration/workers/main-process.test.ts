import { spawn } from "node:child_process";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { aliveWorkers } from "@/server/queue/heartbeat";
import { createRedisConnection } from "@/server/redis";
import { findFreePort } from "@/scripts/services/ports";
import { startOtlpReceiver } from "@/test/fixtures/otlp-receiver/server";
import { isolatedRedisConfig, redisPrefixEnv } from "../queue/queue-fixtures";

const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");

const attributesOf = (resource: { attributes: { key: string; value: unknown }[] }) =>
  Object.fromEntries(
    resource.attributes.map(({ key, value }) => [key, (value as { stringValue?: string }).stringValue]),
  );

/**
 * `npm run workers` in a process group of its own, as under a terminal or a process manager, with its
 * output collected. `ended` is npm's exit: npm dies by the signal when its child did (it re-sends the signal
 * to itself), so a code of 0 and no signal is the clean stop.
 */
function startWorkersProcess(
  redis: ReturnType<typeof isolatedRedisConfig>,
  options: { healthPort?: number; env?: Record<string, string> } = {},
) {
  const child = spawn("npm", ["run", "workers", "--silent"], {
    cwd: repoRoot,
    env: {
      ...process.env,
      BERTH_REDIS_PREFIX: redisPrefixEnv(redis),
      WORKERS_HEALTH_PORT: String(options.healthPort ?? 0),
      LOG_LEVEL: "info",
      ...options.env,
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

/**
 * workers/main.ts, the standalone worker process, as `npm run workers` starts it (a terminal, a container's
 * command). Each process costs seconds of CPU to start, so the first case also checks what a running one
 * does (its health port, its heartbeat, its OTLP export: the in-process export is
 * test/integration/metrics/otlp-export.test.ts's) before its signal; a SIGTERM to the group reaches
 * workers/main.ts itself (the process a plain `node workers/main.ts` would be) as well as npm.
 */
describe("npm run workers stops cleanly on a signal", () => {
  it("serves /live and /ready, beats, exports to OTEL_EXPORTER_OTLP_ENDPOINT on its own flush ticks; on a SIGTERM to its process group it logs stopped, deregisters and exits 0", async () => {
    const redis = isolatedRedisConfig();
    const port = await findFreePort();
    const receiver = await startOtlpReceiver();
    const exported = receiver.nextExport();
    const workers = startWorkersProcess(redis, {
      healthPort: port,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_METRIC_EXPORT_INTERVAL: "5000" },
    });
    const connection = createRedisConnection(redis, "producer", "test-main-process");
    try {
      await vi.waitFor(
        async () => {
          if (workers.child.exitCode !== null)
            throw new Error(`worker process exited early:\n${workers.output()}`);
          const ready = await fetch(`http://127.0.0.1:${port}/ready`);
          expect(ready.status).toBe(200);
        },
        { timeout: 60_000, interval: 200 },
      );
      expect((await fetch(`http://127.0.0.1:${port}/live`)).status).toBe(200);
      expect(await aliveWorkers(connection, redis.prefix, 15_000)).toHaveLength(1);
      const exitedEarly = new Promise<never>((_, reject) =>
        workers.child.once("exit", () => reject(new Error(`exited before exporting:\n${workers.output()}`))),
      );
      const entry = await Promise.race([exported, exitedEarly]);
      expect(attributesOf(entry.body.resourceMetrics[0]!.resource)["service.name"]).toBe("berth");
      const metrics = entry.body.resourceMetrics[0]!.scopeMetrics[0]!.metrics.map((metric) => metric.name);
      expect(metrics).toContain("berth_stage_duration_seconds");
      expect(receiver.refused).toEqual([]);

      process.kill(-workers.child.pid!, "SIGTERM");
      await workers.expectCleanStop();
      expect(await aliveWorkers(connection, redis.prefix, 15_000)).toEqual([]);
    } finally {
      workers.kill();
      await connection.quit();
      await receiver.close();
    }
  });

  it("SIGINT to the npm process alone: logs stopped and exits 0", async () => {
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
      process.kill(workers.child.pid!, "SIGINT");
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
