import { assertRouteInput, routeErrorResponse, routeTenantScope } from "@/server/api/route-auth";
import { getWorkspaceServices } from "@/server/engine/engine";
import { AppError } from "@/server/shared/errors";
import { InstallGate, multipartToTar, SKILL_UPLOAD_LIMITS } from "@/server/modules/workspace/skill-upload";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const installs = new InstallGate(SKILL_UPLOAD_LIMITS.maxConcurrentInstalls);

/**
 * POST /api/workspaces/:id/skills?tenantId=&agentId= — multipart: a `manifest` field
 * (`{"entries":[{"path","size"}]}`, in part order) then the `files` parts. The parts are streamed as a tar
 * straight into the engine's archive install (never buffered whole), under the reference's limits.
 * 201 `{ name, dir, deduplicated }`; 422 for a bad manifest or parts; 413 over a limit.
 */
export async function POST(
  request: Request,
  context: { params: Promise<{ id: string }> },
): Promise<Response> {
  try {
    const { id } = await context.params;
    assertRouteInput(request, { id });
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
        maxArchiveBytes: SKILL_UPLOAD_LIMITS.maxTotalBytes + SKILL_UPLOAD_LIMITS.maxFileCount * 1024 + 1024,
      }),
    );
    return Response.json(result, { status: 201 });
  } catch (error) {
    return routeErrorResponse(error);
  }
}
