import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import { isRoleAtLeast } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { recordAudit } from "@/server/modules/audit/audit-buffer.service";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import { getTenantPolicy, updateTenantPolicy } from "./tenant-policy.data";
import type { TenantPolicyDTO } from "./tenant-policy.types";

export const ZTenantPolicyPatch = z
  .object({ stdioMcpMinRole: z.enum(["owner", "admin", "member"]).optional() })
  .strict();

export async function readTenantPolicy(scope: TenantScope): Promise<TenantPolicyDTO> {
  assertCan(scope, "tenant:read");
  return getTenantPolicy(scope);
}

export async function changeTenantPolicy(
  scope: TenantScope,
  raw: z.input<typeof ZTenantPolicyPatch>,
): Promise<TenantPolicyDTO> {
  assertCan(scope, "tenant:manage");
  const patch = parseInput(ZTenantPolicyPatch, raw);
  const policy = await updateTenantPolicy(scope, patch);
  await recordAudit(scope, {
    action: "tenant.policy.update",
    targetType: "tenant",
    targetId: scope.tenantId,
    outcome: "success",
    details: { ...policy },
  });
  return policy;
}

/** Throws FORBIDDEN (before anything is spawned) unless the tenant lets the caller's role declare stdio MCPs. */
export async function assertMayDeclareStdioMcp(scope: TenantScope): Promise<void> {
  const { stdioMcpMinRole } = await getTenantPolicy(scope);
  if (isRoleAtLeast(scope.role, stdioMcpMinRole)) return;
  throw new AppError("FORBIDDEN", `role ${scope.role} may not declare stdio MCP servers`, {
    userMessage: `Only ${stdioMcpMinRole}s and above may add stdio MCP servers in this tenant (an owner can change this policy).`,
    details: { reason: "stdio_mcp_policy", required: stdioMcpMinRole, role: scope.role },
  });
}
