// The migrated template `npm test` clones its runs' databases from. Each Vitest run's global setup makes a
// fresh database; migrating each with `prisma migrate deploy` cost about 9 s (a Prisma CLI process and 21
// migrations), four times per `npm test` and all at once on a 2-core machine, while `CREATE DATABASE …
// TEMPLATE` copies the migrated files in about half a second.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { databaseName, dropDatabase, ensureDatabase, migrateDeploy, withDatabase } from "./database";

/** The variable that names the template to the runs' global setup (test/setup/services.ts). */
export const TEST_TEMPLATE_VARIABLE = "BERTH_TEST_TEMPLATE_DATABASE";

/** A new database on `serverUrl`'s server with every migration applied: only ever cloned, never used. */
export async function createTemplateDatabase(serverUrl: string): Promise<string> {
  const url = withDatabase(serverUrl, `berth_template_${randomBytes(4).toString("hex")}`);
  try {
    await ensureDatabase(url);
    await migrateDeploy(url);
  } catch (error) {
    await dropDatabase(url).catch(() => undefined);
    throw error;
  }
  return databaseName(url);
}

/** Creates `url`'s database as a copy of `template` (on the same server; nobody may be connected to it). */
export async function cloneDatabase(url: string, template: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase(url, "postgres") });
  await client.connect();
  try {
    await client.query(
      `CREATE DATABASE ${client.escapeIdentifier(databaseName(url))} TEMPLATE ${client.escapeIdentifier(template)}`,
    );
  } finally {
    await client.end();
  }
}
