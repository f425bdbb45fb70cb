import { randomBytes } from "node:crypto";
import { blake2b } from "@noble/hashes/blake2.js";
import { bytesToHex } from "@noble/hashes/utils.js";

/**
 * Which requests share a workspace (agentscope-spec.md §8.1). PER_AGENT (the default): one per
 * (user, agent); PER_USER: one per user, shared by all their agents; PER_SESSION: a fresh one per session.
 */
export const IsolationPolicy = {
  PER_SESSION: "per_session",
  PER_AGENT: "per_agent",
  PER_USER: "per_user",
} as const;
export type IsolationPolicy = (typeof IsolationPolicy)[keyof typeof IsolationPolicy];

export const DEFAULT_ISOLATION: IsolationPolicy = IsolationPolicy.PER_AGENT;

/** The engine's policy of a stored one (`PER_AGENT` in Postgres → `per_agent`); unknown → the default. */
export function isolationOfStored(stored: string): IsolationPolicy {
  return Object.hasOwn(IsolationPolicy, stored)
    ? IsolationPolicy[stored as keyof typeof IsolationPolicy]
    : DEFAULT_ISOLATION;
}

const encoder = new TextEncoder();

function blake2b64Hex(input: string): string {
  return bytesToHex(blake2b(encoder.encode(input), { dkLen: 8 }));
}

/**
 * The workspace id for a request: 16 hex chars of an 8-byte blake2b. PER_AGENT hashes `"{userId}::{agentId}"`,
 * byte-for-byte the reference's (agent ids are unique across tenants, so the tenant is already implied).
 * PER_USER hashes `"user::{tenantId}::{userId}"`: the reference's `"user::{userId}"` gave the same user the
 * same id in every tenant, and ids are global, so their second tenant got a conflict.
 * `legacyPerUserWorkspaceId` is that old id, for bindings made before (see session.service).
 * PER_SESSION mints a random 32-hex id (the reference's uuid4().hex), so it is the one impure case.
 * `sessionId` never enters the hash.
 */
export function assignWorkspaceId(
  policy: IsolationPolicy,
  ids: { tenantId: string; userId: string; agentId: string; sessionId?: string },
): string {
  switch (policy) {
    case IsolationPolicy.PER_AGENT:
      return blake2b64Hex(`${ids.userId}::${ids.agentId}`);
    case IsolationPolicy.PER_USER:
      return blake2b64Hex(`user::${ids.tenantId}::${ids.userId}`);
    case IsolationPolicy.PER_SESSION:
      return randomBytes(16).toString("hex");
  }
}

/** The PER_USER id before the tenant was part of it; only ever looked up inside the caller's tenant. */
export function legacyPerUserWorkspaceId(userId: string): string {
  return blake2b64Hex(`user::${userId}`);
}
