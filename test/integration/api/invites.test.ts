import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as acceptRoute } from "@/app/api/invitations/accept/route";
import { createCaller } from "@/server/api/root";
import { listMembers } from "@/server/modules/member/member.data";
import { acceptInvite, hashInviteToken, inviteLinkSecret } from "@/server/modules/member/invite.service";
import { getDb } from "@/server/db";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import {
  createTenant,
  resumeTenant,
  suspendTenant,
} from "@/server/modules/operator/tenant-lifecycle.service";
import { rejectionCode } from "./support/call-by-path";
import { contextFromHeaders, createTestApiRuntime } from "./support/api-test-runtime";
import { createTenantFixture, signInCookie, type TenantFixture } from "./support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Invitation links: an admin makes one for a role, the person accepts it with a name, email and password
 * (a new account that signs in with them and holds exactly that role); the link works once, can be
 * revoked, and its token is never stored or listed.
 */
const runtime = createTestApiRuntime();
let t: TenantFixture;
let owner: ReturnType<typeof createCaller>;
const ref = () => ({ tenantId: t.tenant.id });

beforeAll(async () => {
  t = await createTenantFixture(runtime, "invites");
  owner = createCaller(contextFromHeaders(runtime, { cookie: t.owner.cookie }));
});

afterAll(async () => {
  await closeProcessBerth();
});

const uniqueEmail = (label: string) => `${label}-${Math.random().toString(36).slice(2, 10)}@example.test`;

describe("invitations", () => {
  it("lets the invited person create an account with the given role and sign in; the link then stops working", async () => {
    const { invite, token } = await owner.invite.create({ ...ref(), role: "member", note: "for Grace" });
    expect(invite).toMatchObject({ role: "member", note: "for Grace", state: "pending" });
    expect(token).toMatch(/^berth_inv_/);
    // Only the hash is stored, and the list does not carry the token.
    const stored = await getDb().inviteLink.findFirstOrThrow({ where: { id: invite.id } });
    expect(stored.tokenHash).toBe(hashInviteToken(token));
    expect(JSON.stringify(await owner.invite.list(ref()))).not.toContain(token);

    const email = uniqueEmail("grace");
    const accepted = await acceptInvite(
      runtime.auth,
      {
        token,
        name: "Grace",
        email,
        password: "s3cret-passw0rd",
      },
      processBerth().db,
    );
    expect(accepted).toEqual({ tenantSlug: t.tenant.slug, email });
    const member = (await listMembers(t.ownerScope, processBerth().db)).find((m) => m.email === email);
    expect(member).toMatchObject({ name: "Grace", role: "member" });

    const cookie = await signInCookie(runtime.auth, email, "s3cret-passw0rd");
    const grace = createCaller(contextFromHeaders(runtime, { cookie }));
    expect((await grace.tenant.overview(ref())).role).toBe("member");

    expect((await owner.invite.list(ref())).find((i) => i.id === invite.id)).toMatchObject({
      state: "accepted",
      acceptedByEmail: email,
    });
    await expect(
      acceptInvite(
        runtime.auth,
        {
          token,
          name: "Again",
          email: uniqueEmail("again"),
          password: "s3cret-passw0rd",
        },
        processBerth().db,
      ),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("refuses a revoked link, an existing account's email and a weak password, creating nobody", async () => {
    const { invite, token } = await owner.invite.create({ ...ref(), role: "viewer" });
    await expect(
      acceptInvite(
        runtime.auth,
        { token, name: "Taken", email: t.owner.email, password: "s3cret-passw0rd" },
        processBerth().db,
      ),
    ).rejects.toMatchObject({ code: "CONFLICT" });
    await expect(
      acceptInvite(
        runtime.auth,
        { token, name: "Weak", email: uniqueEmail("weak"), password: "short" },
        processBerth().db,
      ),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await owner.invite.revoke({ ...ref(), inviteId: invite.id });
    const email = uniqueEmail("late");
    await expect(
      acceptInvite(
        runtime.auth,
        { token, name: "Late", email, password: "s3cret-passw0rd" },
        processBerth().db,
      ),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(await getDb().user.findFirst({ where: { email } })).toBeNull();
    expect(await rejectionCode(owner.invite.revoke({ ...ref(), inviteId: invite.id }))).toBe("NOT_FOUND");
  });

  it("never lets an invitation grant owner, nor a viewer make one", async () => {
    expect(await rejectionCode(owner.invite.create({ ...ref(), role: "owner" as "admin" }))).toBe(
      "BAD_REQUEST",
    );
    const viewer = createCaller(contextFromHeaders(runtime, { cookie: t.viewer.cookie }));
    expect(await rejectionCode(viewer.invite.create({ ...ref(), role: "viewer" }))).toBe("FORBIDDEN");
    expect(await rejectionCode(viewer.invite.list(ref()))).toBe("FORBIDDEN");
  });
});

/** POST /api/invitations/accept as the browser sends it: the body text exactly as given. */
async function acceptOverHttp(body: string | Uint8Array<ArrayBuffer>) {
  const response = await acceptRoute(
    new Request("http://localhost:3000/api/invitations/accept", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    }),
  );
  return {
    status: response.status,
    body: (await response.json()) as {
      error?: { code: string; message: string; details?: { reason?: string } };
    },
  };
}

describe("idempotency keys", () => {
  it("makes one invitation per key and admin, even for two requests at once, and shows the same working link", async () => {
    const idempotencyKey = crypto.randomUUID();
    const keyed = { ...ref(), role: "member" as const, note: `once ${idempotencyKey}`, idempotencyKey };
    const [first, second] = await Promise.all([owner.invite.create(keyed), owner.invite.create(keyed)]);
    const again = await owner.invite.create(keyed);
    expect(second).toEqual(first);
    expect(again).toEqual(first);
    expect(await getDb().inviteLink.count({ where: { tenantId: t.tenant.id, note: keyed.note } })).toBe(1);
    // The link shown again is the stored one (only its hash is in the database) and it works.
    const stored = await getDb().inviteLink.findFirstOrThrow({ where: { id: first.invite.id } });
    expect(stored.tokenHash).toBe(hashInviteToken(first.token));
    const email = uniqueEmail("keyed");
    await acceptInvite(
      runtime.auth,
      {
        token: first.token,
        name: "Keyed",
        email,
        password: "s3cret-passw0rd",
      },
      processBerth().db,
    );

    // Another key makes another invitation with another link.
    const other = await owner.invite.create({ ...keyed, idempotencyKey: crypto.randomUUID() });
    expect(other.invite.id).not.toBe(first.invite.id);
    expect(other.token).not.toBe(first.token);
  });
});

describe("accepting over HTTP", () => {
  it("refuses a name Postgres cannot store with a 400 naming the field, and the link still works", async () => {
    const { token } = await owner.invite.create({ ...ref(), role: "member" });
    const email = uniqueEmail("unsafe");
    const payload = (name: string) => JSON.stringify({ token, name, email, password: "s3cret-passw0rd" });
    // JSON.stringify writes both as escapes (`\u0000`, `\ud800`): what a client's JSON carries.
    for (const name of ["Gr\u0000ace", "Grace \ud800", "\udc00Grace"]) {
      const refused = await acceptOverHttp(payload(name));
      expect(refused.status, JSON.stringify(name)).toBe(400);
      expect(refused.body.error).toMatchObject({
        code: "BAD_REQUEST",
        message: expect.stringMatching(/^name: /),
      });
    }
    // A lone surrogate sent as raw (WTF-8) bytes is not UTF-8: refused, never turned into U+FFFD.
    const [head = "", tail = ""] = payload("Grace ~~~").split("~~~");
    const encoder = new TextEncoder();
    const bytes = new Uint8Array([...encoder.encode(head), 0xed, 0xa0, 0x80, ...encoder.encode(tail)]);
    const notUtf8 = await acceptOverHttp(bytes);
    expect(notUtf8.status).toBe(400);
    expect(notUtf8.body.error?.message).toMatch(/UTF-8/);
    expect(await getDb().user.findFirst({ where: { email } })).toBeNull();

    const accepted = await acceptOverHttp(payload("Grace"));
    expect(accepted.status).toBe(200);
    expect((await listMembers(t.ownerScope, processBerth().db)).find((m) => m.email === email)).toMatchObject(
      { name: "Grace" },
    );
  });

  it("refuses every invitation of a suspended tenant with FORBIDDEN tenant_suspended, and honours it on resume", async () => {
    const operator = cliOperatorActor();
    const created = await createTenant(
      operator,
      {
        name: "Suspended invites",
        slug: `susp-inv-${Date.now()}`,
      },
      inviteLinkSecret(processBerth().config),
      processBerth().db,
    );
    const ownerToken = created.ownerInvite.path.slice("/invite/".length);
    const other = await createTenantFixture(runtime, "invsusp");
    const otherOwner = createCaller(contextFromHeaders(runtime, { cookie: other.owner.cookie }));
    const { token: memberToken } = await otherOwner.invite.create({
      tenantId: other.tenant.id,
      role: "member",
    });
    await suspendTenant(operator, { tenantId: created.tenant.id }, processBerth().queues, processBerth().db);
    await suspendTenant(operator, { tenantId: other.tenant.id }, processBerth().queues, processBerth().db);

    const body = (token: string, email: string) =>
      JSON.stringify({ token, name: "Late", email, password: "s3cret-passw0rd" });
    const ownerEmail = uniqueEmail("susp-owner");
    const memberEmail = uniqueEmail("susp-member");
    for (const [token, email] of [
      [ownerToken, ownerEmail],
      [memberToken, memberEmail],
    ] as const) {
      const refused = await acceptOverHttp(body(token, email));
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({
        code: "FORBIDDEN",
        details: { reason: "tenant_suspended" },
      });
      expect(await getDb().user.findFirst({ where: { email } })).toBeNull();
    }

    // Not consumed: once the operator resumes the tenants, the same links work.
    await resumeTenant(operator, { tenantId: created.tenant.id }, processBerth().db);
    await resumeTenant(operator, { tenantId: other.tenant.id }, processBerth().db);
    expect((await acceptOverHttp(body(ownerToken, ownerEmail))).status).toBe(200);
    expect((await acceptOverHttp(body(memberToken, memberEmail))).status).toBe(200);
  });
});
