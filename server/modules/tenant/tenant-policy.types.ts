import { z } from "zod";
import { ZIsolationPolicy } from "@/server/modules/agent/agent.types";

/**
 * A tenant's own policy, one object for its security rules and its defaults:
 * - `stdioMcpMinRole`: the lowest role that may declare stdio MCP servers (a stdio server is a command Berth
 *   runs in the workspace), owner/admin by default; an owner may open it to members. Viewers never can.
 * - `defaultIsolationPolicy`: the isolation policy of its agents that name none (null: PER_AGENT), applied
 *   when a session picks its workspace, so it reaches sessions created after a change.
 * - `workspaceIdleTtlMs`: how long its workspaces may sit idle before the sweep stops them (null: the
 *   installation's `BERTH_WORKSPACE_IDLE_TTL_MS`, which is also the maximum).
 * - `checkpointKeepTurns`, `checkpointKeepDays`, `checkpointStorageBytes`: turn checkpoints' retention
 *   (null: the defaults, checkpoint-retention.ts; no storage cap).
 */
export const ZTenantPolicyDTO = z.object({
  stdioMcpMinRole: z.enum(["owner", "admin", "member", "viewer"]),
  defaultIsolationPolicy: ZIsolationPolicy.nullable(),
  workspaceIdleTtlMs: z.number().int().positive().nullable(),
  checkpointKeepTurns: z.number().int().positive().nullable(),
  checkpointKeepDays: z.number().int().positive().nullable(),
  checkpointStorageBytes: z.number().int().positive().nullable(),
});
export type TenantPolicyDTO = z.infer<typeof ZTenantPolicyDTO>;
