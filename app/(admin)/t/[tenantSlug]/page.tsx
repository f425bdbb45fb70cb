import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { getServerCaller } from "@/app/_trpc/server";
import { ActivityCharts } from "./_components/activity-charts";
import { GettingStarted } from "./_components/getting-started";
import { OverviewCounts } from "./_components/overview-counts";
import { TrendCharts } from "./_components/trend-charts";
import { UsageTiles } from "./_components/usage-tiles";

export const metadata: Metadata = { title: "Overview" };
export const dynamic = "force-dynamic";

export default async function OverviewPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  const caller = await getServerCaller();
  const [{ counts }, checklist] = await Promise.all([
    caller.tenant.overview({ tenantSlug }),
    caller.operations.gettingStarted({ tenantSlug }),
  ]);
  return (
    <>
      <PageHeader title="Overview" description="What this tenant is running right now." />
      {checklist.complete ? null : <GettingStarted tenantSlug={tenantSlug} steps={checklist.steps} />}
      <OverviewCounts tenantSlug={tenantSlug} counts={counts} />
      <ActivityCharts tenantSlug={tenantSlug} />
      <TrendCharts tenantSlug={tenantSlug} />
      <UsageTiles tenantSlug={tenantSlug} />
    </>
  );
}
