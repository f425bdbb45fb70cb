import { randomBytes } from "node:crypto";
import type { DbClient } from "@/server/db";

const ROW_KEY = "this";

/**
 * This installation's id: the one row of `installation`, created by whichever process asks first (API or
 * worker, on first start). Every process of the installation shares the database, so they all get the
 * same id; another installation (its own database) gets another. `ON CONFLICT DO NOTHING` makes concurrent
 * first starts agree on one row. Workspace drivers label shared-engine resources with it (issue 11).
 */
export async function ensureInstallationId(db: DbClient): Promise<string> {
  const candidate = `b${randomBytes(10).toString("hex")}`;
  await db.$executeRaw`
    INSERT INTO "installation" ("key", "installation_id") VALUES (${ROW_KEY}, ${candidate})
    ON CONFLICT ("key") DO NOTHING`;
  const row = await db.installation.findUniqueOrThrow({
    where: { key: ROW_KEY },
    select: { installationId: true },
  });
  return row.installationId;
}
