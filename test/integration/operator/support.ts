import { TRPCError } from "@trpc/server";
import { expect } from "vitest";
import { createCaller } from "@/server/api/root";
import type { ApiRuntime } from "@/server/api/context";
import { isAppError } from "@/server/shared/errors";
import { processSlot } from "@/server/shared/process-registry";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { QueueSet } from "@/server/queue/queues";
import { contextFromHeaders } from "../api/support/api-test-runtime";

/** A caller as an HTTP request with these headers gets (cookie or Bearer key resolved for real). */
export const callerWith = (runtime: ApiRuntime, headers: Record<string, string>) =>
  createCaller(contextFromHeaders(runtime, headers));

/**
 * Makes the harness' queues the process-wide ones: the operator services enqueue through `enqueue()` (the
 * process' queues, as in every Berth process), and the harness' in-process workers must be the ones that
 * take those jobs, under the test's own Redis prefix. Returns the undo.
 */
export function installProcessQueues(queues: QueueSet<BerthJobCatalog>): () => void {
  const slot = processSlot<QueueSet<BerthJobCatalog>>("queues");
  slot.set(queues);
  return () => slot.set(undefined);
}

/** Awaits a call that must fail; returns its tRPC code and the AppError's `details.reason`. */
export async function refusal(call: Promise<unknown>): Promise<{ code: string; reason: unknown }> {
  const error = await call.then(
    (value) => expect.fail(`expected a refusal, got ${JSON.stringify(value)?.slice(0, 200)}`),
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(TRPCError);
  const cause = (error as TRPCError).cause;
  return { code: (error as TRPCError).code, reason: isAppError(cause) ? cause.details?.reason : undefined };
}
