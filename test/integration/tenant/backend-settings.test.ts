import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApiRuntime } from "@/server/api/context";
import { createCaller } from "@/server/api/root";
import { decryptSecret, secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { getDb } from "@/server/db";
import { tenantDriverSettings } from "@/server/modules/backend-settings/backend-settings.service";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { getRedis } from "@/server/redis";
import { contextFromHeaders, createTestApiRuntime } from "../api/support/api-test-runtime";
import { rejectionCode } from "../api/support/call-by-path";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * A tenant's own E2B team (`backendSettings.read` / `set` / `clear` of the `e2b` backend, whose driver
 * declares them): admins set it, the key is sealed at rest and only ever answered as a hint, every change is
 * audited without it, and the drivers' source unseals it for that tenant only (real Postgres and Redis).
 */
const apiKey = "e2b_THIS-KEY-MUST-NEVER-LEAK-0123456789abcd";

let runtime: ApiRuntime;
let tenant: TenantFixture;
let other: TenantFixture;
let owner: ReturnType<typeof createCaller>;
let ref: { tenantId: string };
let e2b: { tenantId: string; backend: string };
const secretKey = () => secretKeyFromBytes(getConfig().secrets.encryptionKey);

beforeAll(async () => {
  runtime = createTestApiRuntime();
  [tenant, other] = await Promise.all([
    createTenantFixture(runtime, "e2bset"),
    createTenantFixture(runtime, "e2both"),
  ]);
  owner = createCaller(contextFromHeaders(runtime, { cookie: tenant.owner.cookie }));
  ref = { tenantId: tenant.tenant.id };
  e2b = { ...ref, backend: "e2b" };
});

afterAll(async () => {
  await closeProcessBerth();
});

describe("tenant E2B settings", () => {
  it("stores the key sealed, answers only its hint, and the driver source unseals it for this tenant only", async () => {
    expect(await owner.backendSettings.read(e2b)).toMatchObject({ configured: false, secretHint: null });
    const saved = await owner.backendSettings.set({
      ...e2b,
      settings: { apiKey, template: "berth-big", minCpuCount: 4 },
    });
    expect(saved).toMatchObject({
      configured: true,
      secretHint: "…abcd",
      values: { template: "berth-big", minCpuCount: 4, domain: null },
    });
    expect(JSON.stringify(saved)).not.toContain(apiKey);
    expect(JSON.stringify(await owner.backendSettings.read(e2b))).not.toContain(apiKey);

    const row = await getDb().tenantBackendSettings.findUniqueOrThrow({
      where: { tenantId_backend: { tenantId: tenant.tenant.id, backend: "e2b" } },
    });
    expect(row.secretSealed).toMatch(/^v1\./);
    expect(JSON.stringify(row)).not.toContain(apiKey);
    expect(decryptSecret(secretKey(), row.secretSealed!, `tenant-backend:${tenant.tenant.id}:e2b`)).toBe(
      apiKey,
    );
    // Bound to this tenant: the ciphertext does not open as another tenant's.
    expect(() =>
      decryptSecret(secretKey(), row.secretSealed!, `tenant-backend:${other.tenant.id}:e2b`),
    ).toThrow();

    const source = tenantDriverSettings(secretKey(), processBerth().db);
    expect(await source.forTenant("e2b", tenant.tenant.id)).toEqual({
      apiKey,
      template: "berth-big",
      minCpuCount: 4,
    });
    expect(await source.forTenant("e2b", other.tenant.id)).toBeNull();
    expect(await source.forTenant("docker", tenant.tenant.id)).toBeNull();
    expect(await source.tenants("e2b")).toContain(tenant.tenant.id);
    expect(await source.tenants("e2b")).not.toContain(other.tenant.id);
  });

  it("patches: absent keeps, null puts the installation's back; bad values are refused", async () => {
    const set = (settings: Record<string, string | number | null>) =>
      owner.backendSettings.set({ ...e2b, settings });
    const kept = await set({ template: null, domain: "e2b.example.com" });
    expect(kept).toMatchObject({
      secretHint: "…abcd",
      values: { template: null, domain: "e2b.example.com", minCpuCount: 4 },
    });
    expect(await rejectionCode(set({ template: "has spaces" }))).toBe("BAD_REQUEST");
    expect(await rejectionCode(set({ apiKey: "short" }))).toBe("BAD_REQUEST");
    expect(await rejectionCode(set({ minCpuCount: "4" }))).toBe("BAD_REQUEST");
    // The API URL is no tenant setting (the workers would call a host of the tenant's choosing): dropped.
    await set({ apiUrl: "http://169.254.169.254/" });
    const keyless = await set({ apiKey: null });
    expect(keyless).toMatchObject({
      configured: true,
      secretHint: null,
      values: { domain: "e2b.example.com" },
    });
    expect(
      await tenantDriverSettings(secretKey(), processBerth().db).forTenant("e2b", tenant.tenant.id),
    ).toEqual({
      domain: "e2b.example.com",
      minCpuCount: 4,
    });
  });

  it("admins manage them, viewers cannot read them, and every change is audited without the key", async () => {
    const admin = createCaller(
      contextFromHeaders(runtime, { authorization: `Bearer ${tenant.adminKey.plainKey}` }),
    );
    const viewer = createCaller(
      contextFromHeaders(runtime, { authorization: `Bearer ${tenant.viewerKey.plainKey}` }),
    );
    expect((await admin.backendSettings.set({ backend: "e2b", settings: { apiKey } })).secretHint).toBe(
      "…abcd",
    );
    expect(await rejectionCode(viewer.backendSettings.read({ backend: "e2b" }))).toBe("FORBIDDEN");
    expect(
      await rejectionCode(viewer.backendSettings.set({ backend: "e2b", settings: { template: "x" } })),
    ).toBe("FORBIDDEN");
    // A backend whose driver declares no tenant settings has none to set.
    expect(
      await rejectionCode(owner.backendSettings.set({ ...ref, backend: "docker", settings: { x: "y" } })),
    ).toBe("NOT_FOUND");

    expect(await owner.backendSettings.clear({ ...e2b, confirm: true })).toMatchObject({
      configured: false,
    });
    expect(
      await tenantDriverSettings(secretKey(), processBerth().db).forTenant("e2b", tenant.tenant.id),
    ).toBeNull();

    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getConfig().redis.prefix,
    });
    const rows = await getDb().auditLog.findMany({
      where: { tenantId: tenant.tenant.id, action: { startsWith: "tenant.backend-settings." } },
    });
    expect(rows.map((row) => row.action).sort()).toEqual([
      "tenant.backend-settings.clear",
      ...Array<string>(5).fill("tenant.backend-settings.update"),
    ]);
    expect(JSON.stringify(rows)).not.toContain(apiKey);
    expect(JSON.stringify(rows)).toContain("set …abcd");
  });
});
