import { Readable } from "node:stream";
import type { ReadableStream as NodeWebReadableStream } from "node:stream/web";
import { assertRouteInput, routeErrorResponse, routeTenantScope } from "@/server/api/route-auth";
import { processBerth } from "@/server/composition/process-berth";
import { AppError } from "@/server/shared/errors";
import type { SkillArchiveUpload } from "@/server/modules/workspace-content/workspace-content.service";
import {
  InstallGate,
  multipartToTar,
  SKILL_UPLOAD_LIMITS,
  skillUploadBodyOf,
} from "@/server/modules/workspace-content/skill-upload";
import { requestMetaOf, runWithRequestMeta } from "@/server/shared/request-meta";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const installs = new InstallGate(SKILL_UPLOAD_LIMITS.maxConcurrentInstalls);

/**
 * POST /api/workspaces/:id/skills?tenantId=&agentId=[&format=] — two body formats, both streamed straight
 * into the engine's archive install (never buffered whole):
 * - multipart (the dashboard's folder upload): a `manifest` field (`{"entries":[{"path","size"}]}`, in part
 *   order) then the `files` parts, re-packed as a tar on the fly, under the reference's upload limits;
 * - an archive as the raw body (`application/zip`, `application/x-tar`, `application/gzip` for tar.gz, or
 *   `application/octet-stream` with `format=zip|tar|tar.gz`), under the engine's archive limits.
 * Either way the skill is the first folder holding SKILL.md (see findSkillRoot).
 * 201 `{ name, dir, deduplicated }`; 422 for a bad body format, manifest or parts; 400 for a hostile or
 * invalid archive; 413 over a limit. A refusal that answers before the body is read leaves the rest to
 * `npm start`'s HTTP server, which drains it or closes the connection (scripts/services/incoming-request.ts).
 */
export function POST(request: Request, context: { params: Promise<{ id: string }> }): Promise<Response> {
  // The caller's address and user agent reach the upload's audit row through the async context.
  return runWithRequestMeta(requestMetaOf(request.headers), () => upload(request, context));
}

async function upload(request: Request, context: { params: Promise<{ id: string }> }): Promise<Response> {
  try {
    const { id } = await context.params;
    assertRouteInput(request, { id });
    const scope = await routeTenantScope(request, "session:use");
    const url = new URL(request.url);
    const body = skillUploadBodyOf(request.headers.get("content-type"), url.searchParams.get("format"));
    if (!request.body)
      throw new AppError("UNPROCESSABLE", "no body", { userMessage: "Expected a request body." });
    const agentId = url.searchParams.get("agentId");
    let install: SkillArchiveUpload;
    if (body.kind === "folder") {
      const { manifest, tar } = multipartToTar(request.body, body.contentType);
      await manifest;
      install = {
        agentId,
        stream: tar,
        format: "tar",
        maxArchiveBytes: SKILL_UPLOAD_LIMITS.maxTotalBytes + SKILL_UPLOAD_LIMITS.maxFileCount * 1024 + 1024,
      };
    } else {
      const stream = Readable.fromWeb(request.body as NodeWebReadableStream<Uint8Array>);
      install = { agentId, stream, format: body.format };
    }
    const result = await installs.run(() =>
      processBerth().workspaces.content.installSkillArchive(scope, id, install),
    );
    return Response.json(result, { status: 201 });
  } catch (error) {
    return routeErrorResponse(error);
  }
}
