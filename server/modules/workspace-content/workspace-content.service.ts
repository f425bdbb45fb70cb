import type { Db } from "@/server/db";
import type { Readable } from "node:stream";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { ArchiveFormat } from "@/server/workspace/archive/archive-entries";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { resolveConfined } from "@/server/workspace/paths";
import type { Workspace } from "@/server/workspace/workspace";
import { assertMayDeclareStdioMcp } from "@/server/modules/tenant/tenant-policy";
import { withinMcpQuota, type QuotaDeps } from "@/server/modules/quota/quota.service";
import { releaseStoredSkills, withinSkillStorage } from "@/server/modules/quota/skill-storage.service";
import { partitionName } from "@/server/workspace/skills/skill-names";
import { readGitStatus } from "./git-status";
import { createWorkspaceFilesService } from "./workspace-files.service";
import { bindDeps } from "@/server/shared/bind-deps";
import type { WorkspaceService } from "@/server/modules/workspace/workspace.service";

/** An uploaded skill archive on its way to the engine; `maxArchiveBytes` lowers the engine's limit. */
export type SkillArchiveUpload = {
  agentId: string | null;
  stream: Readable;
  format: ArchiveFormat;
  maxArchiveBytes?: number;
};

/** What the content use cases need: the workspace service and the quota limits (the root's, on first use). */
type ContentDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  service: Pick<WorkspaceService, "withWorkspace" | "audited">;
  quota: () => QuotaDeps;
};

/**
 * Runs `fn` on the workspace under a short call lease. `agentId`: the agent whose scope or partition the
 * call works on; its stored defaults apply first.
 */
function usingWorkspace<T>(
  deps: ContentDeps,
  scope: TenantScope,
  workspaceId: string,
  reason: string,
  fn: (ws: Workspace) => Promise<T>,
  agentId: string | null = null,
  quiet = false,
): Promise<T> {
  return deps.service.withWorkspace(scope, workspaceId, reason, (workspace) => fn(workspace), {
    agentId: agentId || null,
    quiet,
  });
}

/**
 * Reads (lists, status: what the dashboard polls and browses) keep their call lease out of the ledger;
 * changes are audited and their leases leave events.
 */
function readingWorkspace<T>(
  deps: ContentDeps,
  scope: TenantScope,
  workspaceId: string,
  reason: string,
  fn: (ws: Workspace) => Promise<T>,
  agentId: string | null = null,
): Promise<T> {
  return usingWorkspace(deps, scope, workspaceId, reason, fn, agentId, true);
}

async function readWorkspaceStatus(deps: ContentDeps, scope: TenantScope, workspaceId: string, cwd?: string) {
  return readingWorkspace(deps, scope, workspaceId, "workspace.status", async (ws) => {
    const target = cwd ? await resolveConfined(ws.machine, cwd) : ws.workdir;
    return { workdir: ws.workdir, cwd: target, git: await readGitStatus(ws.machine, target) };
  });
}

// ── MCP (scopes are (agentId, sessionId); "" is the legacy/shared scope) ──────────────────────────
async function listWorkspaceMcps(
  deps: ContentDeps,
  scope: TenantScope,
  workspaceId: string,
  mcpScope: { agentId: string; sessionId: string },
) {
  return readingWorkspace(
    deps,
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
}

async function addWorkspaceMcp(
  deps: ContentDeps,
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
  if (parsed.data.mcp_config.type === "stdio_mcp") await assertMayDeclareStdioMcp(scope, deps.db);
  return deps.service.audited(
    scope,
    "workspace.mcp.add",
    workspaceId,
    { name: parsed.data.name, ...mcpScope },
    () =>
      usingWorkspace(
        deps,
        scope,
        workspaceId,
        "workspace.mcp.add",
        async (ws) =>
          // The tenant's `mcpServersPerScope`, counted and added under one lock.
          withinMcpQuota(
            scope.tenantId,
            { workspaceId, ...mcpScope },
            async () => (await ws.readMcpDeclarations(mcpScope)).length,
            async () => {
              await ws.addMcp(parsed.data, mcpScope);
              return { name: parsed.data.name };
            },
            deps.quota(),
            deps.db,
          ),
        mcpScope.agentId,
      ),
  );
}

async function removeWorkspaceMcp(
  deps: ContentDeps,
  scope: TenantScope,
  workspaceId: string,
  mcpScope: { agentId: string; sessionId: string },
  name: string,
) {
  return deps.service.audited(scope, "workspace.mcp.remove", workspaceId, { name, ...mcpScope }, () =>
    usingWorkspace(
      deps,
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
}

// ── skills (per-agent partitions; no agent → the default partition) ─────────────────────────────────
async function listWorkspaceSkills(
  deps: ContentDeps,
  scope: TenantScope,
  workspaceId: string,
  agentId: string | null,
) {
  return readingWorkspace(
    deps,
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
}

/** By folder (`dir`, stable) or by a name only one skill answers to (else CONFLICT with the candidates). */
async function removeWorkspaceSkill(
  deps: ContentDeps,
  scope: TenantScope,
  workspaceId: string,
  agentId: string | null,
  target: { dir: string } | { name: string },
) {
  return deps.service.audited(scope, "workspace.skill.remove", workspaceId, { ...target, agentId }, () =>
    usingWorkspace(deps, scope, workspaceId, "workspace.skill.remove", async (ws) => {
      const { dir } = await ws.removeSkill("dir" in target ? { dir: target.dir } : target.name, agentId);
      await releaseStoredSkills({ workspaceId, partition: partitionName(agentId), dir }, deps.db);
      return { removed: true as const };
    }),
  );
}

/**
 * Streams an uploaded archive straight into the engine's install (never buffered whole), under the
 * engine's archive limits; `maxArchiveBytes` lowers the compressed-size one (the folder upload's tar).
 */
async function installWorkspaceSkillArchive(
  deps: ContentDeps,
  scope: TenantScope,
  workspaceId: string,
  input: SkillArchiveUpload,
) {
  return deps.service.audited(
    scope,
    "workspace.skill.upload",
    workspaceId,
    { agentId: input.agentId, format: input.format },
    () =>
      usingWorkspace(deps, scope, workspaceId, "workspace.skill.upload", async (ws) => {
        // The tenant's `skillStorageBytes` caps what all its uploaded skills store, across workspaces.
        const result = await withinSkillStorage(
          { tenantId: scope.tenantId, workspaceId, partition: partitionName(input.agentId) },
          async (maxExpandedBytes) => {
            const installed = await ws.addSkillArchive(input.stream, input.format, input.agentId, {
              limits: {
                ...(input.maxArchiveBytes !== undefined ? { maxArchiveBytes: input.maxArchiveBytes } : {}),
                ...(maxExpandedBytes !== undefined ? { maxExpandedBytes } : {}),
              },
            });
            return { ...installed, dir: installed.skill.dir };
          },
          async (dir) => {
            await ws.removeSkill({ dir }, input.agentId);
          },
          deps.quota(),
          deps.db,
        );
        return { name: result.skill.name, dir: result.skill.dir, deduplicated: result.deduplicated };
      }),
  );
}

/**
 * What the `workspace.mcp | skill | files | status` procedures and the upload/download routes do, on top of
 * the workspace service (each call resolves the workspace under a short lease): the use cases above and
 * the files' (workspace-files.service.ts). Mutations are audited.
 */
export function createWorkspaceContentService(
  service: WorkspaceService,
  options: { db: Db; quota: () => QuotaDeps },
) {
  const deps: ContentDeps = { db: options.db, service, quota: options.quota };
  const bind = bindDeps(deps);
  return {
    status: bind(readWorkspaceStatus),
    listMcps: bind(listWorkspaceMcps),
    addMcp: bind(addWorkspaceMcp),
    removeMcp: bind(removeWorkspaceMcp),
    listSkills: bind(listWorkspaceSkills),
    removeSkill: bind(removeWorkspaceSkill),
    installSkillArchive: bind(installWorkspaceSkillArchive),
    // ── files (confined to the workdir): browse, read, edit, upload, folders, delete, download ──────────
    ...createWorkspaceFilesService(service),
  };
}

export type WorkspaceContentService = ReturnType<typeof createWorkspaceContentService>;
