import { randomUUID } from "node:crypto";
import { type ApiRuntime } from "@/server/api/context";
import { type BerthAuth } from "@/server/auth/auth";
import { resolveTenantScope } from "@/server/auth/resolve";
import { type TenantRole } from "@/server/auth/roles";
import { type TenantScope } from "@/server/auth/scope";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { addMember } from "@/server/modules/member/member.data";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import { processBerth } from "@/server/composition/process-berth";

export const FIXTURE_PASSWORD = "correct-horse-battery-staple";

export type FixtureUser = { id: string; email: string; cookie: string };

export type TenantFixture = {
  tenant: { id: string; slug: string; name: string };
  owner: FixtureUser;
  viewer: FixtureUser;
  ownerScope: TenantScope;
  /** An admin-role API key (plain text), created by the owner. */
  adminKey: { id: string; plainKey: string };
  /** A viewer-role API key. */
  viewerKey: { id: string; plainKey: string };
};

/** Signs in through better-auth for real and returns the Cookie header a browser would send. */
export async function signInCookie(auth: BerthAuth, email: string, password: string): Promise<string> {
  const { headers } = await auth.api.signInEmail({ body: { email, password }, returnHeaders: true });
  const cookies = headers.getSetCookie().map((line) => line.split(";")[0]!);
  if (cookies.length === 0) throw new Error(`sign-in for ${email} set no cookie`);
  return cookies.join("; ");
}

export async function createUser(auth: BerthAuth, email: string, name: string): Promise<FixtureUser> {
  const { user } = await auth.api.signUpEmail({ body: { email, password: FIXTURE_PASSWORD, name } });
  return { id: user.id, email, cookie: await signInCookie(auth, email, FIXTURE_PASSWORD) };
}

async function createKey(auth: BerthAuth, scope: TenantScope, role: Exclude<TenantRole, "owner">) {
  const { apiKey, plainKey } = await createApiKey(
    auth,
    scope,
    { name: `${role} key`, role },
    apiKeySecret(processBerth().config),
    processBerth().db,
  );
  return { id: apiKey.id, plainKey };
}

/**
 * A tenant with an owner, a viewer and two API keys, created through the same services the app
 * uses. Names carry a random suffix so fixtures never collide across tests or runs.
 */
export async function createTenantFixture(runtime: ApiRuntime, label: string): Promise<TenantFixture> {
  const suffix = randomUUID().slice(0, 8);
  const ownerEmail = `owner-${label}-${suffix}@example.test`;
  const { tenant, owner } = await createTenantWithOwner(
    runtime.auth,
    {
      tenantName: `Tenant ${label.toUpperCase()} ${suffix}`,
      slug: `${label}-${suffix}`,
      email: ownerEmail,
      password: FIXTURE_PASSWORD,
      name: `Owner ${label}`,
    },
    processBerth().db,
  );
  const ownerScope = await resolveTenantScope(
    { kind: "user", userId: owner.id, email: owner.email, name: owner.name, authSessionId: "fixture" },
    tenant.id,
    processBerth().db,
  );
  const viewer = await createUser(runtime.auth, `viewer-${label}-${suffix}@example.test`, `Viewer ${label}`);
  await addMember(ownerScope, { userId: viewer.id, role: "viewer" }, processBerth().db);
  return {
    tenant: { id: tenant.id, slug: tenant.slug, name: tenant.name },
    owner: {
      id: owner.id,
      email: ownerEmail,
      cookie: await signInCookie(runtime.auth, ownerEmail, FIXTURE_PASSWORD),
    },
    viewer,
    ownerScope,
    adminKey: await createKey(runtime.auth, ownerScope, "admin"),
    viewerKey: await createKey(runtime.auth, ownerScope, "viewer"),
  };
}
