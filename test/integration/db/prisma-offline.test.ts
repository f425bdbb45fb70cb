import { type ChildProcessByStdio, spawn } from "node:child_process";
import type { Readable } from "node:stream";
import { randomBytes } from "node:crypto";
import { cp, mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * Regression test for Prisma 7 offline (docs/prisma-offline.md): the real CLI, with the Wasm
 * schema-engine shim, against a real PostgreSQL. It runs in a throw-away copy of the project's
 * Prisma files (prisma.config.ts + prisma/), the way a clean clone has them, so `generate` never
 * rewrites the checkout's generated client while other tests use it.
 *
 * Any engine download attempt would hit PRISMA_ENGINES_MIRROR=http://127.0.0.1:9 and fail, so a
 * green run also proves that nothing is fetched from binaries.prisma.sh, and that every command that
 * needs a schema engine (deploy, status, diff, dev, pull, reset) ran the shim.
 */
const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");
const prismaCli = path.join(repoRoot, "node_modules", "prisma", "build", "index.js");
const serverUrl = process.env.DATABASE_URL ?? "postgresql://root@localhost/postgres?host=/var/run/postgresql";

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

type CliResult = { code: number | null; output: string };

function prisma(cwd: string, args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete childEnv[k];
    else childEnv[k] = v;
  }
  // prisma.config.ts must set the hook itself, as it does for a developer's plain `npx prisma`.
  delete childEnv.PRISMA_SCHEMA_ENGINE_BINARY;
  childEnv.PRISMA_ENGINES_MIRROR = "http://127.0.0.1:9";
  childEnv.PRISMA_HIDE_UPDATE_MESSAGE = "1";
  return new Promise((resolve, reject) => {
    const child: ChildProcessByStdio<null, Readable, Readable> = spawn(
      process.execPath,
      [prismaCli, ...args],
      {
        cwd,
        env: childEnv,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, output }));
  });
}

async function withClient<T>(url: string, run: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

// Each CLI call takes 2-5 s on an idle machine, far more on a loaded CI box; hence the long limits.
describe("Prisma 7 CLI offline through the Wasm schema-engine shim", { timeout: 240_000 }, () => {
  let project: string;
  const database = `berth_offline_${randomBytes(4).toString("hex")}`;
  const databaseUrl = withDatabase(serverUrl, database);
  const run = (args: string[], env: Record<string, string | undefined> = { DATABASE_URL: databaseUrl }) =>
    prisma(project, args, env);

  beforeAll(async () => {
    project = await mkdtemp(path.join(tmpdir(), "berth-prisma-offline-"));
    await cp(path.join(repoRoot, "prisma"), path.join(project, "prisma"), { recursive: true });
    await cp(path.join(repoRoot, "prisma.config.ts"), path.join(project, "prisma.config.ts"));
    await cp(path.join(repoRoot, "package.json"), path.join(project, "package.json"));
    await symlink(path.join(repoRoot, "node_modules"), path.join(project, "node_modules"), "dir");
  });

  afterAll(async () => {
    await withClient(withDatabase(serverUrl, "postgres"), (c) =>
      c.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`),
    ).catch(() => undefined);
    if (project) await rm(project, { recursive: true, force: true });
  });

  it("generate works with no DATABASE_URL (postinstall on a clean clone) and includes every schema file", async () => {
    const result = await run(["generate"], { DATABASE_URL: undefined });
    expect(result.output).toContain("Generated Prisma Client");
    expect(result.code).toBe(0);
    const client = await readFile(path.join(project, "generated", "prisma", "client.ts"), "utf8");
    // One model from each file of the multi-file schema folder.
    for (const model of ["Tenant", "ApiKey", "Agent", "Session", "WorkspaceEvent", "AuditLog"]) {
      expect(client).toContain(`export type ${model} = `);
    }
  });

  it("migrate deploy creates the database and applies every migration", async () => {
    const result = await run(["migrate", "deploy"]);
    expect(result.output).toMatch(/successfully applied|No pending migrations/);
    expect(result.code).toBe(0);
    const applied = await withClient(databaseUrl, (c) =>
      c.query<{ n: string }>("SELECT count(*) AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL"),
    );
    expect(Number(applied.rows[0]?.n)).toBeGreaterThan(0);
  });

  it("migrate status says up to date", async () => {
    const result = await run(["migrate", "status"]);
    expect(result.output).toContain("Database schema is up to date");
    expect(result.code).toBe(0);
  });

  it("migrations match the schema (no drift)", async () => {
    const vsSchema = await run([
      "migrate",
      "diff",
      "--from-migrations",
      "prisma/migrations",
      "--to-schema",
      "prisma",
      "--exit-code",
    ]);
    expect(vsSchema.output).toContain("No difference detected");
    expect(vsSchema.code).toBe(0);
  });

  it("migrate dev (shadow database path) finds nothing to do", async () => {
    const result = await run(["migrate", "dev"]);
    expect(result.output).toMatch(/Already in sync|in sync with your schema/);
    expect(result.code).toBe(0);
  });

  it('introspection reads "char" catalog columns (CHECK constraints; NOT NULL constraints on PostgreSQL 18)', async () => {
    await withClient(databaseUrl, (c) =>
      c.query("ALTER TABLE tenants ADD CONSTRAINT tenants_slug_not_empty CHECK (slug <> '')"),
    );
    const pulled = await run(["db", "pull", "--print"]);
    expect(pulled.output).toContain('@@map("tenants")');
    expect(pulled.code).toBe(0);
  });

  // One CLI run for both sides of the check against the live database: the diff shows the drift added
  // here (exit code 2: the check can fail) and nothing else, which is what an empty diff before the drift
  // proved (a difference the shim's introspection made up, or the CHECK constraint above, which Prisma does
  // not model, would show here too).
  it("the live database matches the migrations except for drift added to it, which is detected", async () => {
    await withClient(databaseUrl, (c) => c.query("ALTER TABLE tenants ADD COLUMN drifted int"));
    const result = await run([
      "migrate",
      "diff",
      "--from-migrations",
      "prisma/migrations",
      "--to-config-datasource",
      "--exit-code",
    ]);
    expect(result.code, result.output).toBe(2);
    const changes = result.output.split("\n").filter((line) => /^\s*\[.\] /.test(line));
    expect(changes, result.output).toEqual([
      "[*] Changed the `tenants` table",
      "  [+] Added column `drifted`",
    ]);
  });

  it("migrate reset --force rebuilds the database: data and drift gone, trigger back", async () => {
    await withClient(databaseUrl, (c) =>
      c.query("INSERT INTO tenants (id, name, slug, updated_at) VALUES ('t1', 'T', 't1', now())"),
    );
    const result = await run(["migrate", "reset", "--force"]);
    expect(result.code).toBe(0);
    await withClient(databaseUrl, async (c) => {
      expect((await c.query("SELECT 1 FROM tenants")).rowCount).toBe(0);
      const columns = await c.query(
        "SELECT 1 FROM information_schema.columns WHERE table_name = 'tenants' AND column_name = 'drifted'",
      );
      expect(columns.rowCount).toBe(0);
      const trigger = await c.query(
        "SELECT 1 FROM pg_trigger WHERE tgname = 'sessions_workspace_id_immutable'",
      );
      expect(trigger.rowCount).toBe(1);
    });
  });
});
