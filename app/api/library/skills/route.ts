import { Readable } from "node:stream";
import type { ReadableStream as NodeWebReadableStream } from "node:stream/web";
import { assertRouteInput, routeErrorResponse, routeTenantScope } from "@/server/api/route-auth";
import { addLibrarySkillArchive } from "@/server/modules/library/library.service";
import {
  InstallGate,
  multipartToTar,
  SKILL_UPLOAD_LIMITS,
  skillUploadBodyOf,
} from "@/server/modules/workspace-content/skill-upload";
import type { ArchiveFormat } from "@/server/workspace/archive/archive-entries";
import { AppError } from "@/server/shared/errors";
import { ZIdempotencyKey } from "@/server/shared/idempotency";
import { parseInput } from "@/server/shared/parse-input";
import { requestMetaOf, runWithRequestMeta } from "@/server/shared/request-meta";
import { processBerth } from "@/server/composition/process-berth";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const imports = new InstallGate(SKILL_UPLOAD_LIMITS.maxConcurrentInstalls);

/**
 * POST /api/library/skills?tenantSlug=[&format=][&description=][&idempotencyKey=] — a skill into the tenant library (admins),
 * in the two body formats of the workspace skill upload (POST /api/workspaces/:id/skills): a folder as
 * multipart (`manifest`, then the `files` parts) or an archive as the raw body (zip, tar, tar.gz). Both are
 * checked with the same manifest validation and the engine's archive validation, then stored as an inline
 * skill (see library-skill-archive.ts for what that refuses). 201 with the entry; 409 when a skill of that
 * name is already in the library; 400/413/422 as for the workspace upload. With `idempotencyKey`, the same
 * key from the same caller (24 hours) answers with the first entry (as library.create does).
 */
export function POST(request: Request): Promise<Response> {
  return runWithRequestMeta(requestMetaOf(request.headers), () => upload(request));
}

async function upload(request: Request): Promise<Response> {
  try {
    assertRouteInput(request, {});
    const scope = await routeTenantScope(request, "library:manage");
    const url = new URL(request.url);
    const body = skillUploadBodyOf(request.headers.get("content-type"), url.searchParams.get("format"));
    if (!request.body)
      throw new AppError("UNPROCESSABLE", "no body", { userMessage: "Expected a request body." });
    let stream: Readable;
    let format: ArchiveFormat;
    if (body.kind === "folder") {
      const { manifest, tar } = multipartToTar(request.body, body.contentType);
      await manifest;
      stream = tar;
      format = "tar";
    } else {
      stream = Readable.fromWeb(request.body as NodeWebReadableStream<Uint8Array>);
      format = body.format;
    }
    const description = url.searchParams.get("description")?.trim() ?? "";
    const idempotencyKey = parseInput(
      ZIdempotencyKey.optional(),
      url.searchParams.get("idempotencyKey") ?? undefined,
    );
    const entry = await imports.run(() =>
      addLibrarySkillArchive(
        scope,
        {
          stream,
          format,
          ...(description ? { description } : {}),
          ...(idempotencyKey ? { idempotencyKey } : {}),
        },
        // Entered by Next: the process' Berth comes through its one handle.
        processBerth().audit,
        processBerth().db,
      ),
    );
    return Response.json(entry, { status: 201 });
  } catch (error) {
    return routeErrorResponse(error);
  }
}
