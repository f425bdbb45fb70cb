import { parseInput } from "@/server/shared/parse-input";
import { isAPIError } from "better-auth/api";
import type { BerthAuth } from "@/server/auth/auth";
import type { z } from "zod";
import { API_KEY_PREFIX } from "@/server/auth/auth";
import { deriveApiKey, withSuppliedApiKey } from "@/server/auth/api-key-material";
import { authenticateApiKey, hashApiKey } from "@/server/auth/resolve";
import type { BerthConfig } from "@/server/config/config";
import { createOnce, scopedCreateKey } from "@/server/shared/idempotency";
import { assertCan, canGrantRole } from "@/server/auth/policy";
import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import {
  findApiKeyByCreateKey,
  listApiKeys,
  revokeApiKey as revokeApiKeyRow,
  setApiKeyOwnership,
} from "@/server/modules/api-key/api-key.data";
import {
  type CreatedApiKey,
  type TCreateApiKeyInput,
  ZCreateApiKeyInput,
} from "@/server/modules/api-key/api-key.types";
import { appendAuditLog } from "@/server/modules/audit/audit.data";
import type { ApiKeyDTO } from "@/server/modules/api-key/api-key.types";
import type { Db } from "@/server/db";

/** The server's secret keyed API keys are derived from (the root's `secrets.authSecret`). */
export type ApiKeySecret = { keySecret: () => string };

/** The API-key secret of a root's configuration. */
export function apiKeySecret(config: Pick<BerthConfig, "secrets">): ApiKeySecret {
  return { keySecret: () => config.secrets.authSecret };
}

/**
 * Creates a tenant API key through better-auth's API-key plugin (random key, SHA-256 hash at rest)
 * and records its role and creator. Admins only; nobody grants a role above their own.
 */
export async function createApiKey(
  auth: BerthAuth,
  scope: TenantScope,
  rawInput: TCreateApiKeyInput,
  deps: ApiKeySecret,
  db: Db,
): Promise<CreatedApiKey> {
  assertCan(scope, "api-key:manage");
  const input = parseInput(ZCreateApiKeyInput, rawInput);
  if (!canGrantRole(scope.role, input.role)) {
    throw new AppError("FORBIDDEN", `role ${scope.role} may not create a ${input.role} key`, {
      userMessage: "You cannot create a key with more rights than your own.",
    });
  }
  if (!scope.userId) {
    throw new AppError("BAD_REQUEST", "api keys are created on behalf of a user", {
      userMessage: "API keys must be created by a signed-in user.",
    });
  }
  const { idempotencyKey } = input;
  if (!idempotencyKey) return mintApiKey(auth, scope, input, null, db);
  const createKey = scopedCreateKey(scope, idempotencyKey);
  const plainKey = deriveApiKey(deps.keySecret(), `${scope.tenantId}:${createKey}`, API_KEY_PREFIX);
  return createOnce(createKey, {
    earlier: async () => {
      const first = await findApiKeyByCreateKey(scope, { createKey, keyHash: hashApiKey(plainKey) }, db);
      if (!first) return null;
      if (!first.hashMatches) throw keyNotDerivable(first.apiKey);
      // A concurrent create with this key stored it but has not recorded Berth's columns yet: record them
      // here too (the same values), so both answers carry the key's role.
      const apiKey =
        first.createKey === null
          ? await recordOwnership(scope, first.apiKey.id, input, createKey, db)
          : first.apiKey;
      return { result: { apiKey, plainKey }, createdAt: apiKey.createdAt };
    },
    create: () => mintApiKey(auth, scope, input, { createKey, plainKey }, db),
  });
}

/** The server's secret changed since the first create: its key cannot be shown again, nor a second made. */
function keyNotDerivable(apiKey: ApiKeyDTO): AppError {
  return new AppError("CONFLICT", `idempotency key's api key ${apiKey.id} can no longer be derived`, {
    userMessage: `This request already created the key "${apiKey.name ?? apiKey.id}" (${apiKey.id}), but it cannot be shown again: revoke it and create a new one.`,
    details: { apiKeyId: apiKey.id, name: apiKey.name },
  });
}

function recordOwnership(
  scope: TenantScope,
  apiKeyId: string,
  input: z.output<typeof ZCreateApiKeyInput>,
  createKey: string | null,
  db: Db,
): Promise<ApiKeyDTO> {
  return setApiKeyOwnership(
    scope,
    apiKeyId,
    {
      role: input.role,
      createdByUserId: scope.userId,
      mintedByApiKeyId: scope.apiKeyId && !input.detached ? scope.apiKeyId : null,
      createKey,
    },
    db,
  );
}

async function mintApiKey(
  auth: BerthAuth,
  scope: TenantScope,
  input: z.output<typeof ZCreateApiKeyInput>,
  keyed: { createKey: string; plainKey: string } | null,
  db: Db,
): Promise<CreatedApiKey> {
  let created: { id: string; key: string };
  const create = () =>
    // Server-side call: the plugin re-checks that this user is a member allowed to create keys.
    auth.api.createApiKey({
      body: {
        name: input.name,
        organizationId: scope.tenantId,
        userId: scope.userId!,
        ...(input.expiresInSeconds ? { expiresIn: input.expiresInSeconds } : {}),
      },
    });
  try {
    created = await (keyed ? withSuppliedApiKey(keyed.plainKey, create) : create());
  } catch (error) {
    throw fromAuthError(error);
  }
  const apiKey = await recordOwnership(scope, created.id, input, keyed?.createKey ?? null, db);
  await appendAuditLog(
    scope,
    {
      action: "api-key.create",
      targetType: "api_key",
      targetId: created.id,
      outcome: "success",
      details: {
        role: input.role,
        ...(scope.apiKeyId
          ? { mintedByApiKeyId: apiKey.mintedByApiKeyId, detached: apiKey.mintedByApiKeyId === null }
          : {}),
      },
    },
    db,
  );
  return { apiKey, plainKey: created.key };
}

export async function revokeApiKey(scope: TenantScope, apiKeyId: string, db: Db): Promise<ApiKeyDTO> {
  assertCan(scope, "api-key:manage");
  const { alsoRevoked, ...key } = await revokeApiKeyRow(scope, apiKeyId, db);
  await appendAuditLog(
    scope,
    {
      action: "api-key.revoke",
      targetType: "api_key",
      targetId: apiKeyId,
      outcome: "success",
      ...(alsoRevoked.length > 0 ? { details: { alsoRevoked } } : {}),
    },
    db,
  );
  return key;
}

export type VerifiedApiKey = {
  apiKeyId: string;
  tenantId: string;
  role: TenantRole;
  createdByUserId: string | null;
};

/**
 * Checks a plain key exactly as request authentication does (hash lookup, enabled, not revoked, not
 * expired) and records its last use. Returns null for an unknown, revoked or expired key.
 */
export async function verifyApiKey(plainKey: string, db: Db): Promise<VerifiedApiKey | null> {
  const gate = await authenticateApiKey(plainKey, db);
  if (!gate) return null;
  return {
    apiKeyId: gate.id,
    tenantId: gate.tenantId,
    role: gate.role,
    createdByUserId: gate.createdByUserId,
  };
}

function fromAuthError(error: unknown): AppError {
  if (isAPIError(error)) {
    const code =
      error.statusCode === 403 ? "FORBIDDEN" : error.statusCode === 401 ? "UNAUTHORIZED" : "BAD_REQUEST";
    return new AppError(code, `api key plugin: ${error.message}`, {
      cause: error,
      userMessage: error.message,
    });
  }
  return new AppError("INTERNAL", "api key plugin failed", { cause: error, userMessage: "Internal error" });
}

/** The tenant's API keys (never their secrets; revoked ones on request). */
export function listTenantApiKeys(scope: TenantScope, options: { includeRevoked: boolean }, db: Db) {
  return listApiKeys(scope, options, db);
}
