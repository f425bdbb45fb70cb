/**
 * `npm run berth` beside `npm start` on embedded defaults (issue 15): npm start records its embedded
 * PostgreSQL and Redis (free ports, generated passwords) in `<data dir>/services.json`, and the CLI, run
 * with no DATABASE_URL or REDIS_URL, finds and uses them. Once npm start stopped (the record is removed),
 * or when the record's process is gone, the CLI says clearly that nothing is running. Real processes on a
 * fresh data folder. The CLI's shell has no PORT: its invitation links still name the port npm start serves
 * on (the base URL it recorded), not the default 3000.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "@/scripts/services/ports";
import {
  descendantPids,
  FRESH_MACHINE_UNSET,
  isAlive,
  startBerthProcess,
  type StartedBerth,
} from "./support/start-process";

const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..", "..");

describe("npm run berth finds npm start's embedded services", { timeout: 180_000 }, () => {
  let dataDir: string;
  let berth: StartedBerth | undefined;
  let started: number[] = [];
  let port: number;

  /** The environment of a fresh machine (no service URLs or secrets), pointed at the data folder. */
  const freshEnv = (): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = { ...process.env, BERTH_DATA_DIR: dataDir, LOG_LEVEL: "warn" };
    for (const key of FRESH_MACHINE_UNSET) delete env[key];
    return env;
  };

  function cli(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn("npm", ["run", "-s", "berth", "--", ...args], {
      cwd: REPO_ROOT,
      env: freshEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    return new Promise((resolve) => child.once("exit", (code) => resolve({ code, stdout, stderr })));
  }

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-cli-embedded-"));
    port = await findFreePort();
    berth = startBerthProcess({ via: "npm", port, env: { ...freshEnv(), HOST: "127.0.0.1" } });
    // Recorded once the migrations ran: the CLI needs no more (the dashboard may still be building).
    await berth.waitFor(/services recorded in/);
    started = await descendantPids(berth.child.pid!);
  }, 600_000);

  afterAll(async () => {
    if (berth && berth.child.exitCode === null) {
      process.kill(-berth.child.pid!, "SIGKILL");
      await berth.exited;
    }
    // The embedded services run in their own process groups: a failed test must not leave them running.
    for (const pid of started.filter(isAlive)) process.kill(pid, "SIGKILL");
    await rm(dataDir, { recursive: true, force: true });
  });

  it("creates and lists tenants on the embedded database, then says nothing runs once npm start stopped", async () => {
    const record = path.join(dataDir, "services.json");
    expect((await stat(record)).mode & 0o777).toBe(0o600);
    const slug = `embedded-${randomUUID().slice(0, 8)}`;
    const created = await cli("tenant", "create", "--name", "Embedded Co", "--slug", slug, "--json");
    expect(created.code, created.stderr).toBe(0);
    const invite = (JSON.parse(created.stdout) as { ownerInvite: { url: string } }).ownerInvite;
    expect(invite.url).toMatch(new RegExp(`^http://localhost:${port}/invite/berth_inv_`));
    const listed = await cli("tenant", "list", "--json");
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { slug: string }[]).map((t) => t.slug)).toContain(slug);

    await berth!.stop();
    await expect(stat(record)).rejects.toMatchObject({ code: "ENOENT" });
    const stopped = await cli("tenant", "list");
    expect(stopped.code).toBe(3);
    expect(stopped.stderr).toContain(`DATABASE_URL is not set and no Berth is running on ${dataDir}`);
    expect(stopped.stderr).toContain("start it with `npm start`");

    // A record left by a process that is gone (killed) is stale, not a running Berth.
    const gone = spawn(process.execPath, ["-e", ""]);
    await new Promise((resolve) => gone.once("exit", resolve));
    await writeFile(
      record,
      JSON.stringify({
        pid: gone.pid,
        databaseUrl: "postgresql://nobody@127.0.0.1:1/berth",
        redisUrl: "redis://127.0.0.1:1",
        startedAt: new Date().toISOString(),
      }),
    );
    const stale = await cli("tenant", "list");
    expect(stale.code).toBe(3);
    expect(stale.stderr).toContain(`names process ${gone.pid}, which is not running (stale)`);
  });
});
