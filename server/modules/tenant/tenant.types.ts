import { z } from "zod";

const ZTenantSlug = z
  .string()
  .min(2)
  .max(48)
  .regex(/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/, "lowercase letters, digits and dashes");

export const ZTenantDTO = z.object({
  id: z.string(),
  name: z.string(),
  slug: z.string(),
  createdAt: z.date(),
});
export type TenantDTO = z.infer<typeof ZTenantDTO>;

/** What the overview page shows. */
export const ZTenantCountsDTO = z.object({
  agents: z.number().int(),
  sessions: z.number().int(),
  workspaces: z.number().int(),
  /** Workspaces not STOPPED, PURGED or FAILED. */
  activeWorkspaces: z.number().int(),
  members: z.number().int(),
  apiKeys: z.number().int(),
});
export type TenantCountsDTO = z.infer<typeof ZTenantCountsDTO>;

export const ZCreateTenantWithOwnerInput = z.object({
  tenantName: z.string().min(1).max(100),
  slug: ZTenantSlug,
  email: z.email().transform((e) => e.toLowerCase()),
  password: z.string().min(8).max(128),
  name: z.string().min(1).max(100),
});
export type TCreateTenantWithOwnerInput = z.input<typeof ZCreateTenantWithOwnerInput>;

export type CreateTenantWithOwnerResult = {
  tenant: TenantDTO;
  owner: { id: string; email: string; name: string };
  /** False when the tenant already existed (bootstrap is idempotent). */
  created: boolean;
};
