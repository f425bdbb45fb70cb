import { ArrowRight } from "lucide-react";
import type { Metadata } from "next";
import Link from "next/link";
import { PageHeader } from "@/app/_components/ui/page-header";
import { getServerCaller } from "@/app/_trpc/server";
import { ActivityCharts } from "./_components/activity-charts";
import { OverviewCounts } from "./_components/overview-counts";
import { UsageTiles } from "./_components/usage-tiles";

export const metadata: Metadata = { title: "Overview" };
export const dynamic = "force-dynamic";

export default async function OverviewPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const { counts } = await (await getServerCaller()).tenant.overview({ tenantSlug });
  return (
    <>
      <PageHeader title="Overview" description="What this tenant is running right now." />
      <OverviewCounts tenantSlug={tenantSlug} counts={counts} />
      <ActivityCharts tenantSlug={tenantSlug} />
      <UsageTiles tenantSlug={tenantSlug} />
      <div className="mt-8 grid gap-3 md:grid-cols-3">
        {[
          {
            title: "Create an agent",
            text: "A model endpoint, a system prompt, tools and defaults.",
            href: "agents",
          },
          {
            title: "Start a session",
            text: "Chat with an agent; its workspace is provisioned on demand.",
            href: "sessions",
          },
          {
            title: "Invite your team",
            text: "Send an invitation link with the role they get.",
            href: "members",
          },
        ].map((step) => (
          <Link
            key={step.title}
            href={`${base}/${step.href}`}
            className="bg-card hover:bg-accent/40 group flex items-start justify-between gap-3 rounded-xl border p-4 transition-colors"
          >
            <span>
              <span className="block text-sm font-medium">{step.title}</span>
              <span className="text-muted-foreground mt-1 block text-xs">{step.text}</span>
            </span>
            <ArrowRight className="text-muted-foreground mt-0.5 size-4 transition-transform group-hover:translate-x-0.5" />
          </Link>
        ))}
      </div>
    </>
  );
}
