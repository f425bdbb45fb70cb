/**
 * Hostile input over real HTTP, through the same fetch handler the Next route `app/api/trpc` serves (and the
 * workspace route handlers), with real API keys, Postgres, Redis and a real local workspace provisioned by
 * in-process workers: strings Postgres cannot store, oversized bodies and batches, unknown model settings,
 * over-long paths, host paths in errors, readable validation errors, PER_USER workspaces across tenants.
 */
import { randomUUID } from "node:crypto";
import { TRPCClientError } from "@trpc/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as download } from "@/app/api/workspaces/[id]/files/download/route";
import { POST as uploadSkill } from "@/app/api/workspaces/[id]/skills/route";
import { type ApiRuntime } from "@/server/api/context";
import { handleTrpcRequest } from "@/server/api/http-handler";
import { TRPC_REQUEST_LIMITS } from "@/server/api/request-limits";
import { type AppRouter } from "@/server/api/root";
import { resolveTenantScope } from "@/server/auth/resolve";
import { createBerthClient, type BerthClient } from "@/server/client/create-berth-client";
import { getDb } from "@/server/db";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { addMember } from "@/server/modules/member/member.data";
import { assignSessionWorkspaceId } from "@/server/modules/session/session.policy";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { createTestApiRuntime } from "./support/api-test-runtime";
import { allProcedurePaths, procedureType } from "./support/call-by-path";
import { errorOf, rawTrpcCall } from "./support/raw-trpc";
import { serveFetchHandler, type ServedHandler } from "./support/serve-fetch-handler";
import { createTenantFixture, type TenantFixture } from "./support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { installTestBerth } from "@/test/setup/test-berth";
import { processBerth } from "@/server/composition/process-berth";

let h: WorkspaceHarness;
let runtime: ApiRuntime;
let server: ServedHandler;
let a: TenantFixture;
let b: TenantFixture;
let client: BerthClient;
/** Every response body this file saw, checked for host paths at the end. */
const seenBodies: string[] = [];

beforeAll(async () => {
  h = await startWorkspaceHarness();
  await installTestBerth({ engine: h.engine });
  runtime = createTestApiRuntime();
  server = await serveFetchHandler((req) => handleTrpcRequest(req, runtime));
  [a, b] = await Promise.all([createTenantFixture(runtime, "hia"), createTenantFixture(runtime, "hib")]);
  client = createBerthClient({ url: server.url, apiKey: a.adminKey.plainKey });
});

afterAll(async () => {
  await closeProcessBerth();
  await server.close();
  await h.close();
});

const auth = (t: TenantFixture) => ({ authorization: `Bearer ${t.adminKey.plainKey}` });

async function call(path: string, input: unknown, type = procedureType(path)) {
  const answer = await rawTrpcCall(server.url, path, type, input, auth(a));
  seenBodies.push(answer.text);
  return answer;
}

async function clientError(promise: Promise<unknown>): Promise<TRPCClientError<AppRouter>> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TRPCClientError);
  const typed = error as TRPCClientError<AppRouter>;
  seenBodies.push(JSON.stringify({ message: typed.message, data: typed.data }));
  return typed;
}

const newAgent = (overrides: Record<string, unknown> = {}) =>
  client.agent.create.mutate({
    name: `hostile-${randomUUID().slice(0, 8)}`,
    modelConfig: { baseUrl: "http://127.0.0.1:9/v1", model: "m" },
    ...overrides,
  });

describe("strings Postgres cannot store", () => {
  it.each([
    ["a NUL byte", "x\u0000y"],
    ["an unpaired surrogate", "x\uD800y"],
  ])("%s anywhere in the input of ANY procedure is a 400 naming the field", async (_label, bad) => {
    for (const path of allProcedurePaths()) {
      const answer = await call(path, { tenantId: a.tenant.id, probe: { deep: [bad] } });
      // A subscription's answer is an event stream (200) whose first event is the error.
      const status = procedureType(path) === "subscription" ? 200 : 400;
      expect({ path, status: answer.status }).toEqual({ path, status });
      const error = errorOf(answer);
      expect(error.data.code).toBe("BAD_REQUEST");
      expect(error.message).toMatch(/^probe\.deep\.0: must (not contain a NUL|be valid Unicode)/);
    }
  });

  it("rejects one in an object key as well, and the typed client sees a BAD_REQUEST", async () => {
    const answer = await call("agent.list", { tenantId: a.tenant.id, ["k\u0000"]: 1 });
    expect(answer.status).toBe(400);
    const error = await clientError(newAgent({ description: "fine\u0000not" }));
    expect(error.data?.code).toBe("BAD_REQUEST");
    expect(error.message).toBe("description: must not contain a NUL character (U+0000)");
    // chat.cancel with such a session id once poisoned the audit buffer for every tenant.
    expect((await clientError(client.chat.cancel.mutate({ sessionId: "x\u0000y" }))).data?.code).toBe(
      "BAD_REQUEST",
    );
  });

  it("chat.send (a streamed mutation) refuses one before the turn starts, with a typed error", async () => {
    const agent = await newAgent();
    const { sessionId } = await client.session.create.mutate({ agentId: agent.id });
    const failure = client.chat.send.mutate({ sessionId, message: "hello\u0000world" }).then(
      () => null,
      (error: unknown) => error,
    );
    const error = (await failure) as TRPCClientError<AppRouter>;
    expect(error).toBeInstanceOf(TRPCClientError);
    expect(error.data?.code).toBe("BAD_REQUEST");
    expect(error.message).toMatch(/^message: must not contain a NUL/);
    expect(await getDb().chatMessage.count({ where: { sessionId } })).toBe(0);
  });

  it("route handlers refuse one in a query or path parameter with the same 400", async () => {
    const upload = await uploadSkill(
      new Request(`http://berth.test/api/workspaces/w/skills?agentId=a%00b`, {
        method: "POST",
        headers: auth(a),
        body: new FormData(),
      }),
      { params: Promise.resolve({ id: "w" }) },
    );
    expect(upload.status).toBe(400);
    const uploadBody = (await upload.json()) as { error: { code: string; message: string } };
    expect(uploadBody.error).toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringMatching(/^agentId: /),
    });
    const fetched = await download(
      new Request(`http://berth.test/api/workspaces/w%00x/files/download?path=a&token=t`),
      { params: Promise.resolve({ id: "w\u0000x" }) },
    );
    expect(fetched.status).toBe(400);
  });
});

describe("request size", () => {
  const hugeAgent = (bytes: number) =>
    JSON.stringify({
      json: { tenantId: a.tenant.id, name: "huge", modelConfig: { model: "m", padding: "x".repeat(bytes) } },
    });

  it("refuses a body over the limit with a typed 413, also when it streams without a Content-Length", async () => {
    const bytes = TRPC_REQUEST_LIMITS.maxBodyBytes + 1024;
    const declared = await fetch(`${server.url}/api/trpc/agent.create`, {
      method: "POST",
      headers: { ...auth(a), "content-type": "application/json" },
      body: hugeAgent(bytes),
    });
    expect(declared.status).toBe(413);
    const declaredBody = (await declared.json()) as { error: { json: { data: { code: string } } } };
    expect(declaredBody.error.json.data.code).toBe("PAYLOAD_TOO_LARGE");

    const payload = new TextEncoder().encode(hugeAgent(bytes));
    const chunked = await fetch(`${server.url}/api/trpc/agent.create`, {
      method: "POST",
      headers: { ...auth(a), "content-type": "application/json" },
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < payload.length; offset += 64 * 1024) {
            controller.enqueue(payload.subarray(offset, offset + 64 * 1024));
          }
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(await getDb().agent.count({ where: { tenantId: a.tenant.id, name: "huge" } })).toBe(0);
  });

  it("caps a batch at the limit; the typed client splits a larger one itself", async () => {
    const calls = TRPC_REQUEST_LIMITS.maxBatchSize + 1;
    const paths = Array.from({ length: calls }, () => "agent.list").join(",");
    const inputs = Object.fromEntries(
      Array.from({ length: calls }, (_, index) => [index, { json: { tenantId: a.tenant.id } }]),
    );
    const response = await fetch(
      `${server.url}/api/trpc/${paths}?batch=1&input=${encodeURIComponent(JSON.stringify(inputs))}`,
      { headers: auth(a) },
    );
    expect(response.status).toBe(400);
    expect(await response.text()).toMatch(/Batch call exceeds maximum size/);

    const pages = await Promise.all(Array.from({ length: calls + 5 }, () => client.agent.list.query({})));
    expect(pages).toHaveLength(calls + 5);
  });

  it("model settings are strict: known keys only, each bounded", async () => {
    const unknownKey = await clientError(
      client.agent.create.mutate({
        name: "extra-keys",
        modelConfig: { model: "m", padding: "x" } as { model: string },
      }),
    );
    expect(unknownKey.data?.code).toBe("BAD_REQUEST");
    expect(unknownKey.message).toBe('modelConfig: unknown key "padding"');
    const tooLong = await clientError(newAgent({ modelConfig: { model: "m".repeat(201) } }));
    expect(tooLong.data?.fieldErrors).toEqual({ "modelConfig.model": ["must be at most 200 characters"] });
    const agent = await newAgent();
    const patch = await clientError(
      client.agent.update.mutate({
        agentId: agent.id,
        patch: { modelConfig: { extra: 1 } as { model?: string } },
      }),
    );
    expect(patch.message).toBe('patch.modelConfig: unknown key "extra"');
  });
});

describe("validation errors", () => {
  it("reach the typed client as one readable message plus field errors, not a JSON dump", async () => {
    const error = await clientError(
      client.agent.create.mutate({
        name: "n".repeat(65),
        modelConfig: { model: "m", temperature: "hot" as unknown as number },
      }),
    );
    expect(error.data?.code).toBe("BAD_REQUEST");
    expect(error.message).toBe(
      "name: must be at most 64 characters; modelConfig.temperature: expected a number",
    );
    expect(error.data?.fieldErrors).toEqual({
      name: ["must be at most 64 characters"],
      "modelConfig.temperature": ["expected a number"],
    });
    expect(error.data?.issues?.map((issue) => issue.path.join("."))).toEqual([
      "name",
      "modelConfig.temperature",
    ]);
    expect(error.message).not.toMatch(/[[{]/);
  });
});

describe("paths", () => {
  let workspaceId: string;

  beforeAll(async () => {
    const agent = await newAgent();
    ({ workspaceId } = await client.session.create.mutate({ agentId: agent.id }));
  });

  it.each([
    ["a name over 255 bytes", "x".repeat(300), /longer than 255 bytes/],
    [
      "a path over 4096 bytes",
      Array.from({ length: 40 }, () => "d".repeat(120)).join("/"),
      /the path is too long/,
    ],
  ])("%s is a 400 with a clear message, not a 500", async (_label, longPath, message) => {
    for (const path of ["workspace.files.list", "workspace.files.read", "workspace.files.downloadToken"]) {
      const answer = await call(path, { tenantId: a.tenant.id, workspaceId, path: longPath.slice(0, 4096) });
      expect({ path, status: answer.status }).toEqual({ path, status: 400 });
      expect(errorOf(answer).message).toMatch(message);
    }
  });

  it("errors never carry the host's base dir or repo path", async () => {
    const escape = await call("workspace.files.read", {
      tenantId: a.tenant.id,
      workspaceId,
      path: "../../../etc/passwd",
    });
    expect(escape.status).toBe(403);
    expect(errorOf(escape).message).toBe("Error: path ../../../etc/passwd is outside the workspace");
    await call("workspace.files.list", { tenantId: a.tenant.id, workspaceId, path: "no/such/dir" });
    await call("workspace.files.read", { tenantId: a.tenant.id, workspaceId, path: "." });
    for (const body of seenBodies) {
      expect(body).not.toContain(h.basedir);
      expect(body).not.toContain(process.cwd());
    }
  });
});

describe("PER_USER workspaces across tenants", () => {
  it("the same user gets their own workspace in each tenant they belong to; a failed bind leaves no session", async () => {
    // A's owner is also a member of B, with a key of their own there.
    await addMember(b.ownerScope, { userId: a.owner.id, role: "admin" }, processBerth().db);
    const ownerInB = await resolveTenantScope(
      { kind: "user", userId: a.owner.id, email: a.owner.email, name: "A owner", authSessionId: "t" },
      b.tenant.id,
      processBerth().db,
    );
    const keyInB = await createApiKey(
      runtime.auth,
      ownerInB,
      { name: "member in B", role: "member" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    const clientInB = createBerthClient({ url: server.url, apiKey: keyInB.plainKey });
    const bAdmin = createBerthClient({ url: server.url, apiKey: b.adminKey.plainKey });

    const agentA = await newAgent({ isolationPolicy: "PER_USER" });
    const agentB = await bAdmin.agent.create.mutate({
      name: `per-user-${randomUUID().slice(0, 8)}`,
      modelConfig: { model: "m" },
      isolationPolicy: "PER_USER",
    });
    const inA = await client.session.create.mutate({ agentId: agentA.id });
    const inB = await clientInB.session.create.mutate({ agentId: agentB.id });
    expect(inB.workspaceId).not.toBe(inA.workspaceId);
    expect((await clientInB.workspace.get.query({ workspaceId: inB.workspaceId })).state).toBe("PENDING");

    // Make the binding fail: another tenant (A) already holds the id a new member of B would get.
    await addMember(b.ownerScope, { userId: a.viewer.id, role: "admin" }, processBerth().db);
    const memberScope = await resolveTenantScope(
      { kind: "user", userId: a.viewer.id, email: a.viewer.email, name: "A viewer", authSessionId: "t" },
      b.tenant.id,
      processBerth().db,
    );
    const takenId = assignSessionWorkspaceId("PER_USER", memberScope, agentB.id);
    await upsertWorkspaceBinding(
      a.ownerScope,
      {
        id: takenId,
        backendKind: "local",
        isolationPolicy: "PER_USER",
        agentId: null,
        userId: null,
      },
      { config: processBerth().config.quotas },
      processBerth().db,
    );
    const memberKey = await createApiKey(
      runtime.auth,
      memberScope,
      { name: "m", role: "member" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    const memberClient = createBerthClient({ url: server.url, apiKey: memberKey.plainKey });
    expect((await clientError(memberClient.session.create.mutate({ agentId: agentB.id }))).data?.code).toBe(
      "CONFLICT",
    );
    expect(await getDb().session.count({ where: { tenantId: b.tenant.id, userId: a.viewer.id } })).toBe(0);
  });
});
