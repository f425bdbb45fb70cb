import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "@/scripts/services/ports";
import { FRESH_MACHINE_UNSET, startBerthProcess, type StartedBerth } from "./support/start-process";

/** `npm start` as a new user runs it: no DATABASE_URL/REDIS_URL/secrets, a fresh data folder. */
function startBerth(dataDir: string, port: number, extraEnv: Record<string, string> = {}): StartedBerth {
  const env: NodeJS.ProcessEnv = { ...process.env, BERTH_DATA_DIR: dataDir, LOG_LEVEL: "warn", ...extraEnv };
  for (const key of FRESH_MACHINE_UNSET) delete env[key];
  return startBerthProcess({ via: "node", port, env });
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
    if (berth) await berth.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("prints the sign-in URL, email and a one-time password", async () => {
    // The credentials are several lines written one by one: wait for the last of them.
    await berth.waitFor(/shown only once/);
    expect(berth.lines.join("\n")).toContain("database migrations: applied");
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

    // The first admin is the installation's first operator (issue 15): operator.* answers them.
    const cookie = signIn.headers
      .getSetCookie()
      .map((line) => line.split(";")[0])
      .join("; ");
    const operator = await fetch(`${base}/api/trpc/operator.tenants.list`, { headers: { cookie } });
    expect(operator.status).toBe(200);
    const body = (await operator.json()) as {
      result: { data: { json: { slug: string; status: string }[] } };
    };
    expect(body.result.data.json).toEqual([expect.objectContaining({ slug: "default", status: "active" })]);
  });

  it("lets sign-ins in quick succession through: only failures are limited", async () => {
    // better-auth's own limiter, on in production, once refused the 4th sign-in within 10 s of anyone's.
    const password = /password:\s+(\S+)/.exec(berth.lines.join("\n"))?.[1];
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 6; attempt++) {
      const signIn = await fetch(`${base}/api/auth/sign-in/email`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: `http://localhost:${port}` },
        body: JSON.stringify({ email: "admin@berth.local", password }),
      });
      statuses.push(signIn.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
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
    expect(await berth.stop()).toBe(0);
    expect(berth.lines.join("\n")).toContain("stopped");

    // The first start just built .next; skip the staleness check so files edited meanwhile by a
    // developer do not turn this into a second multi-minute build.
    berth = startBerth(dataDir, port, { BERTH_SKIP_BUILD: "1" });
    await berth.waitFor(/Berth is running at/);
    expect(berth.lines.join("\n")).not.toMatch(/password:/);
    // The schema is current: no `prisma migrate deploy` this time (seconds of CPU at every start).
    expect(berth.lines.join("\n")).toContain("database migrations: up to date");
    const health = await fetch(`${base}/api/health`);
    expect(health.status).toBe(200);
  }, 300_000);
});
