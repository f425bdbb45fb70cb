import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { ZPreviewPort, ZShareTtlMs } from "@/server/modules/preview/preview.service";

const ZPreviewTarget = ZTenantInput.extend({ workspaceId: z.string().min(1).max(200) });
const ZPortTarget = ZPreviewTarget.extend({ port: ZPreviewPort });

/**
 * `workspace.previews.*`: the ports of a workspace exposed as preview URLs (`/p/<workspace>/<port>/`, served
 * by server/api/preview-proxy.ts). Reading is the workspace's readers'; exposing, unexposing and share
 * links are admins' (`workspace:manage`), audited.
 */
export const workspacePreviewsRouter = createTRPCRouter({
  /** Exposed ports with their URLs, and whether the workspace's backend can serve previews at all. */
  list: tenantProcedureFor("workspace:read")
    .input(ZPreviewTarget)
    .query(({ ctx, input }) => ctx.berth.workspaces.previews.list(ctx.scope, input.workspaceId)),

  /** Idempotent: exposing an exposed port answers the existing preview (`created: false`). */
  expose: tenantProcedureFor("workspace:manage")
    .input(ZPortTarget)
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.previews.expose(ctx.scope, input.workspaceId, input.port),
    ),

  /** Its URL and every share link stop working at once. */
  unexpose: tenantProcedureFor("workspace:manage")
    .input(ZPortTarget)
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.previews.unexpose(ctx.scope, input.workspaceId, input.port),
    ),

  /** A signed link anyone may open until it expires (default 1 h, at most 24 h). */
  shareLink: tenantProcedureFor("workspace:manage")
    .input(ZPortTarget.extend({ ttlMs: ZShareTtlMs }))
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.previews.shareLink(ctx.scope, input.workspaceId, input.port, input.ttlMs),
    ),
});
