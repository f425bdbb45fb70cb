import { randomBytes } from "node:crypto";
import { createAuth, type BerthAuth } from "@/server/auth/auth";
import { resolveTenantScope } from "@/server/auth/resolve";
import type { TenantRole } from "@/server/auth/roles";
import { mintTenantScope, type TenantScope } from "@/server/auth/scope";
import { getDb } from "@/server/db";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Shared fixtures for the db/auth integration tests. They use the database of the integration
 * project's global setup (test/setup/services.ts sets DATABASE_URL). Names are random so files
 * never collide with each other or with earlier runs.
 */
export const TEST_BASE_URL = "http://berth.test";

export function uniqueSlug(prefix = "t"): string {
  return `${prefix}-${randomBytes(5).toString("hex")}`;
}

let sharedAuth: BerthAuth | undefined;
export function testAuth(): BerthAuth {
  sharedAuth ??= createAuth({
    secret: "test-secret-".padEnd(40, "x"),
    baseUrl: TEST_BASE_URL,
    prisma: getDb(),
    // Rejected keys and wrong passwords are expected here; keep better-auth from logging them as errors.
    log: () => {},
  });
  return sharedAuth;
}

export type TestTenant = {
  tenantId: string;
  slug: string;
  owner: { id: string; email: string; password: string };
  /** The owner's scope, minted through the real auth gate (membership read from the database). */
  scope: TenantScope;
};

export async function createTestTenant(auth: BerthAuth = testAuth()): Promise<TestTenant> {
  const slug = uniqueSlug();
  const password = `pw-${randomBytes(8).toString("hex")}`;
  const email = `${slug}@example.test`;
  const { tenant, owner } = await createTenantWithOwner(
    auth,
    {
      tenantName: `Tenant ${slug}`,
      slug,
      email,
      password,
      name: `Owner ${slug}`,
    },
    processBerth().db,
  );
  const scope = await resolveTenantScope(
    { kind: "user", userId: owner.id, email, name: owner.name, authSessionId: "fixture" },
    tenant.id,
    processBerth().db,
  );
  return { tenantId: tenant.id, slug, owner: { id: owner.id, email, password }, scope };
}

/** Adds a user with a password and the given role to a tenant; returns their user id and scope. */
export async function addTestMember(
  tenant: TestTenant,
  role: TenantRole,
  auth: BerthAuth = testAuth(),
): Promise<{ userId: string; email: string; password: string; scope: TenantScope }> {
  const email = `${uniqueSlug("m")}@example.test`;
  const password = `pw-${randomBytes(8).toString("hex")}`;
  const { user } = await auth.api.signUpEmail({ body: { email, password, name: email } });
  await getDb().membership.create({ data: { tenantId: tenant.tenantId, userId: user.id, role } });
  const scope = await resolveTenantScope(
    { kind: "user", userId: user.id, email, name: email, authSessionId: "fixture" },
    tenant.tenantId,
    processBerth().db,
  );
  return { userId: user.id, email, password, scope };
}

/** A scope with a chosen role without a membership row: only for tests of role checks. */
export function fakeScope(tenantId: string, role: TenantRole, userId: string | null = null): TenantScope {
  return mintTenantScope({ tenantId, userId, apiKeyId: null, role });
}

/** Awaits `promise` and asserts it rejected with an AppError of `code`. */
export async function expectAppError(promise: Promise<unknown>, code: string): Promise<void> {
  const outcome = await promise.then(
    () => ({ rejected: false as const }),
    (error: unknown) => ({ rejected: true as const, error }),
  );
  if (!outcome.rejected) throw new Error(`expected AppError ${code}, but the call succeeded`);
  const error = outcome.error as { name?: string; code?: string; message?: string };
  if (error?.name !== "AppError" || error.code !== code) {
    throw new Error(`expected AppError ${code}, got ${error?.name} ${error?.code}: ${error?.message}`);
  }
}
