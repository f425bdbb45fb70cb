import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import { slowestProvisions, stagePercentiles } from "./metrics.data";
import type { Db } from "@/server/db";

export const ZReadinessRange = z.object({
  from: z.coerce.date(),
  to: z.coerce.date(),
  slowest: z.number().int().min(1).max(100).default(10),
});

const ZPercentiles = z.object({
  kind: z.string(),
  backend: z.string(),
  path: z.string(),
  stage: z.string(),
  count: z.number().int(),
  p50: z.number(),
  p95: z.number(),
  p99: z.number(),
});

export const ZReadinessView = z.object({
  from: z.date(),
  to: z.date(),
  stages: z.array(ZPercentiles),
  slowest: z.array(
    z.object({
      workspaceId: z.string().nullable(),
      backend: z.string(),
      path: z.string(),
      durationMs: z.number().int(),
      ok: z.boolean(),
      at: z.date(),
    }),
  ),
});

const MAX_RANGE_MS = 400 * 86_400_000;

/** The readiness picture of a tenant: p50/p95/p99 per stage, backend and path, and the slowest provisions. */
export async function readiness(scope: TenantScope, input: z.output<typeof ZReadinessRange>, db: Db) {
  assertCan(scope, "operations:read");
  if (input.to <= input.from || input.to.getTime() - input.from.getTime() > MAX_RANGE_MS) {
    throw new AppError("BAD_REQUEST", "the range must end after it starts and span at most 400 days", {
      userMessage: "Choose a range that ends after it starts (at most 400 days).",
    });
  }
  const range = { from: input.from, to: input.to };
  const [stages, slowest] = await Promise.all([
    stagePercentiles(scope, range, db),
    slowestProvisions(scope, range, input.slowest, db),
  ]);
  return { from: input.from, to: input.to, stages, slowest };
}
