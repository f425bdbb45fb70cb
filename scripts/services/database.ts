import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";

const repoRoot = path.resolve(import.meta.dirname, "..", "..");

/** The same server and credentials as `url`, another database. Keeps query parameters (?host=…). */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${encodeURIComponent(database)}`;
  return parsed.toString();
}

export function databaseName(url: string): string {
  return decodeURIComponent(new URL(url).pathname.replace(/^\//, "")) || "postgres";
}

async function withAdminClient<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  // Maintenance commands run from the `postgres` database of the same server.
  const client = new pg.Client({ connectionString: withDatabase(url, "postgres") });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/** Creates the database named in `url` unless it exists. */
export async function ensureDatabase(url: string): Promise<void> {
  const name = databaseName(url);
  await withAdminClient(url, async (client) => {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  });
}

export async function dropDatabase(url: string): Promise<void> {
  const name = databaseName(url);
  await withAdminClient(url, async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
  });
}

/**
 * Whether `url`'s database lacks one of prisma/migrations, or holds it with other SQL (Prisma's checksum is
 * the SHA-256 of migration.sql) or as a failed attempt. One query: cheaper by seconds of CPU than asking
 * `prisma migrate deploy`, which every `npm start` would otherwise pay to hear there is nothing to do.
 */
async function migrationsPending(url: string): Promise<boolean> {
  const folder = path.join(repoRoot, "prisma", "migrations");
  const expected = new Map<string, string>();
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const sql = await readFile(path.join(folder, entry.name, "migration.sql")).catch(() => undefined);
    if (sql) expected.set(entry.name, createHash("sha256").update(sql).digest("hex"));
  }
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
  } catch (error) {
    // A database that does not exist yet: `prisma migrate deploy` creates it, as it did before this check.
    if ((error as { code?: string }).code === "3D000") return true;
    throw error;
  }
  try {
    const table = await client.query<{ found: string | null }>(
      "SELECT to_regclass('_prisma_migrations')::text AS found",
    );
    if (!table.rows[0]?.found) return true;
    const applied = await client.query<{ migration_name: string; checksum: string; finished: boolean }>(
      `SELECT migration_name, checksum, finished_at IS NOT NULL AS finished
         FROM _prisma_migrations WHERE rolled_back_at IS NULL`,
    );
    const done = new Map(
      applied.rows.filter((row) => row.finished).map((row) => [row.migration_name, row.checksum]),
    );
    if (applied.rows.some((row) => !row.finished)) return true;
    return [...expected].some(([name, checksum]) => done.get(name) !== checksum);
  } finally {
    await client.end();
  }
}

/**
 * Brings `url`'s database up to prisma/migrations: `prisma migrate deploy` (prisma.config.ts reads
 * DATABASE_URL and points Prisma at the offline Wasm schema-engine shim) unless every migration is already
 * applied. Output is captured and shown only on failure. Says whether it applied anything.
 */
export async function migrateDeploy(url: string): Promise<"applied" | "up to date"> {
  if (!(await migrationsPending(url))) return "up to date";
  const cli = path.join(repoRoot, "node_modules", "prisma", "build", "index.js");
  const child = spawn(process.execPath, [cli, "migrate", "deploy"], {
    cwd: repoRoot,
    env: { ...process.env, DATABASE_URL: url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", resolve);
  });
  if (code !== 0) throw new Error(`prisma migrate deploy failed (exit ${code}):\n${output.trim()}`);
  return "applied";
}
