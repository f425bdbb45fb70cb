import { randomBytes } from "node:crypto";
import type { BerthAuth } from "@/server/auth/auth";
import type { Db } from "@/server/db";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import { grantBootstrapOperator } from "@/server/modules/operator/operator.service";
import { findFirstOwnerOfOldestTenant, hasAnyOperator, hasAnyTenant } from "./bootstrap.data";

export type BootstrapResult =
  | { created: false }
  | {
      created: true;
      tenantSlug: string;
      email: string;
      /** Shown once, never stored in plain text. */ password: string;
    };

/**
 * First run of an installation: when no tenant exists, creates one with an admin (owner) whose password
 * is random, and makes that admin the installation's first operator. The caller prints it once; only
 * better-auth's hash is stored. Later runs only make sure an operator exists (an installation from before
 * operators gets its oldest tenant's first owner as one).
 */
export async function bootstrapFirstTenant(
  auth: BerthAuth,
  options: { email: string; tenantName?: string; slug?: string },
  db: Db,
): Promise<BootstrapResult> {
  if (await hasAnyTenant(db)) {
    await ensureAnOperator(db);
    return { created: false };
  }
  const password = randomBytes(12).toString("base64url");
  const result = await createTenantWithOwner(
    auth,
    {
      tenantName: options.tenantName ?? "Default",
      slug: options.slug ?? "default",
      email: options.email,
      password,
      name: "Admin",
    },
    db,
  );
  // Lost a race against another first start: that one printed the credentials.
  if (!result.created) return { created: false };
  await grantBootstrapOperator(result.owner.id, db);
  return { created: true, tenantSlug: result.tenant.slug, email: result.owner.email, password };
}

async function ensureAnOperator(db: Db): Promise<void> {
  if (await hasAnyOperator(db)) return;
  const userId = await findFirstOwnerOfOldestTenant(db);
  if (userId) await grantBootstrapOperator(userId, db);
}
