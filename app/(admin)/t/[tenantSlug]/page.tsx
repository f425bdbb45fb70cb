import type { Metadata } from "next";
import { Suspense } from "react";
import { HydrateClient, getQueryClient, trpc } from "@/app/_trpc/server";
import { OverviewCounts, OverviewCountsSkeleton } from "./_components/overview-counts";

export const metadata: Metadata = { title: "Overview" };
export const dynamic = "force-dynamic";

export default async function OverviewPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  // Started on the server and streamed to the client's cache, so the counts render without a second fetch.
  void getQueryClient().prefetchQuery(trpc.tenant.overview.queryOptions({ tenantSlug }));
  return (
    <HydrateClient>
      <h1>Overview</h1>
      <p className="lead">What this tenant is running right now.</p>
      <Suspense fallback={<OverviewCountsSkeleton />}>
        <OverviewCounts tenantSlug={tenantSlug} />
      </Suspense>
    </HydrateClient>
  );
}
