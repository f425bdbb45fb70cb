import { getDb, type DbClient } from "@/server/db";

/** True once any tenant exists: the installation has been bootstrapped (or set up by hand). */
export async function hasAnyTenant(db: DbClient = getDb()): Promise<boolean> {
  return (await db.tenant.findFirst({ select: { id: true } })) !== null;
}
