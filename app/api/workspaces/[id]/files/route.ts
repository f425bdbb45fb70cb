import { Readable } from "node:stream";
import type { ReadableStream as NodeWebReadableStream } from "node:stream/web";
import { closeConnectionIfRefused, limitRequestBody } from "@/server/api/request-limits";
import { assertRouteInput, routeErrorResponse, routeTenantScope } from "@/server/api/route-auth";
import { processBerth } from "@/server/composition/process-berth";
import { FILE_UPLOAD_MAX_BYTES } from "@/server/modules/workspace-content/workspace-files.service";
import { AppError } from "@/server/shared/errors";
import { requestMetaOf, runWithRequestMeta } from "@/server/shared/request-meta";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const tooLarge = () =>
  new AppError("PAYLOAD_TOO_LARGE", "upload over the limit", {
    userMessage: `A file upload holds at most ${FILE_UPLOAD_MAX_BYTES / 1024 / 1024} MiB.`,
  });

/**
 * POST /api/workspaces/:id/files?tenantSlug=&path=<dir/name>[&overwrite=true] — one file as the raw body,
 * streamed into the workspace (never buffered whole), at most FILE_UPLOAD_MAX_BYTES (counted while it
 * streams: 413 at the first byte past it, and the connection is closed). The path is confined to the
 * workdir like every file call; `.mcp` and `skills/` are refused (they have their own calls). Needs the
 * member role (members: their own sessions' workspaces only). 201 `{ path, sizeBytes }`; 409 when the file
 * exists and `overwrite` is not set.
 */
export function POST(request: Request, context: { params: Promise<{ id: string }> }): Promise<Response> {
  return runWithRequestMeta(requestMetaOf(request.headers), () => upload(request, context));
}

async function upload(request: Request, context: { params: Promise<{ id: string }> }): Promise<Response> {
  const bounded = limitRequestBody(request, FILE_UPLOAD_MAX_BYTES, tooLarge);
  try {
    const { id } = await context.params;
    assertRouteInput(request, { id });
    const scope = await routeTenantScope(request, "session:use");
    const url = new URL(request.url);
    const path = url.searchParams.get("path");
    if (!path) throw new AppError("BAD_REQUEST", "path missing", { userMessage: "path is required." });
    const body = bounded.request.body;
    if (!body) throw new AppError("UNPROCESSABLE", "no body", { userMessage: "Expected a request body." });
    const result = await processBerth().workspaces.content.uploadFile(scope, id, {
      path,
      stream: Readable.fromWeb(body as NodeWebReadableStream<Uint8Array>),
      overwrite: url.searchParams.get("overwrite") === "true",
    });
    return closeConnectionIfRefused(Response.json(result, { status: 201 }), bounded.refused());
  } catch (error) {
    return closeConnectionIfRefused(routeErrorResponse(error), bounded.refused());
  }
}
