import { spawn } from "node:child_process";
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
 * `prisma migrate deploy` against `url` (prisma.config.ts reads DATABASE_URL and points Prisma at the
 * offline Wasm schema-engine shim). Output is captured and shown only on failure.
 */
export async function migrateDeploy(url: string): Promise<void> {
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
}
