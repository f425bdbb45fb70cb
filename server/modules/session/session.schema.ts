import { z } from "zod";
import { ZPageInput } from "@/server/shared/page";

export const ZSessionCreateRequest = z.object({
  agentId: z.string().min(1).max(200),
  /**
   * Share an existing workspace of this tenant. Honoured only when the caller may use it (see
   * `mayShareWorkspace`); otherwise the id comes from the isolation policy, as if it were absent.
   */
  workspaceId: z.string().min(1).max(200).optional(),
  name: z.string().max(200).optional(),
});
export type TSessionCreateRequest = z.input<typeof ZSessionCreateRequest>;

export const ZSessionListRequest = ZPageInput.extend({
  agentId: z.string().min(1).max(200).optional(),
  workspaceId: z.string().min(1).max(200).optional(),
});
