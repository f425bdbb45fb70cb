// Server-only helpers for server components: the same router, called in-process with the request's
// cookies (no HTTP hop), plus prefetch-and-hydrate for client components.
import { dehydrate, HydrationBoundary } from "@tanstack/react-query";
import { createTRPCOptionsProxy } from "@trpc/tanstack-react-query";
import { headers } from "next/headers";
import { cache, type ReactNode } from "react";
import { makeQueryClient } from "@/app/_trpc/query-client";
import { getApiComposition } from "@/server/api/composition";
import { createContextInner } from "@/server/api/context";
import { appRouter, createCaller } from "@/server/api/root";

// `cache` scopes each to one server render: one context and one QueryClient per request.
const createRscContext = cache(async () =>
  createContextInner({ runtime: getApiComposition().runtime, headers: new Headers(await headers()) }),
);

export const getQueryClient = cache(makeQueryClient);

export const trpc = createTRPCOptionsProxy({
  ctx: createRscContext,
  router: appRouter,
  queryClient: getQueryClient,
});

/** A server-side caller for this request; errors are TRPCErrors with the mapped codes. */
export async function getServerCaller() {
  return createCaller(await createRscContext());
}

export function HydrateClient({ children }: { children: ReactNode }) {
  return <HydrationBoundary state={dehydrate(getQueryClient())}>{children}</HydrationBoundary>;
}
