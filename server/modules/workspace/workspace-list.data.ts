import { type DbClient, pageSize } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { type Page, pageArgs, paginate } from "@/server/shared/page";
import type { BackendKind, WorkspaceDTO, WorkspaceState } from "@/server/modules/workspace/workspace.types";
import { liveLeases, toWorkspaceDTO, workspaceSelect } from "./workspace.data";

/** The workspace list's server-side filters (all optional, combined with AND). */
export type WorkspaceListFilters = {
  states?: WorkspaceState[];
  backendKinds?: BackendKind[];
  agentId?: string;
  /** Part of the agent's name, case-insensitive. */
  agentName?: string;
  /** Idle at least this long (last activity that long ago; never-active workspaces are not idle). */
  idleForMs?: number;
  /** true: holding a live lease now; false: holding none. */
  leased?: boolean;
};

/** Most recently updated first, each with its agent's name. */
export async function listWorkspaces(
  scope: TenantScope,
  options: WorkspaceListFilters & {
    limit?: number;
    cursor?: string;
    /** Only these workspaces and those derived for this workspace user (a member's view: workspace-access.ts). */
    onlyAccessible?: { workspaceIds: string[]; workspaceUser: string } | null;
  } = {},
  db: DbClient,
): Promise<Page<WorkspaceDTO & { agentName: string | null }>> {
  const take = pageSize(options.limit);
  const accessible = options.onlyAccessible;
  const rows = await db.workspace.findMany({
    where: {
      tenantId: scope.tenantId,
      ...(options.states ? { state: { in: options.states } } : {}),
      ...(options.backendKinds ? { backendKind: { in: options.backendKinds } } : {}),
      ...(options.agentId ? { agentId: options.agentId } : {}),
      ...(options.agentName
        ? { agent: { name: { contains: options.agentName, mode: "insensitive" as const } } }
        : {}),
      ...(options.idleForMs !== undefined
        ? { lastActivityAt: { lte: new Date(Date.now() - options.idleForMs) } }
        : {}),
      ...(options.leased === true ? { leases: { some: liveLeases() } } : {}),
      ...(options.leased === false ? { leases: { none: liveLeases() } } : {}),
      ...(accessible
        ? { OR: [{ id: { in: accessible.workspaceIds } }, { userId: accessible.workspaceUser }] }
        : {}),
    },
    select: { ...workspaceSelect(), agent: { select: { name: true } } },
    orderBy: [{ updatedAt: "desc" }, { id: "desc" }],
    ...pageArgs(take, options.cursor),
  });
  return paginate(rows, take, ({ agent, ...row }) => ({
    ...toWorkspaceDTO(row),
    agentName: agent?.name ?? null,
  }));
}
