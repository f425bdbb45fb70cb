import { routeErrorResponse, routeTenantScope } from "@/server/api/route-auth";
import { getWorkspaceServices } from "@/server/engine/engine";
import { AppError } from "@/server/shared/errors";
import { InstallGate, multipartToTar, SKILL_UPLOAD_LIMITS } from "@/server/modules/workspace/skill-upload";
import { requestMetaOf, runWithRequestMeta } from "@/server/shared/request-meta";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const installs = new InstallGate(SKILL_UPLOAD_LIMITS.maxConcurrentInstalls);

/**
 * POST /api/workspaces/:id/skills?tenantId=&agentId= — multipart: a `manifest` field
 * (`{"entries":[{"path","size"}]}`, in part order) then the `files` parts. The parts are streamed as a tar
 * straight into the engine's archive install (never buffered whole), under the reference's limits.
 * 201 `{ name, dir, deduplicated }`; 422 for a bad manifest or parts; 413 over a limit (at once, from
 * Content-Length, when the body is declared larger than any skill may be). Refusals that answer before the
 * body is read leave the rest of it to the HTTP server, which drains or closes the connection
 * (scripts/start.ts), so the next request on a keep-alive connection still works.
 */
export function POST(request: Request, context: { params: Promise<{ id: string }> }): Promise<Response> {
  return runWithRequestMeta(requestMetaOf(request.headers), () => upload(request, context));
}

const MAX_ARCHIVE_BYTES = SKILL_UPLOAD_LIMITS.maxTotalBytes + SKILL_UPLOAD_LIMITS.maxFileCount * 1024 + 1024;
// Multipart framing around the archive: part headers and boundaries, at most a few KiB per file.
const MAX_BODY_BYTES = MAX_ARCHIVE_BYTES + SKILL_UPLOAD_LIMITS.maxFileCount * 4096 + 1024 * 1024;

async function upload(request: Request, context: { params: Promise<{ id: string }> }): Promise<Response> {
  try {
    const declared = Number(request.headers.get("content-length") ?? Number.NaN);
    if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
      throw new AppError("PAYLOAD_TOO_LARGE", `upload of ${declared} bytes`, {
        userMessage: `The upload is larger than ${SKILL_UPLOAD_LIMITS.maxTotalBytes} bytes.`,
      });
    }
    const { id } = await context.params;
    const scope = await routeTenantScope(request, "session:use");
    if (!request.body)
      throw new AppError("UNPROCESSABLE", "no body", { userMessage: "Expected a multipart body." });
    const agentId = new URL(request.url).searchParams.get("agentId");
    const { manifest, tar } = multipartToTar(request.body, request.headers.get("content-type") ?? "");
    await manifest;
    const result = await installs.run(() =>
      getWorkspaceServices().content.installSkillArchive(scope, id, {
        agentId,
        stream: tar,
        format: "tar",
        maxArchiveBytes: MAX_ARCHIVE_BYTES,
      }),
    );
    return Response.json(result, { status: 201 });
  } catch (error) {
    return routeErrorResponse(error);
  }
}
