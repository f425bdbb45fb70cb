import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { getWorkspaceServices } from "@/server/composition/services";

const ZFilesTarget = ZTenantInput.extend({ workspaceId: z.string().min(1).max(200) });
const ZPath = z.string().min(1).max(4096);

/** `workspace.files.*`: browse and read files inside the workdir; downloads via a short-lived signed link. */
export const workspaceFilesRouter = createTRPCRouter({
  list: tenantProcedureFor("workspace:read")
    .input(ZFilesTarget.extend({ path: z.string().max(4096).default(".") }))
    .query(({ ctx, input }) =>
      getWorkspaceServices().content.listFiles(ctx.scope, input.workspaceId, input.path),
    ),

  read: tenantProcedureFor("workspace:read")
    .input(
      ZFilesTarget.extend({
        path: ZPath,
        maxBytes: z
          .number()
          .int()
          .min(1)
          .max(1024 * 1024)
          .optional(),
      }),
    )
    .query(({ ctx, input }) =>
      getWorkspaceServices().content.readFile(ctx.scope, input.workspaceId, input.path, input.maxBytes),
    ),

  /** A link valid for one file for a minute (`GET /api/workspaces/:id/files/download?path=&token=`). */
  downloadToken: tenantProcedureFor("workspace:read")
    .input(ZFilesTarget.extend({ path: ZPath }))
    .query(({ ctx, input }) =>
      getWorkspaceServices().content.downloadToken(ctx.scope, input.workspaceId, input.path),
    ),
});
