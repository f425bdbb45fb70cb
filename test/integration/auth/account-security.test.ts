/**
 * Account and key hygiene over the real tRPC HTTP handler: changing a password ends the user's other
 * sessions; a key minted by a key is revoked with it unless minted `detached`; audit rows carry the caller's
 * address and user agent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiRuntime } from "@/server/api/context";
import { handleTrpcRequest } from "@/server/api/http-handler";
import { createCaller } from "@/server/api/root";
import { resolveRequestPrincipal } from "@/server/auth/resolve";
import { createBerthClient } from "@/server/client/create-berth-client";
import { getConfig } from "@/server/config/config";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { getRedis } from "@/server/redis";
import { contextFromHeaders, createTestApiRuntime } from "../api/support/api-test-runtime";
import { rejectionCode } from "../api/support/call-by-path";
import { serveFetchHandler, type ServedHandler } from "../api/support/serve-fetch-handler";
import {
  createTenantFixture,
  FIXTURE_PASSWORD,
  signInCookie,
  type TenantFixture,
} from "../api/support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

let runtime: ApiRuntime;
let server: ServedHandler;
let t: TenantFixture;

beforeAll(async () => {
  runtime = createTestApiRuntime();
  server = await serveFetchHandler((req) => handleTrpcRequest(req, runtime));
  t = await createTenantFixture(runtime, "acct");
});

afterAll(async () => {
  await server.close();
  await closeProcessBerth();
});

const principalOf = (cookie: string) =>
  resolveRequestPrincipal(runtime.auth, new Headers({ cookie }), processBerth().db);

describe("account.changePassword", () => {
  it("ends every other session of the user and hands the caller a fresh one", async () => {
    const email = t.viewer.email;
    const laptop = await signInCookie(runtime.auth, email, FIXTURE_PASSWORD);
    const stolen = await signInCookie(runtime.auth, email, FIXTURE_PASSWORD);
    const context = contextFromHeaders(runtime, { cookie: laptop });
    const result = await createCaller(context).account.changePassword({
      currentPassword: FIXTURE_PASSWORD,
      newPassword: "a-brand-new-password",
    });
    expect(result).toEqual({ changed: true, otherSessionsEnded: true });
    expect(await principalOf(stolen)).toBeNull();
    expect(await principalOf(t.viewer.cookie)).toBeNull();
    const fresh = context
      .resHeaders!.getSetCookie()
      .map((line) => line.split(";")[0]!)
      .join("; ");
    expect(await principalOf(fresh)).toMatchObject({ kind: "user", email });
    await expect(signInCookie(runtime.auth, email, FIXTURE_PASSWORD)).rejects.toThrow();
    await expect(signInCookie(runtime.auth, email, "a-brand-new-password")).resolves.toMatch(/session_token/);
  });

  it("changes nothing for a wrong current password, and is not for API keys", async () => {
    const cookie = await signInCookie(runtime.auth, t.owner.email, FIXTURE_PASSWORD);
    const other = await signInCookie(runtime.auth, t.owner.email, FIXTURE_PASSWORD);
    const caller = createCaller(contextFromHeaders(runtime, { cookie }));
    expect(
      await rejectionCode(
        caller.account.changePassword({ currentPassword: "nope", newPassword: "x".repeat(12) }),
      ),
    ).toBe("BAD_REQUEST");
    expect(await principalOf(other)).toMatchObject({ kind: "user" });
    const keyCaller = createCaller(
      contextFromHeaders(runtime, { authorization: `Bearer ${t.adminKey.plainKey}` }),
    );
    expect(
      await rejectionCode(
        keyCaller.account.changePassword({ currentPassword: FIXTURE_PASSWORD, newPassword: "x".repeat(12) }),
      ),
    ).toBe("BAD_REQUEST");
  });
});

describe("account.changePassword to the same password", () => {
  it("is refused with a 400 saying why, and changes nothing (other sessions stay)", async () => {
    const cookie = await signInCookie(runtime.auth, t.owner.email, FIXTURE_PASSWORD);
    const other = await signInCookie(runtime.auth, t.owner.email, FIXTURE_PASSWORD);
    const caller = createCaller(contextFromHeaders(runtime, { cookie }));
    const refusal = caller.account.changePassword({
      currentPassword: FIXTURE_PASSWORD,
      newPassword: FIXTURE_PASSWORD,
    });
    await expect(refusal).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(refusal).rejects.toThrow("must differ from the current password");
    expect(await principalOf(other)).toMatchObject({ kind: "user" });
    await expect(signInCookie(runtime.auth, t.owner.email, FIXTURE_PASSWORD)).resolves.toMatch(
      /session_token/,
    );
  });
});

describe("keys minted by keys", () => {
  it("revokes every key a key minted, transitively, unless minted detached", async () => {
    const client = (key: string) => createBerthClient({ url: server.url, apiKey: key });
    const parent = await client(t.adminKey.plainKey).apiKey.create.mutate({ name: "parent", role: "admin" });
    const child = await client(parent.plainKey).apiKey.create.mutate({ name: "child", role: "admin" });
    const grandchild = await client(child.plainKey).apiKey.create.mutate({
      name: "grandchild",
      role: "member",
    });
    const detached = await client(parent.plainKey).apiKey.create.mutate({
      name: "ci",
      role: "member",
      detached: true,
    });
    expect(child.apiKey.mintedByApiKeyId).toBe(parent.apiKey.id);
    expect(grandchild.apiKey.mintedByApiKeyId).toBe(child.apiKey.id);
    expect(detached.apiKey.mintedByApiKeyId).toBeNull();

    const owner = createCaller(contextFromHeaders(runtime, { cookie: t.owner.cookie }));
    await owner.apiKey.revoke({ tenantId: t.tenant.id, apiKeyId: parent.apiKey.id });
    for (const gone of [parent, child, grandchild]) {
      const error = await client(gone.plainKey)
        .tenant.overview.query({})
        .then(
          () => null,
          (e: { data?: { code?: string } }) => e,
        );
      expect(error?.data?.code).toBe("UNAUTHORIZED");
    }
    expect((await client(detached.plainKey).tenant.overview.query({})).tenant.id).toBe(t.tenant.id);
    const audit = await owner.audit.list({ tenantId: t.tenant.id, limit: 200 });
    const revoke = audit.items.find(
      (row) => row.action === "api-key.revoke" && row.targetId === parent.apiKey.id,
    );
    expect((revoke?.details as { alsoRevoked?: string[] }).alsoRevoked?.sort()).toEqual(
      [child.apiKey.id, grandchild.apiKey.id].sort(),
    );
    const created = audit.items.find(
      (row) => row.action === "api-key.create" && row.targetId === detached.apiKey.id,
    );
    expect(created?.details).toMatchObject({ detached: true, mintedByApiKeyId: null });
  });
});

describe("audit rows", () => {
  it("record the caller's address and user agent, written at once or through the buffer", async () => {
    const client = createBerthClient({
      url: server.url,
      apiKey: t.adminKey.plainKey,
      headers: { "user-agent": "audit-probe/2.0", "x-forwarded-for": "203.0.113.77" },
    });
    const key = await client.apiKey.create.mutate({ name: "audited", role: "viewer" }); // appendAuditLog
    await client.agent.create.mutate({
      name: `audited-${Date.now()}`,
      modelConfig: { provider: "openai", model: "m" },
    }); // buffered
    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getConfig().redis.prefix,
    });
    const rows = (await client.audit.list.query({ limit: 50 })).items;
    const direct = rows.find((row) => row.action === "api-key.create" && row.targetId === key.apiKey.id);
    const buffered = rows.find((row) => row.action === "agent.create");
    for (const row of [direct, buffered]) {
      expect(row).toMatchObject({ ip: "203.0.113.77", userAgent: "audit-probe/2.0" });
    }
  });
});
