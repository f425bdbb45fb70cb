import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCaller } from "@/server/api/root";
import { disconnectDb } from "@/server/db";
import { listMembers } from "@/server/modules/member/member.data";
import { acceptInvite, hashInviteToken } from "@/server/modules/member/invite.service";
import { getDb } from "@/server/db";
import { rejectionCode } from "./support/call-by-path";
import { contextFromHeaders, createTestApiRuntime } from "./support/api-test-runtime";
import { createTenantFixture, signInCookie, type TenantFixture } from "./support/tenant-fixtures";

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
  await disconnectDb();
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
    const accepted = await acceptInvite(runtime.auth, {
      token,
      name: "Grace",
      email,
      password: "s3cret-passw0rd",
    });
    expect(accepted).toEqual({ tenantSlug: t.tenant.slug, email });
    const member = (await listMembers(t.ownerScope)).find((m) => m.email === email);
    expect(member).toMatchObject({ name: "Grace", role: "member" });

    const cookie = await signInCookie(runtime.auth, email, "s3cret-passw0rd");
    const grace = createCaller(contextFromHeaders(runtime, { cookie }));
    expect((await grace.tenant.overview(ref())).role).toBe("member");

    expect((await owner.invite.list(ref())).find((i) => i.id === invite.id)).toMatchObject({
      state: "accepted",
      acceptedByEmail: email,
    });
    await expect(
      acceptInvite(runtime.auth, {
        token,
        name: "Again",
        email: uniqueEmail("again"),
        password: "s3cret-passw0rd",
      }),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("refuses a revoked link, an existing account's email and a weak password, creating nobody", async () => {
    const { invite, token } = await owner.invite.create({ ...ref(), role: "viewer" });
    await expect(
      acceptInvite(runtime.auth, { token, name: "Taken", email: t.owner.email, password: "s3cret-passw0rd" }),
    ).rejects.toMatchObject({ code: "CONFLICT" });
    await expect(
      acceptInvite(runtime.auth, { token, name: "Weak", email: uniqueEmail("weak"), password: "short" }),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await owner.invite.revoke({ ...ref(), inviteId: invite.id });
    const email = uniqueEmail("late");
    await expect(
      acceptInvite(runtime.auth, { token, name: "Late", email, password: "s3cret-passw0rd" }),
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
