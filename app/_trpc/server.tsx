// Server-only helper for server components: the same router, called in-process with the request's
// cookies (no HTTP hop).
import { headers } from "next/headers";
import { cache } from "react";
import { processApiRuntime } from "@/server/api/composition";
import { createContextInner } from "@/server/api/context";
import { createCaller } from "@/server/api/root";

// `cache` scopes it to one server render: one context per request.
const createRscContext = cache(async () =>
  createContextInner({ runtime: processApiRuntime(), headers: new Headers(await headers()) }),
);

/** A server-side caller for this request; errors are TRPCErrors with the mapped codes. */
export async function getServerCaller() {
  return createCaller(await createRscContext());
}
