import { z } from "zod";
import { ZTenantRole } from "@/server/auth/roles";

export const ZMemberDTO = z.object({
  userId: z.string(),
  name: z.string(),
  email: z.string(),
  role: ZTenantRole,
  joinedAt: z.date(),
});
export type MemberDTO = z.infer<typeof ZMemberDTO>;
