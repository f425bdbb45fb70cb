import { parseInput } from "@/server/shared/parse-input";
import { randomUUID } from "node:crypto";
import type { Prisma } from "@/generated/prisma/client";
import { type DbClient, getDb, isUniqueViolation, pageSize } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { decryptSecret, encryptSecret, type SecretKey } from "@/server/auth/secrets";
import { AppError } from "@/server/shared/errors";
import {
  type AgentDTO,
  type TCreateAgentInput,
  type TUpdateAgentInput,
  ZAgentModelConfig,
  ZCreateAgentInput,
  ZUpdateAgentInput,
} from "@/server/modules/agent/agent.types";
import type { Page } from "@/server/shared/page";

// The ciphertext column is never selected into a DTO; only `modelApiKeyEncrypted: { not: null }`
// style checks and getAgentModelApiKey read it.
const agentSelect = {
  id: true,
  name: true,
  description: true,
  modelConfig: true,
  defaultMcpConfigs: true,
  defaultSkills: true,
  isolationPolicy: true,
  createdByUserId: true,
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
    hasModelApiKey,
  };
}

/** The AES-GCM associated data: a ciphertext only decrypts for the agent row it was written for. */
const secretContext = (tenantId: string, agentId: string) => `agent-model-api-key:${tenantId}:${agentId}`;

export async function createAgent(
  scope: TenantScope,
  rawInput: TCreateAgentInput,
  secretKey: SecretKey,
  db: DbClient = getDb(),
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
        modelConfig: input.modelConfig as Prisma.InputJsonValue,
        modelApiKeyEncrypted: input.modelApiKey
          ? encryptSecret(secretKey, input.modelApiKey, secretContext(scope.tenantId, id))
          : null,
        defaultMcpConfigs: input.defaultMcpConfigs as Prisma.InputJsonValue,
        defaultSkills: input.defaultSkills as Prisma.InputJsonValue,
        isolationPolicy: input.isolationPolicy ?? null,
        createdByUserId: scope.userId,
      },
      select: agentSelect,
    });
    return toAgentDTO(row, Boolean(input.modelApiKey));
  } catch (error) {
    throw mapNameConflict(error, input.name);
  }
}

export async function getAgentOrNull(
  scope: TenantScope,
  agentId: string,
  db: DbClient = getDb(),
): Promise<AgentDTO | null> {
  const row = await db.agent.findFirst({
    where: { tenantId: scope.tenantId, id: agentId },
    select: { ...agentSelect, modelApiKeyEncrypted: true },
  });
  if (!row) return null;
  const { modelApiKeyEncrypted, ...rest } = row;
  return toAgentDTO(rest, modelApiKeyEncrypted !== null);
}

export async function getAgent(
  scope: TenantScope,
  agentId: string,
  db: DbClient = getDb(),
): Promise<AgentDTO> {
  const agent = await getAgentOrNull(scope, agentId, db);
  if (!agent) throw notFound(agentId);
  return agent;
}

export async function getAgentByName(
  scope: TenantScope,
  name: string,
  db: DbClient = getDb(),
): Promise<AgentDTO | null> {
  const row = await db.agent.findFirst({ where: { tenantId: scope.tenantId, name }, select: { id: true } });
  return row ? getAgentOrNull(scope, row.id, db) : null;
}

/** Newest first. */
export async function listAgents(
  scope: TenantScope,
  options: { limit?: number; cursor?: string } = {},
  db: DbClient = getDb(),
): Promise<Page<AgentDTO>> {
  const take = pageSize(options.limit);
  const rows = await db.agent.findMany({
    where: { tenantId: scope.tenantId },
    select: { ...agentSelect, modelApiKeyEncrypted: true },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: take + 1,
    ...(options.cursor ? { cursor: { id: options.cursor }, skip: 1 } : {}),
  });
  const items = rows
    .slice(0, take)
    .map(({ modelApiKeyEncrypted, ...rest }) => toAgentDTO(rest, modelApiKeyEncrypted !== null));
  return { items, nextCursor: rows.length > take ? (rows[take - 1]?.id ?? null) : null };
}

export async function updateAgent(
  scope: TenantScope,
  agentId: string,
  rawPatch: TUpdateAgentInput,
  secretKey: SecretKey,
  db: DbClient = getDb(),
): Promise<AgentDTO> {
  const patch = parseInput(ZUpdateAgentInput, rawPatch);
  const data: Prisma.AgentUpdateManyMutationInput = {
    ...(patch.name !== undefined ? { name: patch.name } : {}),
    ...(patch.description !== undefined ? { description: patch.description } : {}),
    ...(patch.modelConfig !== undefined ? { modelConfig: patch.modelConfig as Prisma.InputJsonValue } : {}),
    ...(patch.defaultMcpConfigs !== undefined
      ? { defaultMcpConfigs: patch.defaultMcpConfigs as Prisma.InputJsonValue }
      : {}),
    ...(patch.defaultSkills !== undefined
      ? { defaultSkills: patch.defaultSkills as Prisma.InputJsonValue }
      : {}),
    ...(patch.isolationPolicy !== undefined ? { isolationPolicy: patch.isolationPolicy } : {}),
    ...(patch.modelApiKey !== undefined
      ? {
          modelApiKeyEncrypted:
            patch.modelApiKey === null
              ? null
              : encryptSecret(secretKey, patch.modelApiKey, secretContext(scope.tenantId, agentId)),
        }
      : {}),
  };
  try {
    const { count } = await db.agent.updateMany({ where: { tenantId: scope.tenantId, id: agentId }, data });
    if (count === 0) throw notFound(agentId);
  } catch (error) {
    throw mapNameConflict(error, patch.name ?? "");
  }
  return getAgent(scope, agentId, db);
}

/** Deletes the agent row (its sessions and messages cascade). Workspaces are purged by the service first. */
export async function deleteAgent(
  scope: TenantScope,
  agentId: string,
  db: DbClient = getDb(),
): Promise<void> {
  const { count } = await db.agent.deleteMany({ where: { tenantId: scope.tenantId, id: agentId } });
  if (count === 0) throw notFound(agentId);
}

/**
 * The decrypted provider key, for the agent runtime only (never for API responses). Null when the
 * agent has none.
 */
export async function getAgentModelApiKey(
  scope: TenantScope,
  agentId: string,
  secretKey: SecretKey,
  db: DbClient = getDb(),
): Promise<string | null> {
  const row = await db.agent.findFirst({
    where: { tenantId: scope.tenantId, id: agentId },
    select: { modelApiKeyEncrypted: true },
  });
  if (!row) throw notFound(agentId);
  return row.modelApiKeyEncrypted === null
    ? null
    : decryptSecret(secretKey, row.modelApiKeyEncrypted, secretContext(scope.tenantId, agentId));
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

function notFound(agentId: string): AppError {
  return new AppError("NOT_FOUND", `agent ${agentId} not found`, { userMessage: "Agent not found." });
}
