import { beforeAll, describe, expect, it } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { resolveRequestPrincipal, resolveTenantScope, reverifyTenantScope } from "@/server/auth/resolve";
import { getDb } from "@/server/db";
import { removeMember } from "@/server/modules/member/member.data";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import {
  addTestMember,
  createTestTenant,
  expectAppError,
  TEST_BASE_URL,
  testAuth,
  uniqueSlug,
  type TestTenant,
} from "../db/fixtures";
import { processBerth } from "@/server/composition/process-berth";

function signIn(
  auth: ReturnType<typeof testAuth>,
  baseUrl: string,
  email: string,
  password: string,
): Promise<Response> {
  return auth.handler(
    new Request(`${baseUrl}/api/auth/sign-in/email`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: baseUrl },
      body: JSON.stringify({ email, password }),
    }),
  );
}

/** `name=value` of the session cookie from a Set-Cookie header. */
function sessionCookie(response: Response): string {
  const header = response.headers.get("set-cookie") ?? "";
  const match = /((?:__Secure-)?berth\.session_token=[^;]+)/.exec(header);
  if (!match?.[1]) throw new Error(`no session cookie in ${header}`);
  return match[1];
}

describe("email/password sign-in and cookie sessions through better-auth's handler", () => {
  let t: TestTenant;
  beforeAll(async () => {
    t = await createTestTenant();
  });

  it("bootstrap is idempotent and the password is stored hashed, not in plain text", async () => {
    const again = await createTenantWithOwner(
      testAuth(),
      {
        tenantName: "ignored",
        slug: t.slug,
        email: t.owner.email,
        password: "another-password",
        name: "ignored",
      },
      processBerth().db,
    );
    expect(again).toMatchObject({ created: false, tenant: { id: t.tenantId }, owner: { id: t.owner.id } });
    const account = await getDb().authAccount.findFirstOrThrow({
      where: { userId: t.owner.id },
      select: { password: true, providerId: true },
    });
    expect(account.providerId).toBe("credential");
    expect(account.password).not.toContain(t.owner.password);
    expect(account.password?.length).toBeGreaterThan(40);
    expect(await getDb().membership.count({ where: { tenantId: t.tenantId } })).toBe(1);
  });

  it("signs in with the right password and sets an HttpOnly, SameSite=Lax cookie (not Secure over http)", async () => {
    const response = await signIn(testAuth(), TEST_BASE_URL, t.owner.email, t.owner.password);
    expect(response.status).toBe(200);
    const setCookie = response.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/berth\.session_token=/);
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Lax/i);
    expect(setCookie).not.toMatch(/;\s*Secure/i);

    const principal = await resolveRequestPrincipal(
      testAuth(),
      new Headers({ cookie: sessionCookie(response) }),
      processBerth().db,
    );
    expect(principal).toMatchObject({ kind: "user", userId: t.owner.id, email: t.owner.email });
    const scope = await resolveTenantScope(principal!, t.slug, processBerth().db);
    expect(scope).toMatchObject({ tenantId: t.tenantId, userId: t.owner.id, apiKeyId: null, role: "owner" });
  });

  it("marks the cookie Secure (with the __Secure- prefix) when served over https", async () => {
    const httpsBase = "https://berth.example";
    const auth = createAuth({
      secret: "another-test-secret".padEnd(40, "y"),
      baseUrl: httpsBase,
      prisma: getDb(),
    });
    const response = await signIn(auth, httpsBase, t.owner.email, t.owner.password);
    expect(response.status).toBe(200);
    const setCookie = response.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/__Secure-berth\.session_token=/);
    expect(setCookie).toMatch(/;\s*Secure/i);
    expect(setCookie).toMatch(/HttpOnly/i);
  });

  it("rejects a wrong password with 401 and no cookie", async () => {
    const response = await signIn(testAuth(), TEST_BASE_URL, t.owner.email, "wrong-password");
    expect(response.status).toBe(401);
    expect(response.headers.get("set-cookie") ?? "").not.toMatch(/session_token=[^;]/);
  });

  it("returns no principal without credentials, and none for a forged cookie", async () => {
    expect(await resolveRequestPrincipal(testAuth(), new Headers(), processBerth().db)).toBeNull();
    expect(
      await resolveRequestPrincipal(
        testAuth(),
        new Headers({ cookie: "berth.session_token=forged.value" }),
        processBerth().db,
      ),
    ).toBeNull();
  });

  it("signing out ends the cookie session", async () => {
    const cookie = sessionCookie(await signIn(testAuth(), TEST_BASE_URL, t.owner.email, t.owner.password));
    const out = await testAuth().handler(
      new Request(`${TEST_BASE_URL}/api/auth/sign-out`, {
        method: "POST",
        headers: { cookie, origin: TEST_BASE_URL },
      }),
    );
    expect(out.status).toBe(200);
    expect(await resolveRequestPrincipal(testAuth(), new Headers({ cookie }), processBerth().db)).toBeNull();
  });

  it("a signed-in user gets FORBIDDEN for a tenant they do not belong to, and for unknown tenants", async () => {
    const other = await createTestTenant();
    const principal = await resolveRequestPrincipal(
      testAuth(),
      new Headers({
        cookie: sessionCookie(await signIn(testAuth(), TEST_BASE_URL, t.owner.email, t.owner.password)),
      }),
      processBerth().db,
    );
    await expectAppError(resolveTenantScope(principal!, other.slug, processBerth().db), "FORBIDDEN");
    await expectAppError(resolveTenantScope(principal!, other.tenantId, processBerth().db), "FORBIDDEN");
    await expectAppError(resolveTenantScope(principal!, uniqueSlug("nope"), processBerth().db), "FORBIDDEN");
  });

  it("re-verification picks up role changes and removal from the database", async () => {
    const viewer = await addTestMember(t, "viewer");
    expect(viewer.scope.role).toBe("viewer");
    await getDb().membership.updateMany({
      where: { tenantId: t.tenantId, userId: viewer.userId },
      data: { role: "admin" },
    });
    expect((await reverifyTenantScope(viewer.scope, processBerth().db)).role).toBe("admin");
    await removeMember(t.scope, viewer.userId, processBerth().db);
    await expectAppError(reverifyTenantScope(viewer.scope, processBerth().db), "FORBIDDEN");
  });
});
