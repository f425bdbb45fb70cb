import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as uploadLibrarySkill } from "@/app/api/library/skills/route";
import { getDb } from "@/server/db";
import { apiKeySecret, createApiKey, verifyApiKey } from "@/server/modules/api-key/api-key.service";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { grantOperator } from "@/server/modules/operator/operator.service";
import { callerWith } from "../operator/support";
import { TEST_BASE_URL, createTestApiRuntime } from "./support/api-test-runtime";
import {
  createTenantFixture,
  FIXTURE_PASSWORD,
  signInCookie,
  type TenantFixture,
} from "./support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Every create the dashboard and typed clients make takes an idempotency key (issue: "every create is safe
 * against double submit"): the same key from the same caller returns the first result and makes one row,
 * also for two requests at once (the loser of the unique index answers with the winner's result); the same
 * key from two callers makes two rows. session.create and invite.create have their own tests.
 */
const runtime = createTestApiRuntime();
let t: TenantFixture;
let operators: [{ cookie: string }, { cookie: string }];

beforeAll(async () => {
  t = await createTenantFixture(runtime, "create-once");
  const operatorCookie = async (label: string) => {
    const email = `${label}-${randomUUID().slice(0, 8)}@example.test`;
    await runtime.auth.api.signUpEmail({ body: { email, password: FIXTURE_PASSWORD, name: label } });
    await grantOperator(cliOperatorActor(), { email }, processBerth().db);
    return { cookie: await signInCookie(runtime.auth, email, FIXTURE_PASSWORD) };
  };
  operators = [await operatorCookie("once-op-a"), await operatorCookie("once-op-b")];
});

afterAll(async () => {
  await closeProcessBerth();
});

type Headers = Record<string, string>;
const ownerHeaders = (): Headers => ({ cookie: t.owner.cookie });
const adminKeyHeaders = (): Headers => ({ authorization: `Bearer ${t.adminKey.plainKey}` });
const ref = () => ({ tenantId: t.tenant.id });

/**
 * The three checks for one create. `create(headers, key, label)` sends it (`label` names the row: the same
 * label for the same logical request); `rows(label)` counts what it made.
 */
async function checkCreate<R>(
  callers: [Headers, Headers],
  create: (headers: Headers, idempotencyKey: string, label: string) => Promise<R>,
  rows: (label: string) => Promise<number>,
): Promise<{ first: R }> {
  // The same key twice, one after the other: the first result again, one row.
  const key = randomUUID();
  const label = `once-${key.slice(0, 8)}`;
  const first = await create(callers[0], key, label);
  expect(await create(callers[0], key, label)).toEqual(first);
  expect(await rows(label)).toBe(1);

  // Two at once with one key: one row, both answers the same.
  const raceKey = randomUUID();
  const raceLabel = `race-${raceKey.slice(0, 8)}`;
  const [a, b] = await Promise.all([
    create(callers[0], raceKey, raceLabel),
    create(callers[0], raceKey, raceLabel),
  ]);
  expect(b).toEqual(a);
  expect(await rows(raceLabel)).toBe(1);

  // Two callers, one key: each gets its own row.
  const sharedKey = randomUUID();
  const [labelA, labelB] = [`mine-${sharedKey.slice(0, 8)}`, `theirs-${sharedKey.slice(0, 8)}`];
  await create(callers[0], sharedKey, labelA);
  await create(callers[1], sharedKey, labelB);
  expect([await rows(labelA), await rows(labelB)]).toEqual([1, 1]);
  return { first };
}

describe("idempotency keys of creates", () => {
  it("agent.create", async () => {
    await checkCreate(
      [ownerHeaders(), adminKeyHeaders()],
      (headers, idempotencyKey, name) =>
        callerWith(runtime, headers).agent.create({
          ...ref(),
          name,
          modelConfig: { provider: "openai", model: "m" },
          modelApiKey: "sk-test",
          idempotencyKey,
        }),
      (name) => getDb().agent.count({ where: { tenantId: t.tenant.id, name } }),
    );
  });

  it("operations.createWebhook shows the same secret again", async () => {
    const { first } = await checkCreate(
      [ownerHeaders(), adminKeyHeaders()],
      (headers, idempotencyKey, description) =>
        callerWith(runtime, headers).operations.createWebhook({
          ...ref(),
          url: "https://93.184.215.14/berth-create-once",
          description,
          events: ["turn.failed"],
          idempotencyKey,
        }),
      (description) => getDb().webhookEndpoint.count({ where: { tenantId: t.tenant.id, description } }),
    );
    expect(first.secret.length).toBeGreaterThan(16);
  });

  it("apiKey.create shows the same working key again", async () => {
    const { first } = await checkCreate(
      [ownerHeaders(), adminKeyHeaders()],
      (headers, idempotencyKey, name) =>
        callerWith(runtime, headers).apiKey.create({ ...ref(), name, role: "viewer", idempotencyKey }),
      (name) => getDb().apiKey.count({ where: { tenantId: t.tenant.id, name } }),
    );
    // The replayed key is the stored one (only its hash is kept) and authenticates.
    expect(await verifyApiKey(first.plainKey, processBerth().db)).toMatchObject({
      apiKeyId: first.apiKey.id,
      tenantId: t.tenant.id,
      role: "viewer",
    });
  });

  it("library.create (an MCP and a skill)", async () => {
    const entries = (name: string) => getDb().libraryEntry.count({ where: { tenantId: t.tenant.id, name } });
    await checkCreate(
      [ownerHeaders(), adminKeyHeaders()],
      (headers, idempotencyKey, name) =>
        callerWith(runtime, headers).library.create({
          ...ref(),
          kind: "MCP",
          declaration: {
            name,
            is_stateful: false,
            mcp_config: { type: "http_mcp", url: "http://127.0.0.1:9/mcp" },
          },
          idempotencyKey,
        }),
      entries,
    );
    await checkCreate(
      [ownerHeaders(), adminKeyHeaders()],
      (headers, idempotencyKey, name) =>
        callerWith(runtime, headers).library.create({
          ...ref(),
          kind: "SKILL",
          skill: { kind: "inline", name, description: "once", instructions: "once" },
          idempotencyKey,
        }),
      entries,
    );
  });

  it("POST /api/library/skills (the dashboard's skill upload)", async () => {
    // A folder as the dashboard sends it: a manifest of paths and sizes, then the files in that order.
    const upload = async (headers: Headers, idempotencyKey: string, name: string) => {
      const skillMd = `---\nname: ${name}\ndescription: once\n---\nDo it once.\n`;
      const path = `${name}/SKILL.md`;
      const form = new FormData();
      form.append("manifest", JSON.stringify({ entries: [{ path, size: Buffer.byteLength(skillMd) }] }));
      form.append("files", new Blob([skillMd]), path);
      const query = new URLSearchParams({ tenantId: t.tenant.id, idempotencyKey });
      const response = await uploadLibrarySkill(
        new Request(`${TEST_BASE_URL}/api/library/skills?${query.toString()}`, {
          method: "POST",
          headers: { ...headers, origin: TEST_BASE_URL },
          body: form,
        }),
      );
      expect(response.status, await response.clone().text()).toBe(201);
      return (await response.json()) as unknown;
    };
    // Routes authenticate cookies with the installation's secret, not the harness' runtime: two keys here.
    const other = await createApiKey(
      runtime.auth,
      t.ownerScope,
      { name: "second admin", role: "admin" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    const otherKeyHeaders = { authorization: `Bearer ${other.plainKey}` };
    await checkCreate([adminKeyHeaders(), otherKeyHeaders], upload, (name) =>
      getDb().libraryEntry.count({ where: { tenantId: t.tenant.id, name } }),
    );
  });

  it("operator.tenants.create shows the same owner link again", async () => {
    const { first } = await checkCreate(
      operators,
      (headers, idempotencyKey, slug) =>
        callerWith(runtime, headers).operator.tenants.create({ name: slug, slug, idempotencyKey }),
      (slug) => getDb().tenant.count({ where: { slug } }),
    );
    expect(await getDb().inviteLink.count({ where: { tenantId: first.tenant.id, role: "owner" } })).toBe(1);
    expect(first.ownerInvite.path).toMatch(/^\/invite\//);
  });

  it("operator.tenants.inviteOwner", async () => {
    await checkCreate(
      operators,
      (headers, idempotencyKey, note) =>
        callerWith(runtime, headers).operator.tenants.inviteOwner({ ...ref(), note, idempotencyKey }),
      (note) => getDb().inviteLink.count({ where: { tenantId: t.tenant.id, note } }),
    );
  });
});
