import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/server/db";
import { previewInvite } from "@/server/modules/member/invite.service";
import { createTestApiRuntime } from "../api/support/api-test-runtime";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { redisPrefixEnv } from "../queue/queue-fixtures";
import { runBerthCli } from "@/scripts/cli/main";

const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");

type Ran = { code: number | null; stdout: string; stderr: string };

/**
 * The operator CLI as a script runs it, in a child process, against the run's database, with the harness'
 * workers (its Redis prefix) taking the jobs it queues. Each command family runs for real at least once
 * (`npm run berth -- …` for the first; the others run what that script runs, `node --import tsx
 * scripts/berth-cli.ts`), and so does every command that queues a job for the workers or needs another
 * shell's environment; a real refusal (the last operator's revoke) shows a non-zero exit code reaching the
 * shell. The rest (argument checks, refusals, reads) go through the same entry in this process, runBerthCli
 * (scripts/cli/main.ts, all that berth-cli.ts runs before closing its connections): each spawn costs 4-5
 * CPU-seconds of start-up (loading Berth's modules through tsx), so each real run proves as much as it can:
 * five in all.
 */
describe("npm run berth (operator CLI)", { timeout: 180_000 }, () => {
  let h: WorkspaceHarness;
  let t: TenantFixture;
  // What `PORT=3311 npm start` in one shell recorded (services.json) for a CLI in another shell to find.
  let dataDir: string;
  /** That other shell: neither PORT, BERTH_BASE_URL, DATABASE_URL nor REDIS_URL; the running Berth's folder. */
  const otherShell = (env: NodeJS.ProcessEnv) => {
    const { DATABASE_URL: _db, REDIS_URL: _redis, BERTH_BASE_URL: _base, PORT: _port, ...rest } = env;
    return { ...rest, BERTH_DATA_DIR: dataDir };
  };

  const berth = (...args: string[]) =>
    run([process.execPath, "--import", "tsx", path.join("scripts", "berth-cli.ts"), ...args]);
  const npmRunBerth = (shell: (env: NodeJS.ProcessEnv) => NodeJS.ProcessEnv, ...args: string[]) =>
    run(["npm", "run", "-s", "berth", "--", ...args], shell);
  /** The same command through the CLI's entry in this process (this run's database; no queue is used). */
  async function inProcess(...args: string[]): Promise<Ran> {
    let stdout = "";
    let stderr = "";
    const code = await runBerthCli(args, {
      stdout: (text) => void (stdout += text),
      stderr: (text) => void (stderr += text),
    });
    return { code, stdout, stderr };
  }

  function run(
    [command, ...args]: string[],
    shell: (env: NodeJS.ProcessEnv) => NodeJS.ProcessEnv = (env) => env,
  ): Promise<Ran> {
    const child = spawn(command!, args, {
      cwd: repoRoot,
      env: shell({
        ...process.env,
        BERTH_REDIS_PREFIX: redisPrefixEnv(h.redis),
        BERTH_BASE_URL: "https://berth.example.test",
        LOG_LEVEL: "warn",
      }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    return new Promise((resolve) => child.once("exit", (code) => resolve({ code, stdout, stderr })));
  }

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    t = await createTenantFixture(createTestApiRuntime(), "cli");
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-cli-base-url-"));
    await writeFile(
      path.join(dataDir, "services.json"),
      JSON.stringify({
        pid: process.pid,
        databaseUrl: process.env.DATABASE_URL,
        redisUrl: process.env.REDIS_URL,
        baseUrl: "http://localhost:3311",
        startedAt: new Date().toISOString(),
      }),
    );
  });
  afterAll(async () => {
    await h?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("creates a tenant with an owner invitation link that works, and refuses a taken slug or bad arguments", async () => {
    const slug = `cli-${randomUUID().slice(0, 8)}`;
    // In another shell than `npm start`'s (it finds the database in its record), with the operator's
    // BERTH_BASE_URL (a proxy's public address), which wins over the base URL that npm start recorded.
    const created = await npmRunBerth(
      (env) => ({ ...otherShell(env), BERTH_BASE_URL: "https://berth.example.test" }),
      "tenant",
      "create",
      "--name",
      "Scripted Co",
      "--slug",
      slug,
      "--json",
    );
    expect(created.code, created.stderr).toBe(0);
    const out = JSON.parse(created.stdout) as {
      tenant: { id: string; status: string };
      ownerInvite: { url: string };
    };
    expect(out.tenant.status).toBe("active");
    expect(out.ownerInvite.url).toMatch(/^https:\/\/berth\.example\.test\/invite\/berth_inv_/);
    const token = out.ownerInvite.url.split("/invite/")[1]!;
    expect(await previewInvite(token, getDb())).toMatchObject({ tenantName: "Scripted Co", role: "owner" });

    const taken = await inProcess("tenant", "create", "--name", "Again", "--slug", slug);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain(`CONFLICT: A tenant with the slug ${slug} already exists.`);

    const missing = await inProcess("tenant", "create", "--name", "No slug");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--slug: --slug <slug> is required");
    const badSlug = await inProcess("tenant", "create", "--name", "Bad", "--slug", "Not A Slug");
    expect(badSlug.code).toBe(2);
    expect(badSlug.stderr).toContain("slug: lowercase letters, digits and inner dashes only");
    const unknown = await inProcess("tenant", "resume", slug, "--force", "yes");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown flag --force");
    const noCommand = await inProcess("tenant", "explode");
    expect(noCommand.code).toBe(2);
    expect(noCommand.stderr).toContain('unknown command "tenant explode"');

    // Quota overrides are the operator's: the CLI sets one limit and gives another back to the default.
    const quota = await inProcess(
      "tenant",
      "quota",
      slug,
      "--live-workspaces",
      "3",
      "--total-workspaces",
      "default",
      "--json",
    );
    expect(quota.code, quota.stderr).toBe(0);
    const limits = (
      JSON.parse(quota.stdout) as { limits: { limit: string; value: number; overridden: boolean }[] }
    ).limits;
    expect(limits.find((l) => l.limit === "liveWorkspaces")).toMatchObject({ value: 3, overridden: true });
    expect(limits.find((l) => l.limit === "totalWorkspaces")).toMatchObject({ overridden: false });
    const badLimit = await inProcess("tenant", "quota", slug, "--live-workspaces", "lots");
    expect(badLimit.code).toBe(2);
    expect(badLimit.stderr).toContain("--live-workspaces: must be a number or default");

    const listed = await inProcess("tenant", "list", "--json");
    expect(listed.code).toBe(0);
    const tenants = JSON.parse(listed.stdout) as { slug: string; usage: { members: number } }[];
    expect(tenants.find((row) => row.slug === slug)?.usage.members).toBe(0);
    expect(tenants.find((row) => row.slug === t.tenant.slug)?.usage.members).toBe(2);
    expect(
      await getDb().operatorAuditLog.count({ where: { targetId: out.tenant.id, action: "tenant.create" } }),
    ).toBe(1);
  });

  it("prints invitation links for the port the running npm start serves on, not this shell's default 3000", async () => {
    // `PORT=3311 npm start` in one shell recorded its services and base URL; the CLI runs in another shell
    // with neither PORT, BERTH_BASE_URL nor DATABASE_URL, and finds both in the data folder's record.
    const slug = `port-${randomUUID().slice(0, 8)}`;
    const created = await run(
      [
        process.execPath,
        "--import",
        "tsx",
        "scripts/berth-cli.ts",
        "tenant",
        "create",
        "--name",
        "Port Co",
        "--slug",
        slug,
        "--json",
      ],
      otherShell,
    );
    expect(created.code, created.stderr).toBe(0);
    const createdUrl = (JSON.parse(created.stdout) as { ownerInvite: { url: string } }).ownerInvite.url;
    expect(createdUrl).toMatch(/^http:\/\/localhost:3311\/invite\/berth_inv_/);
    const token = createdUrl.split("/invite/")[1]!;
    expect(await previewInvite(token, getDb())).toMatchObject({ tenantName: "Port Co", role: "owner" });
    // (The operator's BERTH_BASE_URL in that shell wins over the record: the first case's `npm run berth`.)
    const invited = await inProcess("tenant", "invite-owner", slug, "--json");
    expect(invited.code, invited.stderr).toBe(0);
    const invitedToken = (JSON.parse(invited.stdout) as { url: string }).url.split("/invite/")[1]!;
    expect(await previewInvite(invitedToken, getDb())).toMatchObject({
      tenantName: "Port Co",
      role: "owner",
    });
  });

  it("suspends (stopping the workspaces), resumes, and deletes with --yes, waiting for the receipt", async () => {
    const { session, workspaceId } = await freshSession(t.ownerScope);
    await h.service.resolveForSession(t.ownerScope, session.id);

    const suspended = await berth("tenant", "suspend", t.tenant.slug, "--reason", "scripted");
    expect(suspended.code, suspended.stderr).toBe(0);
    expect(suspended.stdout).toContain(`suspended ${t.tenant.slug}; stopping 1 workspace(s)`);
    const again = await inProcess("tenant", "suspend", t.tenant.slug);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("CONFLICT");
    const resumed = await inProcess("tenant", "resume", t.tenant.slug);
    expect(resumed.code, resumed.stderr).toBe(0);

    const unconfirmed = await inProcess("tenant", "delete", t.tenant.slug);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toContain("confirm with --yes");
    expect(await getDb().tenant.count({ where: { id: t.tenant.id } })).toBe(1);

    const deleted = await berth("tenant", "delete", t.tenant.slug, "--yes", "--wait", "60", "--json");
    expect(deleted.code, deleted.stderr).toBe(0);
    const result = JSON.parse(deleted.stdout) as {
      receipt: { tenantSlug: string; deleted: { workspaces: unknown[] } };
    };
    expect(result.receipt.tenantSlug).toBe(t.tenant.slug);
    expect(result.receipt.deleted.workspaces).toEqual([
      expect.objectContaining({ workspaceId, outcome: "purged" }),
    ]);
    expect(await getDb().tenant.count({ where: { id: t.tenant.id } })).toBe(0);
    const gone = await inProcess("tenant", "show", t.tenant.slug);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("NOT_FOUND");
  });

  it("grants and revokes operators, never the last one", async () => {
    const runtime = createTestApiRuntime();
    const email = `op-${randomUUID().slice(0, 8)}@example.test`;
    await runtime.auth.api.signUpEmail({ body: { email, password: "correct-horse-battery", name: "Op" } });
    const granted = await inProcess("operator", "grant", email);
    expect(granted.code, granted.stderr).toBe(0);
    expect(granted.stdout).toContain(`${email} is now an operator`);
    const listed = JSON.parse((await inProcess("operator", "list", "--json")).stdout) as {
      email: string | null;
    }[];
    expect(listed.map((row) => row.email)).toContain(email);
    // Revoke every other operator of this database, then the last one is refused.
    for (const other of listed.filter((row) => row.email && row.email !== email)) {
      expect((await inProcess("operator", "revoke", other.email!)).code).toBe(0);
    }
    // Run for real: a refusal's exit code reaches the shell as a script sees it.
    const last = await berth("operator", "revoke", email);
    expect(last.code).toBe(1);
    expect(last.stderr).toContain(`CONFLICT: ${email} is the last operator`);
    const audit = JSON.parse((await inProcess("operator", "audit", "--json", "--limit", "5")).stdout) as {
      action: string;
      outcome: string;
      targetLabel: string;
    }[];
    expect(audit[0]).toMatchObject({ action: "operator.revoke", outcome: "failure", targetLabel: email });
  });
});
