import { Readable } from "node:stream";
import { assertRouteInput, routeErrorResponse } from "@/server/api/route-auth";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import { processBerth } from "@/server/composition/process-berth";
import { verifyDownloadToken } from "@/server/modules/workspace-content/download-token";
import { AppError } from "@/server/shared/errors";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

/**
 * GET /api/workspaces/:id/files/download?path=&token=[&download=true] — streams one file of the workspace.
 * The token (from `workspace.files.downloadToken`) is the credential: short-lived, HMAC-signed for exactly
 * this tenant, workspace and path, so the link works from a plain <a href> without cookies.
 */
export async function GET(request: Request, context: { params: Promise<{ id: string }> }): Promise<Response> {
  try {
    const { id } = await context.params;
    assertRouteInput(request, { id });
    const url = new URL(request.url);
    const path = url.searchParams.get("path");
    const token = url.searchParams.get("token");
    if (!path || !token)
      throw new AppError("UNAUTHORIZED", "path and token required", {
        userMessage: "Malformed download token.",
      });
    const { service, content } = processBerth().workspaces;
    const { tenantId } = verifyDownloadToken(service.engine.downloadSecret, token, { workspaceId: id, path });
    const scope = await resolveSystemTenantScope(tenantId, {}, processBerth().db);
    return await content.openFile(scope, id, path, (file) => {
      const headers = new Headers({
        "content-type": "application/octet-stream",
        "content-length": String(file.size),
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
      });
      if (url.searchParams.get("download") === "true") {
        headers.set("content-disposition", `attachment; filename*=UTF-8''${encodeURIComponent(file.name)}`);
      }
      return Promise.resolve(
        new Response(Readable.toWeb(file.stream) as ReadableStream<Uint8Array>, {
          status: 200,
          headers,
        }),
      );
    });
  } catch (error) {
    return routeErrorResponse(error);
  }
}
