import { randomBytes } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";

/**
 * 20261206220000_backend_kind_text turns every column of the WorkspaceBackendKind enum into text (the driver
 * registry is the single source of kinds) and drops the enum: rows stored before it keep their values.
 * A scratch database gets every migration before it, rows of each kind, then this one.
 */
const MIGRATION = "20261206220000_backend_kind_text";
const migrations = path.resolve(import.meta.dirname, "..", "..", "..", "prisma", "migrations");
const serverUrl = process.env.DATABASE_URL!;
const database = `berth_kinds_${randomBytes(4).toString("hex")}`;

function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function withClient<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

const sqlOf = (name: string) => readFile(path.join(migrations, name, "migration.sql"), "utf8");

beforeAll(async () => {
  await withClient(serverUrl, (client) => client.query(`CREATE DATABASE "${database}"`));
});

afterAll(async () => {
  await withClient(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`));
});

it("keeps every stored kind as text and drops the enum", async () => {
  const names = (await readdir(migrations, { withFileTypes: true }))
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  expect(names).toContain(MIGRATION);
  await withClient(withDatabase(serverUrl, database), async (client) => {
    for (const name of names.filter((each) => each < MIGRATION)) await client.query(await sqlOf(name));
    await client.query(`
      INSERT INTO tenants (id, name, slug, updated_at, default_backend) VALUES ('t1', 'T', 't1', now(), 'docker');
      INSERT INTO agents (id, tenant_id, name, updated_at, backend) VALUES ('a1', 't1', 'A', now(), 'e2b'),
        ('a2', 't1', 'B', now(), NULL);
      INSERT INTO workspaces (id, tenant_id, backend_kind, isolation_policy, updated_at) VALUES
        ('w1', 't1', 'local', 'PER_AGENT', now()), ('w2', 't1', 'kubernetes', 'PER_AGENT', now());
      INSERT INTO tenant_backend_settings (tenant_id, backend, updated_at) VALUES ('t1', 'e2b', now());
    `);
    await client.query(await sqlOf(MIGRATION));

    const read = async (sql: string) =>
      (await client.query<{ kind: string | null }>(sql)).rows.map((row) => row.kind);
    expect(await read("SELECT default_backend AS kind FROM tenants")).toEqual(["docker"]);
    expect(await read("SELECT backend AS kind FROM agents ORDER BY id")).toEqual(["e2b", null]);
    expect(await read("SELECT backend_kind AS kind FROM workspaces ORDER BY id")).toEqual([
      "local",
      "kubernetes",
    ]);
    expect(await read("SELECT backend AS kind FROM tenant_backend_settings")).toEqual(["e2b"]);
    const types = await client.query<{ column: string; type: string }>(`
      SELECT table_name || '.' || column_name AS column, data_type AS type FROM information_schema.columns
       WHERE (table_name, column_name) IN (('tenants', 'default_backend'), ('agents', 'backend'),
             ('workspaces', 'backend_kind'), ('tenant_backend_settings', 'backend'))`);
    expect(types.rows.map((row) => row.type)).toEqual(["text", "text", "text", "text"]);
    const enums = await client.query("SELECT 1 FROM pg_type WHERE typname = 'WorkspaceBackendKind'");
    expect(enums.rowCount).toBe(0);
    // A kind no migration ever listed is stored as it is.
    await client.query("UPDATE workspaces SET backend_kind = 'throwaway' WHERE id = 'w2'");
    expect(await read("SELECT backend_kind AS kind FROM workspaces WHERE id = 'w2'")).toEqual(["throwaway"]);
  });
});
