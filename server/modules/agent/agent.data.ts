import { parseInput } from "@/server/shared/parse-input";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { isDeepStrictEqual } from "node:util";
import type { Prisma } from "@/generated/prisma/client";
import { type Db, type DbClient, isUniqueViolation, pageSize } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { decryptSecret, encryptSecret, type SecretKey } from "@/server/auth/secrets";
import { AppError } from "@/server/shared/errors";
import {
  type AgentDTO,
  type TCreateAgentInput,
  type TUpdateAgentInput,
  ZAgentDefaultMcps,
  ZAgentDefaultSkills,
  ZAgentModelConfig,
  ZCreateAgentInput,
  ZUpdateAgentInput,
} from "@/server/modules/agent/agent.types";
import { mergeModelConfig } from "@/server/modules/agent/model-config-patch";
import { storedWorkspaceEnv } from "@/server/workspace/workspace-env";
import { type Page, pageArgs, paginate } from "@/server/shared/page";

// The ciphertext column is never selected into a DTO; only `modelApiKeyEncrypted: { not: null }`
// style checks and getAgentModelApiKey read it.
const agentSelect = {
  id: true,
  name: true,
  description: true,
  systemPrompt: true,
  modelConfig: true,
  defaultMcpConfigs: true,
  defaultSkills: true,
  env: true,
  isolationPolicy: true,
  backend: true,
  createdByUserId: true,
  createdByLeaderSessionId: true,
  createdAt: true,
  updatedAt: true,
} satisfies Prisma.AgentSelect;

type AgentRow = Prisma.AgentGetPayload<{ select: typeof agentSelect }>;

function toAgentDTO(row: AgentRow, hasModelApiKey: boolean): AgentDTO {
  return {
    ...row,
    modelConfig: ZAgentModelConfig.parse(row.modelConfig),
    defaultMcpConfigs: Array.isArray(row.defaultMcpConfigs) ? row.defaultMcpConfigs : [],
    defaultSkills: Array.isArray(row.defaultSkills) ? row.defaultSkills : [],
    env: storedWorkspaceEnv(row.env),
    hasModelApiKey,
  };
}

/** The AES-GCM associated data: a ciphertext only decrypts for the agent row it was written for. */
const secretContext = (tenantId: string, agentId: string) => `agent-model-api-key:${tenantId}:${agentId}`;

export async function createAgent(
  scope: TenantScope,
  rawInput: TCreateAgentInput,
  secretKey: SecretKey,
  db: DbClient,
): Promise<AgentDTO> {
  const input = parseInput(ZCreateAgentInput, rawInput);
  const id = randomUUID();
  try {
    const row = await db.agent.create({
      data: {
        id,
        tenantId: scope.tenantId,
        name: input.name,
        description: input.description,
        systemPrompt: input.systemPrompt,
        modelConfig: input.modelConfig,
        modelApiKeyEncrypted: input.modelApiKey
          ? encryptSecret(secretKey, input.modelApiKey, secretContext(scope.tenantId, id))
          : null,
        defaultMcpConfigs: input.defaultMcpConfigs,
        defaultSkills: input.defaultSkills,
        env: input.env,
        isolationPolicy: input.isolationPolicy ?? null,
        backend: input.backend ?? null,
        createdByUserId: scope.userId,
        createdByLeaderSessionId: input.createdByLeaderSessionId ?? null,
        createKey: input.createKey ?? null,
      },
      select: agentSelect,
    });
    return toAgentDTO(row, Boolean(input.modelApiKey));
  } catch (error) {
    throw mapNameConflict(error, input.name);
  }
}

/** The agent a create with this `createKey` made (see `scopedCreateKey`); null when there is none. */
export async function findAgentByCreateKey(
  scope: TenantScope,
  createKey: string,
  db: DbClient,
): Promise<AgentDTO | null> {
  const row = await db.agent.findUnique({
    where: { tenantId_createKey: { tenantId: scope.tenantId, createKey } },
    select: { ...agentSelect, modelApiKeyEncrypted: true },
  });
  if (!row) return null;
  const { modelApiKeyEncrypted, ...rest } = row;
  return toAgentDTO(rest, modelApiKeyEncrypted !== null);
}

export async function getAgentOrNull(
  scope: TenantScope,
  agentId: string,
  db: DbClient,
): Promise<AgentDTO | null> {
  const row = await db.agent.findFirst({
    where: { tenantId: scope.tenantId, id: agentId },
    select: { ...agentSelect, modelApiKeyEncrypted: true },
  });
  if (!row) return null;
  const { modelApiKeyEncrypted, ...rest } = row;
  return toAgentDTO(rest, modelApiKeyEncrypted !== null);
}

export async function getAgent(scope: TenantScope, agentId: string, db: DbClient): Promise<AgentDTO> {
  const agent = await getAgentOrNull(scope, agentId, db);
  if (!agent) throw agentNotFound(agentId);
  return agent;
}

export async function getAgentByName(
  scope: TenantScope,
  name: string,
  db: DbClient,
): Promise<AgentDTO | null> {
  const row = await db.agent.findFirst({ where: { tenantId: scope.tenantId, name }, select: { id: true } });
  return row ? getAgentOrNull(scope, row.id, db) : null;
}

/** Newest first. */
export async function listAgents(
  scope: TenantScope,
  options: { limit?: number; cursor?: string } = {},
  db: DbClient,
): Promise<Page<AgentDTO>> {
  const take = pageSize(options.limit);
  const rows = await db.agent.findMany({
    where: { tenantId: scope.tenantId },
    select: { ...agentSelect, modelApiKeyEncrypted: true },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    ...pageArgs(take, options.cursor),
  });
  return paginate(rows, take, ({ modelApiKeyEncrypted, ...rest }) =>
    toAgentDTO(rest, modelApiKeyEncrypted !== null),
  );
}

/**
 * Applies a partial change in one transaction with the row locked, so concurrent patches merge onto each
 * other instead of losing one. Fields absent from the patch keep their stored values; `modelConfig` is merged
 * key by key (see mergeModelConfig); the key is kept unless a new one (or null, to clear it) is given.
 * Returns the agent and the names of the fields that changed (`modelConfig.<key>`, `modelApiKey`), never values.
 */
export async function patchAgent(
  scope: TenantScope,
  agentId: string,
  rawPatch: TUpdateAgentInput,
  secretKey: SecretKey,
  db: Db,
): Promise<{ agent: AgentDTO; changedFields: string[] }> {
  const patch = parseInput(ZUpdateAgentInput, rawPatch);
  try {
    return await db.$transaction(async (tx) => {
      const locked = await tx.$queryRaw<{ id: string }[]>`
        SELECT id FROM agents WHERE tenant_id = ${scope.tenantId} AND id = ${agentId} FOR UPDATE`;
      if (locked.length === 0) throw agentNotFound(agentId);
      const current = await tx.agent.findFirstOrThrow({
        where: { tenantId: scope.tenantId, id: agentId },
        select: { ...agentSelect, modelApiKeyEncrypted: true },
      });
      const data: Prisma.AgentUpdateManyMutationInput = {};
      const changedFields: string[] = [];
      if (patch.name !== undefined && patch.name !== current.name) {
        data.name = patch.name;
        changedFields.push("name");
      }
      if (patch.description !== undefined && patch.description !== current.description) {
        data.description = patch.description;
        changedFields.push("description");
      }
      if (patch.systemPrompt !== undefined && patch.systemPrompt !== current.systemPrompt) {
        data.systemPrompt = patch.systemPrompt;
        changedFields.push("systemPrompt");
      }
      if (patch.isolationPolicy !== undefined && patch.isolationPolicy !== current.isolationPolicy) {
        data.isolationPolicy = patch.isolationPolicy;
        changedFields.push("isolationPolicy");
      }
      if (patch.backend !== undefined && patch.backend !== current.backend) {
        data.backend = patch.backend;
        changedFields.push("backend");
      }
      for (const field of ["defaultMcpConfigs", "defaultSkills", "env"] as const) {
        const value = patch[field];
        if (value === undefined || isDeepStrictEqual(value, current[field])) continue;
        data[field] = value;
        changedFields.push(field);
      }
      if (patch.modelConfig !== undefined) {
        const { merged, changed } = mergeModelConfig(
          ZAgentModelConfig.parse(current.modelConfig),
          patch.modelConfig,
        );
        if (changed.length > 0) {
          data.modelConfig = merged;
          changedFields.push(...changed.map((key) => `modelConfig.${key}`));
        }
      }
      if (patch.modelApiKey === null && current.modelApiKeyEncrypted !== null) {
        data.modelApiKeyEncrypted = null;
        changedFields.push("modelApiKey");
      } else if (typeof patch.modelApiKey === "string") {
        // A new ciphertext either way (fresh IV): a rotation to the same key is still recorded as a change.
        data.modelApiKeyEncrypted = encryptSecret(
          secretKey,
          patch.modelApiKey,
          secretContext(scope.tenantId, agentId),
        );
        changedFields.push("modelApiKey");
      }
      if (changedFields.length === 0) {
        const { modelApiKeyEncrypted, ...rest } = current;
        return { agent: toAgentDTO(rest, modelApiKeyEncrypted !== null), changedFields };
      }
      await tx.agent.updateMany({ where: { tenantId: scope.tenantId, id: agentId }, data });
      return { agent: await getAgent(scope, agentId, tx), changedFields };
    });
  } catch (error) {
    throw mapNameConflict(error, patch.name ?? "");
  }
}

/** An agent's defaults as `editAgentDefaults` hands them to its edit (parsed: the stored shapes). */
export type AgentDefaults = {
  defaultMcpConfigs: z.output<typeof ZAgentDefaultMcps>;
  defaultSkills: z.output<typeof ZAgentDefaultSkills>;
};

/**
 * Changes an agent's default MCPs and skills with the row locked, so an edit computed from the current lists
 * (the library's "equip": add or replace one entry by name) never loses a concurrent change. `edit` returns
 * the new lists; they are validated as an update would be (names unique, at most 100 each).
 */
export async function editAgentDefaults(
  scope: TenantScope,
  agentId: string,
  edit: (current: AgentDefaults) => AgentDefaults,
  db: Db,
): Promise<{ agent: AgentDTO; changed: boolean }> {
  return db.$transaction(async (tx) => {
    const locked = await tx.$queryRaw<{ id: string }[]>`
      SELECT id FROM agents WHERE tenant_id = ${scope.tenantId} AND id = ${agentId} FOR UPDATE`;
    if (locked.length === 0) throw agentNotFound(agentId);
    const row = await tx.agent.findFirstOrThrow({
      where: { tenantId: scope.tenantId, id: agentId },
      select: { defaultMcpConfigs: true, defaultSkills: true },
    });
    // Rows stored before a schema change may not parse; an edit then starts from what does.
    const current: AgentDefaults = {
      defaultMcpConfigs: ZAgentDefaultMcps.safeParse(row.defaultMcpConfigs).data ?? [],
      defaultSkills: ZAgentDefaultSkills.safeParse(row.defaultSkills).data ?? [],
    };
    const next = parseInput(
      z.object({ defaultMcpConfigs: ZAgentDefaultMcps, defaultSkills: ZAgentDefaultSkills }),
      edit(current),
    );
    const changed =
      !isDeepStrictEqual(next.defaultMcpConfigs, row.defaultMcpConfigs) ||
      !isDeepStrictEqual(next.defaultSkills, row.defaultSkills);
    if (changed) {
      await tx.agent.updateMany({
        where: { tenantId: scope.tenantId, id: agentId },
        data: { defaultMcpConfigs: next.defaultMcpConfigs, defaultSkills: next.defaultSkills },
      });
    }
    return { agent: await getAgent(scope, agentId, tx), changed };
  });
}

/** `patchAgent` without the list of changed fields. */
export async function updateAgent(
  scope: TenantScope,
  agentId: string,
  rawPatch: TUpdateAgentInput,
  secretKey: SecretKey,
  db: Db,
): Promise<AgentDTO> {
  return (await patchAgent(scope, agentId, rawPatch, secretKey, db)).agent;
}

/** Deletes the agent row (its sessions and messages cascade). Workspaces are purged by the service first. */
export async function deleteAgent(scope: TenantScope, agentId: string, db: DbClient): Promise<void> {
  const { count } = await db.agent.deleteMany({ where: { tenantId: scope.tenantId, id: agentId } });
  if (count === 0) throw agentNotFound(agentId);
}

/** The team workers that these (leader) sessions created with `AgentCreate`; invited agents are not among them. */
export async function listWorkerAgentIds(
  scope: TenantScope,
  leaderSessionIds: string[],
  db: DbClient,
): Promise<string[]> {
  if (leaderSessionIds.length === 0) return [];
  const rows = await db.agent.findMany({
    where: { tenantId: scope.tenantId, createdByLeaderSessionId: { in: leaderSessionIds } },
    select: { id: true },
    orderBy: { id: "asc" },
  });
  return rows.map((row) => row.id);
}

/**
 * The decrypted provider key, for the agent runtime only (never for API responses). Null when the
 * agent has none.
 */
export async function getAgentModelApiKey(
  scope: TenantScope,
  agentId: string,
  secretKey: SecretKey,
  db: DbClient,
): Promise<string | null> {
  const row = await db.agent.findFirst({
    where: { tenantId: scope.tenantId, id: agentId },
    select: { modelApiKeyEncrypted: true },
  });
  if (!row) throw agentNotFound(agentId);
  return row.modelApiKeyEncrypted === null
    ? null
    : decryptSecret(secretKey, row.modelApiKeyEncrypted, secretContext(scope.tenantId, agentId));
}

/**
 * An agent as a chat turn uses it, in one read: the record, and its provider key, decrypted only when the
 * turn asks (a key that no longer decrypts fails the turn, not the send).
 */
export async function getAgentForTurn(
  scope: TenantScope,
  agentId: string,
  secretKey: SecretKey,
  db: DbClient,
): Promise<{ agent: AgentDTO; modelApiKey: () => string | null }> {
  const row = await db.agent.findFirst({
    where: { tenantId: scope.tenantId, id: agentId },
    select: { ...agentSelect, modelApiKeyEncrypted: true },
  });
  if (!row) throw agentNotFound(agentId);
  const { modelApiKeyEncrypted, ...rest } = row;
  return {
    agent: toAgentDTO(rest, modelApiKeyEncrypted !== null),
    modelApiKey: () =>
      modelApiKeyEncrypted === null
        ? null
        : decryptSecret(secretKey, modelApiKeyEncrypted, secretContext(scope.tenantId, agentId)),
  };
}

function mapNameConflict(error: unknown, name: string): unknown {
  if (isUniqueViolation(error)) {
    return new AppError("CONFLICT", `agent name ${name} is taken`, {
      cause: error,
      userMessage: `An agent named "${name}" already exists.`,
    });
  }
  return error;
}

export function agentNotFound(agentId: string): AppError {
  return new AppError("NOT_FOUND", `agent ${agentId} not found`, { userMessage: "Agent not found." });
}
