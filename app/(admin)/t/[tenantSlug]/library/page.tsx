import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { LibraryHeaderActions } from "./library-add";
import { LibraryTable } from "./library-table";

export const metadata: Metadata = { title: "Library" };

export default async function LibraryPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Library"
        description="Vetted MCP servers and skills of this tenant: equip an agent's defaults or install into a workspace in one click, and see which agents use each."
        actions={<LibraryHeaderActions tenantSlug={tenantSlug} />}
      />
      <LibraryTable tenantSlug={tenantSlug} />
    </>
  );
}
