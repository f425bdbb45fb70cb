import type { Db } from "@/server/db";
import { releaseStoredSkills } from "@/server/modules/quota/skill-storage.service";
import { partitionName } from "@/server/workspace/skills/skill-names";
import type { z } from "zod";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { TenantScope } from "@/server/auth/scope";
import { RecordAttacher } from "@/server/engine/record-attacher";
import type { DriverSet } from "@/server/engine/driver-set";
import type { Logger } from "@/server/logger";
import { recordPurgeReceipt } from "@/server/modules/audit/audit.data";
import { Workspace } from "@/server/workspace/workspace";
import { releaseWorkspaceLease } from "@/server/modules/workspace/workspace.data";
import type { ZAgentPurgePayload, ZSessionPurgePayload } from "@/server/modules/workspace/workspace.jobs";
import {
  acquireLeaseLocked,
  findWorkspaceRecordForSystem,
  type WorkspaceRecord,
} from "@/server/modules/workspace/workspace-lifecycle.data";
import { countSessionFiles, takeInventory } from "./workspace-inventory";
import { handleOfRecord, specOfRecord } from "@/server/modules/workspace/workspace-spec";

/**
 * Runs `fn` on a workspace attached in the worker itself (no provisioning job: the worker already is where
 * machines are handled), under a lease so the sweeper leaves it alone meanwhile. The local backend's files
 * are on the host whatever the record's state, so this works on a STOPPED workspace too.
 */
async function withAttachedWorkspace<T>(
  drivers: DriverSet,
  scope: TenantScope,
  record: WorkspaceRecord,
  holder: string,
  fn: (workspace: Workspace) => Promise<T>,
  db: Db,
): Promise<T> {
  // Never on a workspace whose generation is being (or was) purged: attaching would recreate its folder.
  await acquireLeaseLocked(
    scope,
    record.id,
    { holder, reason: holder.split(":")[0] ?? holder, expiresAt: new Date(Date.now() + 10 * 60_000) },
    db,
    { refuseStates: ["PURGING", "PURGED"] },
  );
  const workspace = new Workspace({
    spec: specOfRecord(record),
    // No provision job: the worker attaches straight to what the record says was provisioned.
    attacher: new RecordAttacher(drivers, () =>
      Promise.resolve({ kind: record.backendKind, handle: handleOfRecord(record) }),
    ),
  });
  try {
    await workspace.initialize();
    return await fn(workspace);
  } finally {
    await workspace.close().catch(() => undefined);
    await releaseWorkspaceLease(scope, record.id, holder, db).catch(() => undefined);
  }
}

/**
 * `session.purge`: the sessions' MCP scopes (every agent's, so team workers' scopes go too: reference bug
 * #2288) and their offload files, with a purge receipt per session.
 */
export async function purgeSessions(
  deps: { drivers: DriverSet; db: Db },
  payload: z.output<typeof ZSessionPurgePayload>,
  log: Logger,
): Promise<{ outcome: "purged" | "no-workspace"; sessions: number }> {
  const { db } = deps;
  const scope = await resolveSystemTenantScope(payload.tenantId, {}, db);
  const record = await findWorkspaceRecordForSystem(payload.workspaceId, db);
  if (
    !record ||
    record.tenantId !== payload.tenantId ||
    record.state === "PURGED" ||
    record.state === "PURGING" ||
    record.state === "PENDING"
  ) {
    // Nothing was ever written for a workspace never provisioned, and a purged one has nothing left.
    return { outcome: "no-workspace", sessions: 0 };
  }
  await withAttachedWorkspace(
    deps.drivers,
    scope,
    record,
    `session.purge:${payload.sessionIds[0]}`,
    async (workspace) => {
      for (const sessionId of payload.sessionIds) {
        const { mcpDeclarations: all } = await takeInventory(workspace.machine);
        const mcpDeclarations = all.filter((entry) => entry.split("/")[1] === sessionId);
        const offloadFiles = await countSessionFiles(workspace.machine, [sessionId]);
        await workspace.purgeSession({ sessionId });
        await recordPurgeReceipt(
          scope,
          {
            targetType: "session",
            targetId: sessionId,
            deleted: {
              workspaceId: record.id,
              mcpDeclarations,
              offloadFiles,
              ledBy: sessionId === payload.sessionIds[0] ? null : payload.sessionIds[0],
              deletedAt: new Date().toISOString(),
            },
          },
          db,
        );
      }
    },
    db,
  );
  log.info({ workspaceId: record.id, sessions: payload.sessionIds.length }, "sessions purged from workspace");
  return { outcome: "purged", sessions: payload.sessionIds.length };
}

/** `agent.purge`: the agent's skill partition and MCP scopes in every workspace it used; one receipt. */
export async function purgeAgent(
  deps: { drivers: DriverSet; db: Db },
  payload: z.output<typeof ZAgentPurgePayload>,
): Promise<{ workspaces: string[] }> {
  const { db } = deps;
  const scope = await resolveSystemTenantScope(payload.tenantId, {}, db);
  const purged: { workspaceId: string; skills: string[] }[] = [];
  for (const workspaceId of new Set(payload.workspaceIds)) {
    const record = await findWorkspaceRecordForSystem(workspaceId, db);
    if (
      !record ||
      record.tenantId !== payload.tenantId ||
      record.state === "PURGED" ||
      record.state === "PURGING" ||
      record.state === "PENDING"
    ) {
      continue;
    }
    await withAttachedWorkspace(
      deps.drivers,
      scope,
      record,
      `agent.purge:${payload.agentId}`,
      async (workspace) => {
        const skills = (await workspace.listSkills(payload.agentId)).skills.map((skill) => skill.name);
        await workspace.purgeAgent({ agentId: payload.agentId });
        await releaseStoredSkills({ workspaceId, partition: partitionName(payload.agentId) }, db);
        purged.push({ workspaceId, skills });
      },
      db,
    );
  }
  await recordPurgeReceipt(
    scope,
    {
      targetType: "agent",
      targetId: payload.agentId,
      deleted: { workspaces: purged, deletedAt: new Date().toISOString() },
    },
    db,
  );
  return { workspaces: purged.map((entry) => entry.workspaceId) };
}
