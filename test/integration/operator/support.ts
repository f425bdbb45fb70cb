import { TRPCError } from "@trpc/server";
import { expect } from "vitest";
import { createCaller } from "@/server/api/root";
import type { ApiRuntime } from "@/server/api/context";
import { isAppError } from "@/server/shared/errors";
import { closeProcessBerth } from "@/server/composition/process-berth";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { QueueSet } from "@/server/queue/queues";
import { installTestBerth } from "@/test/setup/test-berth";
import { contextFromHeaders } from "../api/support/api-test-runtime";

/** A caller as an HTTP request with these headers gets (cookie or Bearer key resolved for real). */
export const callerWith = (runtime: ApiRuntime, headers: Record<string, string>) =>
  createCaller(contextFromHeaders(runtime, headers));

/**
 * Makes the harness' queues the process root's: the operator services enqueue through `enqueue()` (the
 * process' queues, as in every Berth process), and the harness' in-process workers must be the ones that
 * take those jobs, under the test's own Redis prefix. Returns the undo.
 */
export async function installProcessQueues(queues: QueueSet<BerthJobCatalog>): Promise<() => Promise<void>> {
  await installTestBerth({ queues });
  return () => closeProcessBerth();
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
