import { z } from "zod";

/**
 * A tenant's own security policy. `stdioMcpMinRole`: the lowest role that may declare stdio MCP servers (a
 * stdio server is a command Berth runs in the workspace), owner/admin by default; an owner may open it to
 * members. Viewers never can.
 */
export const ZTenantPolicyDTO = z.object({
  stdioMcpMinRole: z.enum(["owner", "admin", "member", "viewer"]),
});
export type TenantPolicyDTO = z.infer<typeof ZTenantPolicyDTO>;
