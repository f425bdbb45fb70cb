/**
 * The typed Node client over real HTTP: `createBerthClient({ url, apiKey })` against the same fetch
 * handler the Next route serves, with real API keys and a real database.
 */
import { TRPCClientError } from "@trpc/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REQUEST_ID_HEADER, type ApiRuntime } from "@/server/api/context";
import { handleTrpcRequest } from "@/server/api/http-handler";
import { type AppRouter } from "@/server/api/root";
import { createBerthClient } from "@/server/client/create-berth-client";
import { createTestApiRuntime } from "./support/api-test-runtime";
import { serveFetchHandler, type ServedHandler } from "./support/serve-fetch-handler";
import { createTenantFixture, type TenantFixture } from "./support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";

let runtime: ApiRuntime;
let server: ServedHandler;
let a: TenantFixture;
let b: TenantFixture;

async function clientError(call: Promise<unknown>): Promise<TRPCClientError<AppRouter>> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TRPCClientError);
  return error as TRPCClientError<AppRouter>;
}

beforeAll(async () => {
  runtime = createTestApiRuntime();
  server = await serveFetchHandler((req) => handleTrpcRequest(req, runtime));
  [a, b] = await Promise.all([createTenantFixture(runtime, "ha"), createTenantFixture(runtime, "hb")]);
});

afterAll(async () => {
  await server.close();
  await closeProcessBerth();
});

describe("createBerthClient over HTTP", () => {
  it("reads its own tenant with an API key, Dates intact through superjson", async () => {
    const client = createBerthClient({ url: server.url, apiKey: a.adminKey.plainKey });
    const overview = await client.tenant.overview.query({});
    expect(overview.tenant.id).toBe(a.tenant.id);
    expect(overview.tenant.createdAt).toBeInstanceOf(Date);
    expect(overview.counts).toMatchObject({ agents: 0, sessions: 0, workspaces: 0, members: 2, apiKeys: 2 });
    const me = await client.tenant.me.query();
    expect(me.tenants.map((t) => t.id)).toEqual([a.tenant.id]);
  });

  it("creates a key whose plain text is returned once and works at once, then revokes it", async () => {
    const admin = createBerthClient({ url: `${server.url}/api/trpc`, apiKey: a.adminKey.plainKey });
    // API keys act for their creator, so key management needs the owner's user behind the key.
    const created = await admin.apiKey.create.mutate({ name: "ci", role: "viewer" });
    expect(created.plainKey).toMatch(/^berth_/);
    const listed = await admin.apiKey.list.query({});
    expect(JSON.stringify(listed)).not.toContain(created.plainKey);

    const fresh = createBerthClient({ url: server.url, apiKey: created.plainKey });
    expect((await fresh.tenant.overview.query({})).role).toBe("viewer");
    await admin.apiKey.revoke.mutate({ apiKeyId: created.apiKey.id });
    expect((await clientError(fresh.tenant.overview.query({}))).data?.code).toBe("UNAUTHORIZED");
  });

  it("cannot reach another tenant: FORBIDDEN for B's tenant, NOT_FOUND for B's rows", async () => {
    const client = createBerthClient({ url: server.url, apiKey: a.adminKey.plainKey });
    expect((await clientError(client.tenant.overview.query({ tenantId: b.tenant.id }))).data?.code).toBe(
      "FORBIDDEN",
    );
    expect((await clientError(client.member.list.query({ tenantSlug: b.tenant.slug }))).data?.code).toBe(
      "FORBIDDEN",
    );
    expect((await clientError(client.apiKey.revoke.mutate({ apiKeyId: b.adminKey.id }))).data?.code).toBe(
      "NOT_FOUND",
    );
    const bClient = createBerthClient({ url: server.url, apiKey: b.adminKey.plainKey });
    expect((await bClient.apiKey.list.query({})).find((k) => k.id === b.adminKey.id)?.revokedAt).toBeNull();
  });

  it("returns zod issues and the request id in the error, and never a stack trace", async () => {
    const client = createBerthClient({
      url: server.url,
      apiKey: a.adminKey.plainKey,
      headers: { [REQUEST_ID_HEADER]: "client-trace-1" },
    });
    const error = await clientError(client.audit.list.query({ limit: 10_000 }));
    expect(error.data?.code).toBe("BAD_REQUEST");
    expect(error.data?.httpStatus).toBe(400);
    expect(error.data?.requestId).toBe("client-trace-1");
    expect(error.data?.issues?.map((i) => i.path.join("."))).toEqual(["limit"]);
    expect(error.data).not.toHaveProperty("stack");
  });

  it("answers 401 without a key and sets x-request-id on every response", async () => {
    const response = await fetch(`${server.url}/api/trpc/tenant.me`);
    expect(response.status).toBe(401);
    expect(response.headers.get(REQUEST_ID_HEADER)).toMatch(/^[0-9a-f-]{36}$/);
    const body = (await response.json()) as {
      error: { json: { message: string; data: { stack?: unknown } } };
    };
    expect(body.error.json.data.stack).toBeUndefined();
  });
});
