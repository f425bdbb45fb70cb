import type { Db } from "@/server/db";
import type { SecretKey } from "@/server/auth/secrets";
import type { TenantScope } from "@/server/auth/scope";
import {
  createAgent,
  findAgentByCreateKey,
  getAgent,
  listAgents,
  patchAgent,
} from "@/server/modules/agent/agent.data";
import { type AgentRemoval, type AgentRemovalDeps, removeAgent } from "@/server/modules/agent/agent-removal";
import {
  type AgentView,
  type TAgentCreateRequest,
  type TAgentUpdateRequest,
  ZAgentCreateRequest,
  ZAgentUpdateRequest,
} from "@/server/modules/agent/agent.schema";
import type { AgentDTO } from "@/server/modules/agent/agent.types";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { assertMayDeclareStdioMcp } from "@/server/modules/tenant/tenant-policy";
import { createOnce, scopedCreateKey } from "@/server/shared/idempotency";
import { parseInput } from "@/server/shared/parse-input";

export type { AgentView };

export type AgentServiceDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  /** Where changes are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
  secretKey: SecretKey;
  /** The workspace service's `session.purge` and `agent.purge` producers (jobs run in the workers). */
  enqueueSessionPurge(
    scope: TenantScope,
    input: { workspaceId: string; agentId: string; sessionIds: string[] },
  ): Promise<{ jobId: string | null }>;
  enqueueAgentPurge(
    scope: TenantScope,
    input: { agentId: string; workspaceIds: string[] },
  ): Promise<{ jobId: string | null }>;
  /** Stops the deleted agent's own workspaces (the workspace service's stop request). */
  requestStop?: AgentRemovalDeps["requestStop"];
  /** Refuses a backend this installation does not run (the workspace service's backend choice). */
  assertBackendChoosable(kind: string | null | undefined): void;
  onAuditFailure?: (error: unknown) => void;
};

const view = (agent: AgentDTO): AgentView => ({ ...agent, hasApiKey: agent.hasModelApiKey });

/** `modelConfig.apiKey` leaves the JSON config here, so a key is never stored in plain text. */
function splitKey<C extends { apiKey?: string | null }>(
  modelConfig: C | undefined,
): { modelConfig: WithoutKey<C> | undefined; apiKey: C["apiKey"] | undefined } {
  if (!modelConfig) return { modelConfig: undefined, apiKey: undefined };
  const { apiKey, ...rest } = modelConfig;
  return { modelConfig: rest as unknown as WithoutKey<C>, apiKey };
}

/** `Omit<C, "apiKey">` that keeps the named keys of a type with an index signature (Omit would drop them). */
type WithoutKey<C> = { [K in keyof C as K extends "apiKey" ? never : K]: C[K] };

/** Default stdio MCPs are commands the agent's workspaces will run: the tenant's stdio policy applies to them. */
async function assertStdioDefaultsAllowed(
  scope: TenantScope,
  defaults: readonly { mcp_config: { type: string } }[] | undefined,
  db: Db,
): Promise<void> {
  if (defaults?.some((declaration) => declaration.mcp_config.type === "stdio_mcp"))
    await assertMayDeclareStdioMcp(scope, db);
}

export function createAgentService(deps: AgentServiceDeps) {
  const { db } = deps;
  const onAuditFailure = deps.onAuditFailure ?? (() => undefined);

  return {
    async create(scope: TenantScope, raw: TAgentCreateRequest): Promise<AgentView> {
      const input = parseInput(ZAgentCreateRequest, raw);
      deps.assertBackendChoosable(input.backend);
      await assertStdioDefaultsAllowed(scope, input.defaultMcpConfigs, db);
      const { modelConfig, apiKey } = splitKey(input.modelConfig);
      // A key seen before answers with its agent, creating (and auditing) nothing.
      return createOnce(input.idempotencyKey ? scopedCreateKey(scope, input.idempotencyKey) : null, {
        earlier: async (createKey) => {
          const first = await findAgentByCreateKey(scope, createKey, db);
          return first ? { result: view(first), createdAt: first.createdAt } : null;
        },
        create: (createKey) =>
          audited(
            deps.audit,
            scope,
            { action: "agent.create", targetType: "agent", targetId: null, details: { name: input.name } },
            async () =>
              view(
                await createAgent(
                  scope,
                  {
                    ...input,
                    modelConfig: modelConfig!,
                    modelApiKey: input.modelApiKey ?? apiKey ?? null,
                    createKey,
                  },
                  deps.secretKey,
                  db,
                ),
              ),
            onAuditFailure,
            (agent) => ({ targetId: agent.id }),
          ),
      });
    },

    async list(scope: TenantScope, options: { limit?: number; cursor?: string } = {}) {
      const page = await listAgents(scope, options, db);
      return { ...page, items: page.items.map(view) };
    },

    async get(scope: TenantScope, agentId: string): Promise<AgentView> {
      return view(await getAgent(scope, agentId, db));
    },

    /**
     * A partial update (see ZAgentUpdateRequest): omitted fields, model settings and the key stay as stored.
     * The audit entry names the fields asked for and the fields that actually changed, never their values.
     */
    async update(scope: TenantScope, agentId: string, raw: TAgentUpdateRequest): Promise<AgentView> {
      const patch = parseInput(ZAgentUpdateRequest, raw);
      deps.assertBackendChoosable(patch.backend);
      await assertStdioDefaultsAllowed(scope, patch.defaultMcpConfigs, db);
      const { modelConfig, apiKey } = splitKey(patch.modelConfig);
      const modelApiKey = patch.modelApiKey !== undefined ? patch.modelApiKey : apiKey;
      const requested = [
        ...Object.keys(patch).filter((key) => key !== "modelConfig" && key !== "modelApiKey"),
        ...Object.keys(modelConfig ?? {}).map((key) => `modelConfig.${key}`),
        ...(modelApiKey !== undefined ? ["modelApiKey"] : []),
      ];
      const { agent } = await audited(
        deps.audit,
        scope,
        { action: "agent.update", targetType: "agent", targetId: agentId, details: { requested } },
        () =>
          patchAgent(
            scope,
            agentId,
            {
              ...patch,
              modelConfig,
              ...(modelApiKey !== undefined ? { modelApiKey } : {}),
            },
            deps.secretKey,
            db,
          ),
        onAuditFailure,
        (result) => ({ details: { fields: result.changedFields } }),
      );
      return view(agent);
    },

    /**
     * Deletes the agent; its sessions and their messages go with it (foreign-key cascade), and so do the team
     * workers those sessions created. `session.purge` then removes the sessions' offload files and
     * `agent.purge` their skill partitions and MCP scopes from every workspace they used (see removeAgent).
     */
    async delete(scope: TenantScope, agentId: string): Promise<AgentRemoval> {
      return removeAgent(scope, agentId, {
        db,
        audit: deps.audit,
        enqueueSessionPurge: (...args) => deps.enqueueSessionPurge(...args),
        enqueueAgentPurge: (...args) => deps.enqueueAgentPurge(...args),
        ...(deps.requestStop ? { requestStop: deps.requestStop } : {}),
        onAuditFailure,
      });
    },
  };
}

export type AgentService = ReturnType<typeof createAgentService>;
