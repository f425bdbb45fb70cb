import type { DbClient } from "@/server/db";

/** True once any tenant exists: the installation has been bootstrapped (or set up by hand). */
export async function hasAnyTenant(db: DbClient): Promise<boolean> {
  return (await db.tenant.findFirst({ select: { id: true } })) !== null;
}

export async function hasAnyOperator(db: DbClient): Promise<boolean> {
  return (await db.operator.findFirst({ select: { id: true } })) !== null;
}

/** The first owner of the oldest tenant: the admin the first start created, on an installation from before operators. */
export async function findFirstOwnerOfOldestTenant(db: DbClient): Promise<string | null> {
  const row = await db.membership.findFirst({
    where: { role: "owner" },
    orderBy: [{ tenant: { createdAt: "asc" } }, { createdAt: "asc" }],
    select: { userId: true },
  });
  return row?.userId ?? null;
}
