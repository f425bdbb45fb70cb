import { z } from "zod";
import { ZEgressPolicy, ZEgressRule } from "@/server/workspace/egress/egress-policy";
import { ZSecretName } from "@/server/workspace/egress/egress-secrets";

export type EgressRuleRow = z.infer<typeof ZEgressRule>;

/** One refusal as `workspace.egress` status shows it (never a secret value: names of placeholders only). */
export const ZRefusedEntry = z.object({
  at: z.string(),
  host: z.string(),
  port: z.number(),
  method: z.string(),
  reason: z.string(),
  agentId: z.string().nullable(),
  secretNames: z.array(z.string()).optional(),
});
export type RefusedEntry = z.infer<typeof ZRefusedEntry>;

export const ZEgressPolicyView = z.object({
  /** The policy stored at this level, or null when none is (the tenant's, else `off`, applies). */
  stored: ZEgressPolicy.nullable(),
  /** What applies to this level's workspaces' commands. */
  effective: ZEgressPolicy,
});

export const ZEgressStatus = z.object({
  workspaceId: z.string(),
  /** The tenant's policy, and each agent's own where it has one (an agent's replaces the tenant's). */
  tenantPolicy: ZEgressPolicy,
  refusedCount: z.number().int(),
  lastRefused: z.array(ZRefusedEntry),
});

/** A host a secret is bound to: a name, `*.` + suffix, or an IP address. */
const ZSecretHost = z
  .string()
  .trim()
  .toLowerCase()
  .min(1)
  .max(253)
  .refine(
    (host) => ZEgressRule.shape.host.safeParse(host).success && !host.includes("/"),
    "a host name, *.suffix or IP address",
  );

export const ZSecretCreateRequest = z.object({
  name: ZSecretName,
  /** Shown once, to whoever creates it; stored sealed. */
  value: z
    .string()
    .min(1)
    .max(8192)
    .refine((value) => !/[\r\n\0]/.test(value), "one line, no NUL"),
  hosts: z.array(ZSecretHost).min(1).max(32),
});

export const ZEgressSecretView = z.object({
  id: z.string(),
  name: z.string(),
  /** The last 4 characters of the value (what the dashboard shows of it). */
  hint: z.string(),
  hosts: z.array(z.string()),
  agentId: z.string().nullable(),
  /** What to put in an env value or header so the proxy sends the value. */
  placeholder: z.string(),
  createdAt: z.date(),
});
export type EgressSecretView = Omit<z.infer<typeof ZEgressSecretView>, "placeholder">;

export { ZEgressPolicy };
