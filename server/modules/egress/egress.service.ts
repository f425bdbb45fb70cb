import { randomUUID } from "node:crypto";
import type { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { decryptSecret, encryptSecret, type SecretKey } from "@/server/auth/secrets";
import type { DbClient } from "@/server/db";
import type { Logger } from "@/server/logger";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { assertMayActOnWorkspace } from "@/server/modules/workspace/workspace-access";
import { requireWorkspaceRecord } from "@/server/modules/workspace/workspace-attach";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import {
  effectiveEgressPolicy,
  ZEgressPolicy,
  type EgressPolicy,
} from "@/server/workspace/egress/egress-policy";
import type { EgressRefusal } from "@/server/workspace/egress/egress-proxy";
import { secretPlaceholder, type EgressSecret } from "@/server/workspace/egress/egress-secrets";
import type { EgressLease } from "@/server/workspace/egress/machine-egress";
import {
  agentOfTenant,
  clearEgressPolicy,
  deleteEgressSecret,
  insertEgressSecret,
  listEgressSecrets,
  readEgressPolicy,
  readEgressStats,
  recordEgressRefusal,
  sealedSecretsForAgent,
  writeEgressPolicy,
} from "./egress.data";
import { ZRefusedEntry, ZSecretCreateRequest, type EgressSecretView } from "./egress.types";

/** How many refusals `workspace.egress` status keeps per workspace (the count is kept whole). */
const LAST_REFUSED_KEPT = 10;

const sealingContext = (tenantId: string, id: string) => `egress-secret:${tenantId}:${id}`;

export type EgressServiceDeps = {
  db: DbClient;
  secretKey: SecretKey;
  log: Logger;
  /** Where changes are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
};

/**
 * Egress policies and secrets (issue 25; README of server/workspace/egress and ARCHITECTURE.md "Egress and
 * secrets"): the tenant's and agents' policies and secrets, each workspace's refusals, and the grant a turn
 * opens on its machine. Secret values go in once (sealed) and only ever come out into a turn's grant, in the
 * host process' memory; views show the last 4 characters.
 */
export function createEgressService(deps: EgressServiceDeps) {
  const { db } = deps;
  const onAuditFailure = (error: unknown) =>
    deps.log.warn({ err: error }, "could not audit an egress change");

  /** "" for the tenant, else the agent's id once it is known to be this tenant's (NOT_FOUND otherwise). */
  async function ownerKey(scope: TenantScope, agentId: string | undefined, use: "manage" | "read") {
    if (agentId === undefined) {
      assertCan(scope, use === "manage" ? "tenant:manage" : "tenant:read");
      return "";
    }
    assertCan(scope, use === "manage" ? "agent:manage" : "agent:read");
    if (!(await agentOfTenant(scope, agentId, db))) {
      throw new AppError("NOT_FOUND", `agent ${agentId} not found`, { userMessage: "Agent not found." });
    }
    return agentId;
  }

  async function storedPolicy(scope: TenantScope, agentKey: string): Promise<EgressPolicy | null> {
    const row = await readEgressPolicy(scope, agentKey, db);
    if (!row) return null;
    const parsed = ZEgressPolicy.safeParse({ mode: row.mode, allow: row.allow });
    // A row a later rule no longer accepts fails closed: no egress, never "whatever it said".
    return parsed.success ? parsed.data : { mode: "off", allow: [] };
  }

  async function policyView(scope: TenantScope, agentId?: string) {
    const key = await ownerKey(scope, agentId, "read");
    const tenant = await storedPolicy(scope, "");
    const stored = key ? await storedPolicy(scope, key) : tenant;
    return { stored, effective: effectiveEgressPolicy(tenant, key ? stored : null) };
  }

  async function setPolicy(scope: TenantScope, agentId: string | undefined, raw: unknown) {
    const key = await ownerKey(scope, agentId, "manage");
    const policy = raw === null ? null : parseInput(ZEgressPolicy, raw);
    await audited(
      deps.audit,
      scope,
      {
        action: "egress.policy.set",
        targetType: key ? "agent" : "tenant",
        targetId: key || scope.tenantId,
        details: { mode: policy?.mode ?? "inherit", rules: policy?.allow.length ?? 0 },
      },
      () => (policy ? writeEgressPolicy(scope, key, policy, db) : clearEgressPolicy(scope, key, db)),
      onAuditFailure,
    );
    return policyView(scope, agentId);
  }

  const withPlaceholder = (view: EgressSecretView) => ({
    ...view,
    placeholder: secretPlaceholder(view.name),
  });

  return {
    policy: (scope: TenantScope, agentId?: string) => policyView(scope, agentId),
    /** `null` clears the level's own policy (an agent then follows the tenant's). */
    setPolicy,

    async listSecrets(scope: TenantScope, agentId?: string) {
      const key = await ownerKey(scope, agentId, "manage");
      return (await listEgressSecrets(scope, key, db)).map(withPlaceholder);
    },

    async createSecret(
      scope: TenantScope,
      agentId: string | undefined,
      raw: z.input<typeof ZSecretCreateRequest>,
    ) {
      const key = await ownerKey(scope, agentId, "manage");
      const input = parseInput(ZSecretCreateRequest, raw);
      const id = randomUUID();
      const created = await audited(
        deps.audit,
        scope,
        {
          action: "egress.secret.create",
          targetType: "secret",
          targetId: id,
          details: { name: input.name, agentId: key || null, hosts: input.hosts },
        },
        () =>
          insertEgressSecret(
            scope,
            {
              id,
              agentKey: key,
              name: input.name,
              valueSealed: encryptSecret(deps.secretKey, input.value, sealingContext(scope.tenantId, id)),
              hint: input.value.slice(-4),
              hosts: input.hosts,
            },
            db,
          ).catch((error: unknown) => {
            if ((error as { code?: string }).code === "P2002") {
              throw new AppError("CONFLICT", `a secret named ${input.name} exists`, {
                userMessage: `A secret named ${input.name} already exists here.`,
              });
            }
            throw error;
          }),
        onAuditFailure,
      );
      return withPlaceholder(created);
    },

    async deleteSecret(scope: TenantScope, agentId: string | undefined, secretId: string) {
      const key = await ownerKey(scope, agentId, "manage");
      const deleted = await audited(
        deps.audit,
        scope,
        { action: "egress.secret.delete", targetType: "secret", targetId: secretId },
        () => deleteEgressSecret(scope, key, secretId, db),
        onAuditFailure,
      );
      if (!deleted)
        throw new AppError("NOT_FOUND", `secret ${secretId} not found`, { userMessage: "Secret not found." });
      return { deleted };
    },

    /** `workspace.egress` status: the tenant's policy and the workspace's refusals (count, newest first). */
    async workspaceStatus(scope: TenantScope, workspaceId: string) {
      assertCan(scope, "workspace:read");
      await assertMayActOnWorkspace(scope, await requireWorkspaceRecord(scope, workspaceId, db), db);
      const stats = await readEgressStats(scope, workspaceId, db);
      const lastRefused = ZRefusedEntry.array().safeParse(stats?.lastRefused ?? []);
      return {
        workspaceId,
        tenantPolicy: effectiveEgressPolicy(await storedPolicy(scope, ""), null),
        refusedCount: stats?.refusedCount ?? 0,
        lastRefused: lastRefused.success ? lastRefused.data : [],
      };
    },

    /**
     * The grant of one turn of `agentId` on its workspace's machine: nothing when the policy is `off` or
     * the backend has no egress (E2B, Kubernetes), else the env its commands get (a grant token, never a
     * value). Refusals are counted on the workspace and audited as they happen.
     */
    async openTurnEgress(
      scope: TenantScope,
      turn: { agentId: string; workspaceId: string; machine: WorkspaceMachine },
    ): Promise<EgressLease> {
      const none: EgressLease = { env: {}, close: () => undefined };
      const policy = effectiveEgressPolicy(
        await storedPolicy(scope, ""),
        await storedPolicy(scope, turn.agentId),
      );
      if (policy.mode === "off") return none;
      if (!turn.machine.openEgress) {
        deps.log.warn(
          { workspaceId: turn.workspaceId },
          "egress is not off, but this backend has no egress proxy",
        );
        return none;
      }
      const secrets = await turnSecrets(scope, turn.agentId);
      return turn.machine.openEgress({
        policy,
        secrets,
        onRefused: (refusal) => void refused(scope, turn, refusal),
      });
    },
  };

  async function turnSecrets(scope: TenantScope, agentId: string): Promise<EgressSecret[]> {
    const byName = new Map<string, EgressSecret & { agentLevel: boolean }>();
    for (const row of await sealedSecretsForAgent(scope, agentId, db)) {
      const agentLevel = row.agentKey !== "";
      if (byName.get(row.name)?.agentLevel && !agentLevel) continue; // the agent's own wins
      const value = decryptSecret(deps.secretKey, row.valueSealed, sealingContext(scope.tenantId, row.id));
      byName.set(row.name, { name: row.name, value, hosts: row.hosts as string[], agentLevel });
    }
    return [...byName.values()].map(({ name, value, hosts }) => ({ name, value, hosts }));
  }

  async function refused(
    scope: TenantScope,
    turn: { agentId: string; workspaceId: string },
    refusal: EgressRefusal,
  ) {
    const entry = {
      at: new Date().toISOString(),
      host: refusal.host,
      port: refusal.port,
      method: refusal.method,
      reason: refusal.reason,
      agentId: turn.agentId,
      ...(refusal.secretNames?.length ? { secretNames: refusal.secretNames } : {}),
    };
    await recordEgressRefusal(scope, turn.workspaceId, entry, LAST_REFUSED_KEPT, db).catch((error: unknown) =>
      deps.log.warn({ err: error }, "could not count a refused egress"),
    );
    await deps.audit
      .record(scope, {
        action: "workspace.egress.refused",
        targetType: "workspace",
        targetId: turn.workspaceId,
        outcome: "failure",
        details: { ...entry, message: refusal.message },
      })
      .catch(onAuditFailure);
  }
}

export type EgressService = ReturnType<typeof createEgressService>;
