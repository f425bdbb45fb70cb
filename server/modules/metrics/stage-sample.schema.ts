import { z } from "zod";

/**
 * The vocabulary of stage timings. A provision (the worker's job) measures `queued` (requested → job picked
 * up), `machine` (picked up → machine created: image ready, container/Pod/sandbox started), `gateway`
 * (machine created → gateway ready) and `total` (requested → READY). An API process measures `attach`
 * (provisioned, or found READY → attached) and `first_answer` (attached → first tool call answered). A chat
 * turn measures `queue_wait` (turn requested → workspace in hand), `model` and `tool`. A provision's path
 * says how its machine came: `cold` (created), `resume` (restarted), `replaced`, `warm` (a warm pool's
 * machine bound to it: `machine` is then the claim and bind) or `pool_miss` (created, because the
 * driver's pool was empty or its machine could not be bound).
 */
const STAGE_KINDS = ["provision", "attach", "turn"] as const;
export const STAGE_PATHS = ["cold", "resume", "reattach", "replaced", "turn", "warm", "pool_miss"] as const;
const STAGES = [
  "queued",
  "machine",
  "gateway",
  "total",
  "attach",
  "first_answer",
  "queue_wait",
  "model",
  "tool",
] as const;

export const ZStageSample = z.object({
  tenantId: z.string().min(1).max(200),
  kind: z.enum(STAGE_KINDS),
  backend: z.string().min(1).max(32),
  path: z.enum(STAGE_PATHS),
  stage: z.enum(STAGES),
  // Clamped, not refused: a clock step between two marks must not drop the whole batch.
  durationMs: z
    .number()
    .finite()
    .transform((ms) => Math.min(Math.max(Math.round(ms), 0), 2_147_483_647)),
  ok: z.boolean().default(true),
  workspaceId: z.string().min(1).max(200).nullable().default(null),
  at: z.coerce.date(),
});
export type TStageSampleInput = z.input<typeof ZStageSample>;
export type TStageSample = z.output<typeof ZStageSample>;
export type TStagePath = (typeof STAGE_PATHS)[number];
