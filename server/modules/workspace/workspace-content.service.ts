import path from "node:path";
import type { Readable } from "node:stream";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { ArchiveFormat } from "@/server/workspace/archive/archive-entries";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { isInside, resolveConfined } from "@/server/workspace/paths";
import type { Workspace } from "@/server/workspace/workspace";
import { assertMayDeclareStdioMcp } from "@/server/modules/tenant/tenant-policy";
import { signDownloadToken } from "./download-token";
import { readGitStatus } from "./git-status";
import type { WorkspaceService } from "./workspace.service";

const MAX_READ_BYTES = 1024 * 1024;

/** An uploaded skill archive on its way to the engine; `maxArchiveBytes` lowers the engine's limit. */
export type SkillArchiveUpload = {
  agentId: string | null;
  stream: Readable;
  format: ArchiveFormat;
  maxArchiveBytes?: number;
};

/**
 * What the `workspace.mcp | skill | files | status` procedures and the upload/download routes do, on top of
 * the workspace service (each call resolves the workspace under a short lease). Mutations are audited.
 */
export function createWorkspaceContentService(service: WorkspaceService) {
  // `agentId`: the agent whose scope or partition the call works on; its stored defaults apply first.
  const use = <T>(
    scope: TenantScope,
    workspaceId: string,
    reason: string,
    fn: (ws: Workspace) => Promise<T>,
    agentId: string | null = null,
  ) =>
    service.withWorkspace(scope, workspaceId, reason, (workspace) => fn(workspace), {
      agentId: agentId || null,
    });

  return {
    async status(scope: TenantScope, workspaceId: string, cwd?: string) {
      return use(scope, workspaceId, "workspace.status", async (ws) => {
        const target = cwd ? await resolveConfined(ws.backend, cwd) : ws.workdir;
        return { workdir: ws.workdir, cwd: target, git: await readGitStatus(ws.backend, target) };
      });
    },

    // ── MCP (scopes are (agentId, sessionId); "" is the legacy/shared scope) ──────────────────────────
    async listMcps(
      scope: TenantScope,
      workspaceId: string,
      mcpScope: { agentId: string; sessionId: string },
    ) {
      return use(
        scope,
        workspaceId,
        "workspace.mcp.list",
        async (ws) => {
          // Starts what is not running yet (as a turn would), then says per MCP how that went.
          const statuses = await ws.mcpStatus(mcpScope);
          return statuses.map((status) => ({
            name: status.declaration.name,
            isStateful: status.declaration.is_stateful,
            type: status.declaration.mcp_config.type,
            state: status.state,
            isHealthy: status.state === "running",
            error: status.error,
            failedAt: status.failedAt === null ? null : new Date(status.failedAt),
            tools: status.tools.map((tool) => ({ name: tool.name, description: tool.description ?? "" })),
          }));
        },
        mcpScope.agentId,
      );
    },

    async addMcp(
      scope: TenantScope,
      workspaceId: string,
      mcpScope: { agentId: string; sessionId: string },
      raw: unknown,
    ) {
      const parsed = ZMcpDeclaration.safeParse(raw);
      if (!parsed.success) {
        throw new AppError("BAD_REQUEST", `invalid MCP declaration: ${parsed.error.message}`, {
          userMessage: "Invalid MCP declaration.",
        });
      }
      // A stdio MCP is a command: the tenant's policy is checked before the workspace is even attached.
      if (parsed.data.mcp_config.type === "stdio_mcp") await assertMayDeclareStdioMcp(scope);
      return service.audited(
        scope,
        "workspace.mcp.add",
        workspaceId,
        { name: parsed.data.name, ...mcpScope },
        () =>
          use(
            scope,
            workspaceId,
            "workspace.mcp.add",
            async (ws) => {
              await ws.addMcp(parsed.data, mcpScope);
              return { name: parsed.data.name };
            },
            mcpScope.agentId,
          ),
      );
    },

    async removeMcp(
      scope: TenantScope,
      workspaceId: string,
      mcpScope: { agentId: string; sessionId: string },
      name: string,
    ) {
      return service.audited(scope, "workspace.mcp.remove", workspaceId, { name, ...mcpScope }, () =>
        use(
          scope,
          workspaceId,
          "workspace.mcp.remove",
          async (ws) => {
            await ws.removeMcp(name, mcpScope);
            return { removed: true as const };
          },
          mcpScope.agentId,
        ),
      );
    },

    // ── skills (per-agent partitions; no agent → the default partition) ─────────────────────────────────
    async listSkills(scope: TenantScope, workspaceId: string, agentId: string | null) {
      return use(
        scope,
        workspaceId,
        "workspace.skill.list",
        async (ws) => {
          const listing = await ws.listSkills(agentId);
          return listing.skills.map((skill) => ({
            name: skill.name,
            declaredName: skill.declaredName,
            description: skill.description,
            dir: skill.dir,
            updatedAt: skill.updatedAt,
          }));
        },
        agentId,
      );
    },

    /** By folder (`dir`, stable) or by a name only one skill answers to (else CONFLICT with the candidates). */
    async removeSkill(
      scope: TenantScope,
      workspaceId: string,
      agentId: string | null,
      target: { dir: string } | { name: string },
    ) {
      return service.audited(scope, "workspace.skill.remove", workspaceId, { ...target, agentId }, () =>
        use(scope, workspaceId, "workspace.skill.remove", async (ws) => {
          await ws.removeSkill("dir" in target ? { dir: target.dir } : target.name, agentId);
          return { removed: true as const };
        }),
      );
    },

    /**
     * Streams an uploaded archive straight into the engine's install (never buffered whole), under the
     * engine's archive limits; `maxArchiveBytes` lowers the compressed-size one (the folder upload's tar).
     */
    async installSkillArchive(scope: TenantScope, workspaceId: string, input: SkillArchiveUpload) {
      return service.audited(
        scope,
        "workspace.skill.upload",
        workspaceId,
        { agentId: input.agentId, format: input.format },
        () =>
          use(scope, workspaceId, "workspace.skill.upload", async (ws) => {
            const result = await ws.addSkillArchive(
              input.stream,
              input.format,
              input.agentId,
              input.maxArchiveBytes === undefined
                ? {}
                : { limits: { maxArchiveBytes: input.maxArchiveBytes } },
            );
            return { name: result.skill.name, dir: result.skill.dir, deduplicated: result.deduplicated };
          }),
      );
    },

    // ── files (confined to the workdir) ──────────────────────────────────────────────────────────────
    async listFiles(scope: TenantScope, workspaceId: string, dir: string) {
      return use(scope, workspaceId, "workspace.files.list", async (ws) => {
        const target = await resolveConfined(ws.backend, dir || ".");
        const info = await ws.backend.stat(target);
        if (!info)
          throw new AppError("NOT_FOUND", `no directory ${dir}`, { userMessage: "Directory not found." });
        if (info.type !== "directory")
          throw new AppError("BAD_REQUEST", `${dir} is not a directory`, { userMessage: "Not a directory." });
        const entries = await ws.backend.list(target);
        return {
          path: relativeTo(ws, target),
          entries: entries
            .map((entry) => ({
              name: entry.name,
              isDir: entry.type === "directory",
              sizeBytes: entry.size,
              updatedAt: entry.mtimeMs === null ? null : new Date(entry.mtimeMs),
            }))
            .sort((a, b) => a.name.localeCompare(b.name)),
        };
      });
    },

    /** A file's text (UTF-8), at most `maxBytes` (default and cap 1 MiB); `truncated` says when cut. */
    async readFile(scope: TenantScope, workspaceId: string, file: string, maxBytes = MAX_READ_BYTES) {
      return use(scope, workspaceId, "workspace.files.read", async (ws) => {
        const target = await resolveConfined(ws.backend, file);
        const info = await ws.backend.stat(target);
        if (!info || info.type === "directory")
          throw new AppError("NOT_FOUND", `no file ${file}`, { userMessage: "File not found." });
        const limit = Math.min(maxBytes, MAX_READ_BYTES);
        const chunks: Buffer[] = [];
        if (info.size > 0) {
          for await (const chunk of await ws.backend.readFile(target, {
            start: 0,
            end: Math.min(info.size, limit) - 1,
          })) {
            chunks.push(chunk as Buffer);
          }
        }
        return {
          path: relativeTo(ws, target),
          sizeBytes: info.size,
          truncated: info.size > limit,
          content: Buffer.concat(chunks).toString("utf8"),
        };
      });
    },

    /** Resolves the workspace (to fail early, as the reference does) and signs a link for one file. */
    async downloadToken(scope: TenantScope, workspaceId: string, file: string) {
      return use(scope, workspaceId, "workspace.files.downloadToken", async (ws) => {
        const target = await resolveConfined(ws.backend, file);
        if ((await ws.backend.stat(target))?.type !== "file")
          throw new AppError("NOT_FOUND", `no file ${file}`, { userMessage: "File not found." });
        const expiresAt = Date.now() + service.engine.config.downloadTokenTtlMs;
        const token = signDownloadToken(service.engine.downloadSecret, {
          tenantId: scope.tenantId,
          workspaceId,
          path: file,
          expiresAt,
        });
        return {
          token,
          expiresAt: new Date(expiresAt),
          url: `/api/workspaces/${encodeURIComponent(workspaceId)}/files/download?path=${encodeURIComponent(file)}&token=${encodeURIComponent(token)}`,
        };
      });
    },

    /** The download route's work: stream one confined file (the token was verified by the caller). */
    async openFile(
      scope: TenantScope,
      workspaceId: string,
      file: string,
      fn: (file: { stream: Readable; size: number; name: string }) => Promise<Response>,
    ) {
      return use(scope, workspaceId, "workspace.files.download", async (ws) => {
        const target = await resolveConfined(ws.backend, file);
        const info = await ws.backend.stat(target);
        if (!info) throw new AppError("NOT_FOUND", `no file ${file}`, { userMessage: "File not found." });
        if (info.type !== "file")
          throw new AppError("BAD_REQUEST", `${file} is not a file`, { userMessage: "Not a file." });
        return fn({
          stream: await ws.backend.readFile(target),
          size: info.size,
          name: path.posix.basename(target),
        });
      });
    },
  };
}

function relativeTo(ws: Workspace, target: string): string {
  if (!isInside(ws.workdir, target)) return target;
  return path.posix.relative(ws.workdir, target) || ".";
}

export type WorkspaceContentService = ReturnType<typeof createWorkspaceContentService>;
