import { parseInput } from "@/server/shared/parse-input";
import type { BerthAuth } from "@/server/auth/auth";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import {
  findTenantBySlug,
  findUserByEmail,
  getTenant,
  getTenantCounts,
  insertTenantWithOwner,
  listTenantsOfUser,
} from "@/server/modules/tenant/tenant.data";
import {
  type CreateTenantWithOwnerResult,
  type TCreateTenantWithOwnerInput,
  ZCreateTenantWithOwnerInput,
} from "@/server/modules/tenant/tenant.types";
import type { Db } from "@/server/db";

/**
 * Creates a tenant and its owner (used by `npm start`'s first-run bootstrap and by admin tooling).
 * Idempotent: when the slug exists it returns that tenant and creates nothing; an existing user
 * with the email becomes the owner of a new tenant without their password being touched.
 */
export async function createTenantWithOwner(
  auth: BerthAuth,
  rawInput: TCreateTenantWithOwnerInput,
  db: Db,
): Promise<CreateTenantWithOwnerResult> {
  const input = parseInput(ZCreateTenantWithOwnerInput, rawInput);
  const existing = await findTenantBySlug(input.slug, db);
  if (existing) return { tenant: existing, owner: await requireUser(input.email, db), created: false };

  const user = await findUserByEmail(input.email, db);
  // better-auth's own hasher (scrypt), so its sign-in endpoint verifies what we store.
  const passwordHash = user ? null : await (await auth.$context).password.hash(input.password);
  const result = await insertTenantWithOwner(
    {
      tenantName: input.tenantName,
      slug: input.slug,
      owner: user
        ? { userId: user.id }
        : { email: input.email, name: input.name, passwordHash: passwordHash ?? "" },
    },
    db,
  );
  if (result) return { ...result, created: true };
  // Another bootstrap created the slug (or the email) between our check and our insert.
  const tenant = await findTenantBySlug(input.slug, db);
  if (!tenant)
    throw new AppError("CONFLICT", `could not create tenant ${input.slug}`, { userMessage: "Please retry." });
  return { tenant, owner: await requireUser(input.email, db), created: false };
}

async function requireUser(email: string, db: Db): Promise<{ id: string; email: string; name: string }> {
  const user = await findUserByEmail(email, db);
  if (!user) {
    throw new AppError("CONFLICT", `tenant exists but no user ${email}`, {
      userMessage: "The tenant already exists with a different owner.",
    });
  }
  return user;
}

/** The tenant a scope is in. */
export function readTenant(scope: TenantScope, db: Db) {
  return getTenant(scope, db);
}

/** The dashboard overview: the tenant and its counts (agents, sessions, workspaces, members, keys). */
export async function readTenantOverview(scope: TenantScope, db: Db) {
  const [tenant, counts] = await Promise.all([getTenant(scope, db), getTenantCounts(scope, db)]);
  return { tenant, counts };
}

/** The tenants a signed-in user belongs to, with their role in each. */
export function listUserTenants(userId: string, db: Db) {
  return listTenantsOfUser(userId, db);
}
