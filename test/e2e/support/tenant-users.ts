import { randomBytes } from "node:crypto";
import type { TenantRole } from "@/server/auth/roles";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { addMember } from "@/server/modules/member/member.data";
import type { E2eApp } from "./e2e-app";
import type { User } from "./signed-in";
import { processBerth } from "@/server/composition/process-berth";

/**
 * A new user of the file's tenant with `role`, signed up through better-auth as the sign-up page does, with
 * a password of their own: who a test signs in as besides the seeded admin.
 */
export async function addTenantUser(e2e: E2eApp, role: Exclude<TenantRole, "owner">): Promise<User> {
  const { app, tenant } = e2e;
  const user: User = {
    email: `${role}-${randomBytes(3).toString("hex")}-${tenant.slug}@example.test`,
    password: `pw-${randomBytes(9).toString("base64url")}`,
  };
  const auth = createAuth({
    secret: process.env.BERTH_AUTH_SECRET!,
    baseUrl: app.url,
    prisma: getDb(),
    log: () => {},
  });
  const { user: created } = await auth.api.signUpEmail({
    body: { email: user.email, password: user.password, name: role[0]!.toUpperCase() + role.slice(1) },
  });
  await addMember(tenant.scope, { userId: created.id, role }, processBerth().db);
  return user;
}
