import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { WarmPoolsTable } from "./warm-pools-table";

export const metadata: Metadata = { title: "Warm pools" };

export default function WarmPoolsPage() {
  return (
    <>
      <PageHeader
        title="Warm pools"
        description="Idle machines made before anyone asks, bound to a workspace at its first use. Set them with BERTH_WARM_POOLS; each pool aims at the busiest minute of recent first uses, within its minimum and maximum."
      />
      <WarmPoolsTable />
    </>
  );
}
