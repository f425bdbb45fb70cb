import { z } from "zod";

const USAGE_KINDS = [
  "workspace_seconds",
  "provision",
  "turn",
  "input_tokens",
  "output_tokens",
  "tool_call",
] as const;
export type UsageKind = (typeof USAGE_KINDS)[number];

const id = z.string().min(1).max(200);

/** One metered quantity, as buffered in Redis and stored in the ledger (UsageRecord). */
export const ZUsageEntry = z.object({
  id: z.string().uuid(),
  tenantId: id,
  kind: z.enum(USAGE_KINDS),
  quantity: z.number().finite().min(0),
  backend: z.string().max(40).nullable().default(null),
  size: z.string().max(80).nullable().default(null),
  agentId: id.nullable().default(null),
  sessionId: id.nullable().default(null),
  userId: id.nullable().default(null),
  workspaceId: id.nullable().default(null),
  at: z.coerce.date(),
});
export type TUsageEntry = z.output<typeof ZUsageEntry>;

/** What a caller records: the id and time are added by the buffer. */
export type UsageInput = Omit<z.input<typeof ZUsageEntry>, "id" | "at"> & { at?: Date };

/** Summed quantities per kind and backend (budget spend, the Settings card). */
export type UsageSums = { kind: UsageKind; backend: string | null; quantity: number }[];

/** The first instant of the UTC month `at` is in, and its `YYYY-MM` label. */
export function monthOf(at: Date): { start: Date; label: string } {
  const start = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
  return { start, label: start.toISOString().slice(0, 7) };
}
