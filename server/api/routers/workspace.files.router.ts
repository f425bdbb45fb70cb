import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";

const ZFilesTarget = ZTenantInput.extend({ workspaceId: z.string().min(1).max(200) });
const ZPath = z.string().min(1).max(4096);

/**
 * `workspace.files.*`: browse, read and (members and up) edit, create folders and delete inside the workdir;
 * uploads go through POST /api/workspaces/:id/files (streamed), downloads through a short-lived signed link.
 */
export const workspaceFilesRouter = createTRPCRouter({
  list: tenantProcedureFor("workspace:read")
    .input(ZFilesTarget.extend({ path: z.string().max(4096).default(".") }))
    .query(({ ctx, input }) =>
      ctx.berth.workspaces.content.listFiles(ctx.scope, input.workspaceId, input.path),
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
      ctx.berth.workspaces.content.readFile(ctx.scope, input.workspaceId, input.path, input.maxBytes),
    ),

  /** Saves a text file (at most 1 MiB, no NUL); CONFLICT when it changed since `expectedUpdatedAt`. */
  write: tenantProcedureFor("session:use")
    .input(
      ZFilesTarget.extend({
        path: ZPath,
        content: z.string().max(1024 * 1024),
        expectedUpdatedAt: z.date().optional(),
        /** Create a new file: CONFLICT when the path exists. */
        mustNotExist: z.boolean().optional(),
      }),
    )
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.content.writeFile(ctx.scope, input.workspaceId, input.path, input.content, {
        ...(input.expectedUpdatedAt ? { expectedUpdatedAt: input.expectedUpdatedAt } : {}),
        ...(input.mustNotExist ? { mustNotExist: true } : {}),
      }),
    ),

  mkdir: tenantProcedureFor("session:use")
    .input(ZFilesTarget.extend({ path: ZPath }))
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.content.makeDirectory(ctx.scope, input.workspaceId, input.path),
    ),

  /** A file, or a folder with everything in it. */
  delete: tenantProcedureFor("session:use")
    .input(ZFilesTarget.extend({ path: ZPath }))
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.content.remove(ctx.scope, input.workspaceId, input.path),
    ),

  /** A link valid for one file for a minute (`GET /api/workspaces/:id/files/download?path=&token=`). */
  downloadToken: tenantProcedureFor("workspace:read")
    .input(ZFilesTarget.extend({ path: ZPath }))
    .query(({ ctx, input }) =>
      ctx.berth.workspaces.content.downloadToken(ctx.scope, input.workspaceId, input.path),
    ),
});
