import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "@/scripts/services/ports";

const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");

/** `npm start` as a new user runs it: no DATABASE_URL/REDIS_URL/secrets, a fresh data folder. */
function startBerth(
  dataDir: string,
  port: number,
  extraEnv: Record<string, string> = {},
): { child: ChildProcess; lines: string[]; waitFor(re: RegExp): Promise<string> } {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    BERTH_DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
    ...extraEnv,
  };
  for (const key of [
    "DATABASE_URL",
    "REDIS_URL",
    "BERTH_REDIS_PREFIX",
    "BERTH_AUTH_SECRET",
    "BERTH_ENCRYPTION_KEY",
    "NODE_ENV",
  ]) {
    delete env[key];
  }
  // One process (no tsx wrapper), so signals reach scripts/start.ts directly, as with `npm start`.
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/start.ts"], {
    cwd: repoRoot,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  const waiters: { re: RegExp; resolve: (line: string) => void; reject: (e: Error) => void }[] = [];
  const onLine = (line: string) => {
    lines.push(line);
    for (const waiter of [...waiters]) {
      if (waiter.re.test(line)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  };
  createInterface({ input: child.stdout }).on("line", onLine);
  createInterface({ input: child.stderr }).on("line", onLine);
  child.once("exit", (code) => {
    for (const waiter of waiters.splice(0)) {
      waiter.reject(
        new Error(`npm start exited (${code}) before printing ${waiter.re}:\n${lines.slice(-30).join("\n")}`),
      );
    }
  });
  return {
    child,
    lines,
    waitFor: (re) =>
      new Promise((resolve, reject) => {
        const seen = lines.find((line) => re.test(line));
        if (seen) resolve(seen);
        else waiters.push({ re, resolve, reject });
      }),
  };
}

function stop(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  child.kill("SIGTERM");
  return exited;
}

describe("npm start on a fresh data folder (embedded PostgreSQL and Redis)", () => {
  let dataDir: string;
  let port: number;
  let berth: ReturnType<typeof startBerth>;
  let base: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-start-"));
    port = await findFreePort();
    base = `http://127.0.0.1:${port}`;
    berth = startBerth(dataDir, port);
    // Includes `next build` when .next is missing or stale (minutes on a busy 2-core machine).
    await berth.waitFor(/Berth is running at/);
  }, 900_000);

  afterAll(async () => {
    if (berth) await stop(berth.child);
    await rm(dataDir, { recursive: true, force: true });
  });

  it("prints the sign-in URL, email and a one-time password", async () => {
    await berth.waitFor(/password:/);
    const text = berth.lines.join("\n");
    expect(text).toContain(`http://localhost:${port}/sign-in`);
    expect(text).toMatch(/email:\s+admin@berth\.local/);
    expect(text).toContain("shown only once");
  });

  it("answers /api/health with 200 and database, Redis and workers ok", async () => {
    const response = await fetch(`${base}/api/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      status: "ok",
      checks: { database: { ok: true }, redis: { ok: true }, workers: { ok: true, alive: 1 } },
    });
  });

  it("serves the sign-in page, and the printed credentials sign in", async () => {
    const page = await fetch(`${base}/sign-in`);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/sign in/i);

    const password = /password:\s+(\S+)/.exec(berth.lines.join("\n"))?.[1];
    const signIn = await fetch(`${base}/api/auth/sign-in/email`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: `http://localhost:${port}` },
      body: JSON.stringify({ email: "admin@berth.local", password }),
    });
    expect(signIn.status).toBe(200);
    expect(signIn.headers.get("set-cookie")).toMatch(/session_token/);
  });

  it("stores secrets only in 0600 files and never the admin password", async () => {
    const { readFile, stat } = await import("node:fs/promises");
    const secretsFile = path.join(dataDir, "secrets.json");
    expect((await stat(secretsFile)).mode & 0o777).toBe(0o600);
    const password = /password:\s+(\S+)/.exec(berth.lines.join("\n"))?.[1] ?? "";
    expect(password.length).toBeGreaterThan(10);
    expect(await readFile(secretsFile, "utf8")).not.toContain(password);
  });

  it("stops cleanly on SIGTERM, and a second start reuses the data without printing credentials again", async () => {
    expect(await stop(berth.child)).toBe(0);
    expect(berth.lines.join("\n")).toContain("stopped");

    // The first start just built .next; skip the staleness check so files edited meanwhile by a
    // developer do not turn this into a second multi-minute build.
    berth = startBerth(dataDir, port, { BERTH_SKIP_BUILD: "1" });
    await berth.waitFor(/Berth is running at/);
    expect(berth.lines.join("\n")).not.toMatch(/password:/);
    const health = await fetch(`${base}/api/health`);
    expect(health.status).toBe(200);
  }, 300_000);
});
