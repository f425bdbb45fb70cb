import { beforeAll, describe, expect, it } from "vitest";
import { resolveRequestPrincipal, resolveTenantScope } from "@/server/auth/resolve";
import { getDb } from "@/server/db";
import { getApiKey, listApiKeys } from "@/server/modules/api-key/api-key.data";
import {
  apiKeySecret,
  createApiKey,
  revokeApiKey,
  verifyApiKey,
} from "@/server/modules/api-key/api-key.service";
import { listAuditLogs } from "@/server/modules/audit/audit.data";
import { addTestMember, createTestTenant, expectAppError, testAuth, type TestTenant } from "../db/fixtures";
import { processBerth } from "@/server/composition/process-berth";

const bearer = (key: string) => new Headers({ authorization: `Bearer ${key}` });

describe("tenant API keys (better-auth API-key plugin) as Bearer tokens", () => {
  let t: TestTenant;
  beforeAll(async () => {
    t = await createTestTenant();
  });

  it("creates a key that is stored hashed, shown once, and listed without secrets", async () => {
    const { apiKey, plainKey } = await createApiKey(
      testAuth(),
      t.scope,
      { name: "ci", role: "member" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    expect(plainKey).toMatch(/^berth_[A-Za-z0-9]{20,}$/);
    expect(apiKey).toMatchObject({
      name: "ci",
      role: "member",
      createdByUserId: t.owner.id,
      lastUsedAt: null,
      revokedAt: null,
    });
    expect(apiKey.start && plainKey.startsWith(apiKey.start)).toBe(true);
    expect(Object.keys(apiKey)).not.toContain("key");

    const row = await getDb().apiKey.findFirstOrThrow({
      where: { id: apiKey.id },
      select: { key: true, tenantId: true },
    });
    expect(row.tenantId).toBe(t.tenantId);
    expect(row.key).not.toBe(plainKey);
    expect(row.key).not.toContain(plainKey.slice(6));
    expect((await listApiKeys(t.scope, undefined, processBerth().db)).map((k) => k.id)).toContain(apiKey.id);
    const audit = await listAuditLogs(t.scope, { action: "api-key.create" }, processBerth().db);
    expect(audit.items[0]).toMatchObject({
      targetId: apiKey.id,
      actorType: "user",
      actorId: t.owner.id,
      outcome: "success",
    });
  });

  it("verifies, records last use, and authenticates requests as the key's tenant", async () => {
    const { apiKey, plainKey } = await createApiKey(
      testAuth(),
      t.scope,
      { name: "client", role: "admin" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    const verified = await verifyApiKey(plainKey, processBerth().db);
    expect(verified).toEqual({
      apiKeyId: apiKey.id,
      tenantId: t.tenantId,
      role: "admin",
      createdByUserId: t.owner.id,
    });
    const firstUse = (await getApiKey(t.scope, apiKey.id, processBerth().db)).lastUsedAt;
    expect(firstUse).toBeInstanceOf(Date);

    const principal = await resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db);
    expect(principal).toMatchObject({ kind: "api_key", apiKeyId: apiKey.id, tenantId: t.tenantId });
    const secondUse = (await getApiKey(t.scope, apiKey.id, processBerth().db)).lastUsedAt;
    expect(secondUse!.getTime()).toBeGreaterThanOrEqual(firstUse!.getTime());

    const scope = await resolveTenantScope(principal!, t.slug, processBerth().db);
    expect(scope).toMatchObject({
      tenantId: t.tenantId,
      apiKeyId: apiKey.id,
      userId: t.owner.id,
      role: "admin",
    });
  });

  it("rejects unknown and malformed keys with UNAUTHORIZED", async () => {
    expect(await verifyApiKey("berth_not-a-real-key-at-all-000000000000", processBerth().db)).toBeNull();
    await expectAppError(
      resolveRequestPrincipal(testAuth(), bearer("berth_not-a-real-key-000000000000000"), processBerth().db),
      "UNAUTHORIZED",
    );
    await expectAppError(
      resolveRequestPrincipal(testAuth(), new Headers({ authorization: "Basic abc" }), processBerth().db),
      "UNAUTHORIZED",
    );
  });

  it("a revoked key stops working at once", async () => {
    const { apiKey, plainKey } = await createApiKey(
      testAuth(),
      t.scope,
      { name: "to-revoke" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    const principal = await resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db);
    const revoked = await revokeApiKey(t.scope, apiKey.id, processBerth().db);
    expect(revoked.revokedAt).toBeInstanceOf(Date);
    expect(await verifyApiKey(plainKey, processBerth().db)).toBeNull();
    await expectAppError(
      resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db),
      "UNAUTHORIZED",
    );
    // A principal resolved before the revocation cannot mint a scope afterwards either.
    await expectAppError(resolveTenantScope(principal!, t.tenantId, processBerth().db), "FORBIDDEN");
    expect((await listApiKeys(t.scope, undefined, processBerth().db)).map((k) => k.id)).not.toContain(
      apiKey.id,
    );
    expect(
      (await listApiKeys(t.scope, { includeRevoked: true }, processBerth().db)).map((k) => k.id),
    ).toContain(apiKey.id);
  });

  it("an expired or disabled key is refused but kept (the plugin would delete an expired one)", async () => {
    const { apiKey, plainKey } = await createApiKey(
      testAuth(),
      t.scope,
      { name: "expiring" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    await getDb().apiKey.update({
      where: { id: apiKey.id },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    await expectAppError(
      resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db),
      "UNAUTHORIZED",
    );
    expect(await verifyApiKey(plainKey, processBerth().db)).toBeNull();
    await getDb().apiKey.update({ where: { id: apiKey.id }, data: { expiresAt: null, enabled: false } });
    await expectAppError(
      resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db),
      "UNAUTHORIZED",
    );
    expect(await getDb().apiKey.count({ where: { id: apiKey.id } })).toBe(1);
  });

  it("records last use at most once a minute, so requests do not each write the key row", async () => {
    const { apiKey, plainKey } = await createApiKey(
      testAuth(),
      t.scope,
      { name: "busy" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    await resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db);
    const first = (await getApiKey(t.scope, apiKey.id, processBerth().db)).lastUsedAt!;
    await Promise.all(
      Array.from({ length: 5 }, () =>
        resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db),
      ),
    );
    expect((await getApiKey(t.scope, apiKey.id, processBerth().db)).lastUsedAt).toEqual(first);

    const stale = new Date(Date.now() - 2 * 60_000);
    await getDb().apiKey.update({ where: { id: apiKey.id }, data: { lastUsedAt: stale } });
    await resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db);
    expect((await getApiKey(t.scope, apiKey.id, processBerth().db)).lastUsedAt!.getTime()).toBeGreaterThan(
      stale.getTime(),
    );
  });

  it("a key only opens its own tenant", async () => {
    const other = await createTestTenant();
    const { plainKey } = await createApiKey(
      testAuth(),
      t.scope,
      { name: "scoped" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    const principal = await resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db);
    await expectAppError(resolveTenantScope(principal!, other.slug, processBerth().db), "FORBIDDEN");
    await expectAppError(resolveTenantScope(principal!, other.tenantId, processBerth().db), "FORBIDDEN");
  });

  it("roles: members and viewers cannot create keys, admins cannot mint owner keys, and a key is capped by its creator's role", async () => {
    const member = await addTestMember(t, "member");
    await expectAppError(
      createApiKey(
        testAuth(),
        member.scope,
        { name: "nope" },
        apiKeySecret(processBerth().config),
        processBerth().db,
      ),
      "FORBIDDEN",
    );
    const viewer = await addTestMember(t, "viewer");
    await expectAppError(
      createApiKey(
        testAuth(),
        viewer.scope,
        { name: "nope" },
        apiKeySecret(processBerth().config),
        processBerth().db,
      ),
      "FORBIDDEN",
    );

    const admin = await addTestMember(t, "admin");
    // Owner keys do not exist (the schema refuses them), and an admin cannot exceed their own role.
    await expectAppError(
      createApiKey(
        testAuth(),
        admin.scope,
        { name: "owner-key", role: "owner" as never },
        apiKeySecret(processBerth().config),
        processBerth().db,
      ),
      "BAD_REQUEST",
    );
    const { plainKey } = await createApiKey(
      testAuth(),
      admin.scope,
      { name: "admin-key", role: "admin" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    // The creator is demoted: the key now acts as a viewer.
    await getDb().membership.updateMany({
      where: { tenantId: t.tenantId, userId: admin.userId },
      data: { role: "viewer" },
    });
    const principal = await resolveRequestPrincipal(testAuth(), bearer(plainKey), processBerth().db);
    expect((await resolveTenantScope(principal!, t.tenantId, processBerth().db)).role).toBe("viewer");
    // The creator leaves: the key no longer opens the tenant.
    await getDb().membership.deleteMany({ where: { tenantId: t.tenantId, userId: admin.userId } });
    await expectAppError(resolveTenantScope(principal!, t.tenantId, processBerth().db), "FORBIDDEN");
  });
});
