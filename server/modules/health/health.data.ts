import type { DbClient } from "@/server/db";

/** Round-trips one trivial query (proves connectivity and a usable pool, not schema state). */
export async function pingDatabase(db: DbClient): Promise<void> {
  await db.$queryRaw`SELECT 1`;
}
