import { TRPCError } from "@trpc/server";
import { expect } from "vitest";
import { appRouter } from "@/server/api/root";

/** Every procedure path of the app router ("tenant.me", "apiKey.revoke", …), read from the router itself. */
export function allProcedurePaths(): string[] {
  return Object.keys(appRouter._def.procedures).sort();
}

type ProcedureType = "query" | "mutation" | "subscription";

export function procedureType(path: string): ProcedureType {
  const procedures = appRouter._def.procedures as unknown as Record<
    string,
    { _def: { type: ProcedureType } }
  >;
  const procedure = procedures[path];
  if (!procedure) throw new Error(`no procedure ${path}`);
  return procedure._def.type;
}

/** Calls `caller.a.b(input)` for the path "a.b". Subscriptions resolve to their async iterable. */
export function callByPath(caller: unknown, path: string, input: unknown): Promise<unknown> {
  const fn = path.split(".").reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], caller);
  if (typeof fn !== "function") throw new Error(`caller has no procedure ${path}`);
  return Promise.resolve((fn as (input: unknown) => unknown)(input));
}

/** Awaits a call that must fail, and returns its tRPC error code. */
export async function rejectionCode(call: Promise<unknown>): Promise<string> {
  const outcome = await call.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  if (outcome.ok) expect.fail(`expected a rejection, got ${JSON.stringify(outcome.value)?.slice(0, 300)}`);
  expect(outcome.error).toBeInstanceOf(TRPCError);
  return (outcome.error as TRPCError).code;
}
