import { z } from "zod";
import { ZWorkspaceEnv } from "@/server/workspace/workspace-env";
import { ZIdempotencyKey } from "@/server/shared/idempotency";
import { ZPageInput } from "@/server/shared/page";

export const ZSessionCreateRequest = z.object({
  agentId: z.string().min(1).max(200),
  /**
   * Share an existing workspace of this tenant. It must be usable by the caller (see `workspaceRefusal`):
   * a missing, purged, PER_SESSION or another user's workspace is a typed 404/409/403 naming the reason,
   * never silently replaced. Absent: the isolation policy chooses.
   */
  workspaceId: z.string().min(1).max(200).optional(),
  name: z.string().max(200).optional(),
  /** Environment variables of this session's commands; over the agent's of the same name. */
  env: ZWorkspaceEnv.optional(),
  /** One per create (e.g. per form submission): the same key from the same caller returns the first session. */
  idempotencyKey: ZIdempotencyKey.optional(),
});
export type TSessionCreateRequest = z.input<typeof ZSessionCreateRequest>;

export const ZSessionListRequest = ZPageInput.extend({
  agentId: z.string().min(1).max(200).optional(),
  workspaceId: z.string().min(1).max(200).optional(),
});

/** `session.update`: what is given changes, the rest stays. */
export const ZSessionUpdateRequest = z
  .strictObject({
    name: z.string().max(200).optional(),
    env: ZWorkspaceEnv.optional().describe(
      "Replaces all the session's environment variables (over its agent's); {} clears them.",
    ),
  })
  .refine((patch) => patch.name !== undefined || patch.env !== undefined, {
    message: "give a name or env to change",
  });
export type TSessionUpdateRequest = z.input<typeof ZSessionUpdateRequest>;
