/**
 * Stopping `npm start` the ways people and process managers do: Ctrl-C (SIGINT to the whole foreground
 * group), `kill -INT <npm>` (npm alone), a process manager's SIGTERM to the group. Each must end with the
 * `stopped` line and exit 0 within seconds, with the port closed and every process Berth started (embedded
 * PostgreSQL and Redis, tsx's esbuild service, MCP children) gone. Real processes, on one data folder: the
 * first start makes it (fresh, as a new user's), the next ones reuse it as every later start does, sparing
 * each a PostgreSQL initdb and the migrations (seconds of CPU) that the stop does not depend on; each also
 * shows that the stop before it left the folder fit to start again.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { findFreePort } from "@/scripts/services/ports";
import {
  descendantPids,
  FRESH_MACHINE_UNSET,
  isAlive,
  isListening,
  startBerthProcess,
  waitUntilServing,
  type StartedBerth,
} from "./support/start-process";

const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..", "..");

/** How long a stop may take: seconds, not the minutes it took when the services died first. */
const STOP_DEADLINE_MS = 30_000;

const signals: { name: string; send: (npmPid: number) => void }[] = [
  { name: "SIGINT to the npm process alone", send: (pid) => process.kill(pid, "SIGINT") },
  { name: "SIGINT to the process group (Ctrl-C)", send: (pid) => process.kill(-pid, "SIGINT") },
  { name: "SIGTERM to the process group (a process manager)", send: (pid) => process.kill(-pid, "SIGTERM") },
];

describe("npm start stops cleanly on a signal (embedded PostgreSQL and Redis)", () => {
  let dataDir: string;
  let berth: StartedBerth | undefined;
  let started: number[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-signals-"));
  });
  afterAll(async () => {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });
  afterEach(async () => {
    if (berth && berth.child.exitCode === null) {
      process.kill(-berth.child.pid!, "SIGKILL");
      await berth.exited;
    }
    // The embedded services run in their own process groups: a failed test must not leave them running.
    for (const pid of started.filter(isAlive)) process.kill(pid, "SIGKILL");
    started = [];
    berth = undefined;
  });

  it.each(signals)(
    "$name: prints stopped, exits 0, closes its port and leaves no process behind",
    async ({ send }) => {
      const port = await findFreePort();
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        BERTH_DATA_DIR: dataDir,
        LOG_LEVEL: "warn",
        HOST: "127.0.0.1",
        // What is under test (start.ts, the services, shutdown) is not part of the Next build: any build does.
        BERTH_SKIP_BUILD: existsSync(path.join(REPO_ROOT, ".next", "BUILD_ID")) ? "1" : "",
      };
      for (const key of FRESH_MACHINE_UNSET) delete env[key];
      berth = startBerthProcess({ via: "npm", port, env });
      await waitUntilServing(berth, `http://127.0.0.1:${port}`);
      const postgresPort = Number(
        /embedded PostgreSQL ready on 127\.0\.0\.1:(\d+)/.exec(berth.lines.join("\n"))?.[1],
      );
      const redisPort = Number(
        /embedded Redis ready on 127\.0\.0\.1:(\d+)/.exec(berth.lines.join("\n"))?.[1],
      );
      expect(await isListening(postgresPort)).toBe(true);
      expect(await isListening(redisPort)).toBe(true);
      started = await descendantPids(berth.child.pid!);
      expect(started.length).toBeGreaterThan(2); // node, postgres (+ its workers), redis-server, ...

      send(berth.child.pid!);
      await vi.waitFor(() => expect(berth!.child.exitCode).not.toBeNull(), {
        timeout: STOP_DEADLINE_MS,
        interval: 100,
      });
      const output = berth.lines.join("\n");
      expect(berth.child.exitCode, output).toBe(0);
      expect(output).toContain("[berth] stopped");
      expect(output).not.toMatch(/unclean shutdown/);
      expect(await isListening(port)).toBe(false);
      expect(await isListening(postgresPort)).toBe(false);
      expect(await isListening(redisPort)).toBe(false);
      // PostgreSQL removes its pid file only on a clean shutdown.
      await expect(stat(path.join(dataDir, "postgres", "postmaster.pid"))).rejects.toThrow(/ENOENT/);
      await vi.waitFor(() => expect(started.filter(isAlive)).toEqual([]), { timeout: 10_000, interval: 100 });
    },
    900_000,
  );
});
