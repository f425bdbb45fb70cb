"use client";

import "./zod-jitless";
import { type QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { createTRPCClient } from "@trpc/client";
import { createTRPCContext } from "@trpc/tanstack-react-query";
import { type ReactNode, useState } from "react";
import { makeQueryClient } from "@/app/_trpc/query-client";
import type { AppRouter } from "@/server/api/root";
import { berthLinks } from "@/server/client/create-berth-client";

// TRPCProvider stays in this module: only TRPCReactProvider below mounts it.
const { TRPCProvider, useTRPC, useTRPCClient } = createTRPCContext<AppRouter>();
export { useTRPC, useTRPCClient };

const TRPC_URL = "/api/trpc";

let browserQueryClient: QueryClient | undefined;

function getQueryClient(): QueryClient {
  // On the server every render gets its own client (no cross-request cache); in the browser one client
  // lives for the page, or React would throw it away when a component suspends.
  if (typeof window === "undefined") return makeQueryClient();
  return (browserQueryClient ??= makeQueryClient());
}

/** Wraps the app: the cookie session travels with every same-origin call, so no auth header here. */
export function TRPCReactProvider({ children }: { children: ReactNode }) {
  const queryClient = getQueryClient();
  const [trpcClient] = useState(() =>
    createTRPCClient<AppRouter>({
      // chat.send streams over its own POST (see server/client/create-berth-client.ts for the contract).
      links: berthLinks({ url: TRPC_URL }),
    }),
  );
  return (
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
        {children}
      </TRPCProvider>
    </QueryClientProvider>
  );
}
