import { randomBytes } from "node:crypto";
import type { BerthAuth } from "@/server/auth/auth";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import { hasAnyTenant } from "./bootstrap.data";

export type BootstrapResult =
  | { created: false }
  | {
      created: true;
      tenantSlug: string;
      email: string;
      /** Shown once, never stored in plain text. */ password: string;
    };

/**
 * First run of an installation: when no tenant exists, creates one with an admin (owner) whose password
 * is random. The caller prints it once; only better-auth's hash is stored. Later runs do nothing.
 */
export async function bootstrapFirstTenant(
  auth: BerthAuth,
  options: { email: string; tenantName?: string; slug?: string },
): Promise<BootstrapResult> {
  if (await hasAnyTenant()) return { created: false };
  const password = randomBytes(12).toString("base64url");
  const result = await createTenantWithOwner(auth, {
    tenantName: options.tenantName ?? "Default",
    slug: options.slug ?? "default",
    email: options.email,
    password,
    name: "Admin",
  });
  // Lost a race against another first start: that one printed the credentials.
  if (!result.created) return { created: false };
  return { created: true, tenantSlug: result.tenant.slug, email: result.owner.email, password };
}
