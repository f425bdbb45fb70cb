"use client";

import { useQuery } from "@tanstack/react-query";
import { usePathname, useRouter, useSearchParams } from "next/navigation";
import { useEffect, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Card, CardContent } from "@/app/_components/ui/card";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Tabs, TabsContent, TabsList, TabsTrigger } from "@/app/_components/ui/tabs";
import { useTRPC } from "@/app/_trpc/client";
import { TRANSITIONAL_STATES } from "../workspace-format";
import { PurgeReceipts } from "./purge-receipts";
import { WorkspaceActions } from "./workspace-actions";
import { WorkspaceEvents } from "./workspace-events";
import { WorkspaceFiles } from "./workspace-files";
import { WorkspaceMcps } from "./workspace-mcps";
import { WorkspacePreviews } from "./workspace-previews";
import { WorkspaceOperations } from "./workspace-operations";
import { WorkspaceOverview } from "./workspace-overview";
import { WorkspaceSkills } from "./workspace-skills";
import { WorkspaceTerminal } from "./workspace-terminal";

const POLL_MS = 1_000;
const TABS = [
  { value: "overview", label: "Overview" },
  { value: "files", label: "Files" },
  { value: "skills", label: "Skills" },
  { value: "mcp", label: "MCP servers" },
  { value: "terminal", label: "Terminal" },
  { value: "previews", label: "Previews" },
  { value: "events", label: "Events" },
  { value: "operations", label: "Operations" },
  { value: "receipts", label: "Receipts" },
] as const;
type Tab = (typeof TABS)[number]["value"];
const tabOf = (value: string | null): Tab => TABS.find((tab) => tab.value === value)?.value ?? "overview";

/** Files, skills and MCP servers are opened only on a ready workspace: opening them would start it. */
function NotReady() {
  return (
    <Card>
      <CardContent className="text-muted-foreground text-sm" data-testid="contents-note">
        Shown while the workspace is ready: opening them now would start it again.
      </CardContent>
    </Card>
  );
}

/**
 * A workspace in tabs (overview, files, skills, MCP servers, a terminal where the backend offers one,
 * events, operations: stage timings and a timeline, purge receipts), the tab in the URL
 * (`?tab=`), with Stop and Purge above them. Polls while a worker is moving it from one state to the next.
 */
export function WorkspaceDetail({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  const trpc = useTRPC();
  const router = useRouter();
  const pathname = usePathname();
  const searchParams = useSearchParams();
  const tab = tabOf(searchParams.get("tab"));
  // Set once a purge is requested: its job runs in a worker, so the page polls until it lands.
  const [purgeRequested, setPurgeRequested] = useState(false);
  const workspace = useQuery(
    trpc.workspace.get.queryOptions(
      { tenantSlug, workspaceId },
      {
        refetchInterval: (query) => {
          const state = query.state.data?.state;
          if (!state) return false;
          if (TRANSITIONAL_STATES.includes(state)) return POLL_MS;
          return purgeRequested && state !== "PURGED" ? POLL_MS : false;
        },
      },
    ),
  );
  const state = workspace.data?.state;
  useEffect(() => {
    if (state === "PURGED") setPurgeRequested(false);
  }, [state]);

  if (workspace.error) return <Alert>{workspace.error.message}</Alert>;
  if (!workspace.data) return <Skeleton className="h-64 w-full" />;
  const data = workspace.data;
  const ready = data.state === "READY";

  const select = (value: string) => {
    const params = new URLSearchParams(searchParams.toString());
    if (value === "overview") params.delete("tab");
    else params.set("tab", value);
    const query = params.toString();
    router.replace(query ? `${pathname}?${query}` : pathname, { scroll: false });
  };

  return (
    <div className="grid gap-5">
      <WorkspaceActions
        tenantSlug={tenantSlug}
        workspaceId={workspaceId}
        state={data.state}
        generation={data.generation}
        activeLeases={data.activeLeases}
        onPurgeRequested={() => setPurgeRequested(true)}
      />
      <Tabs value={tab} onValueChange={select}>
        <TabsList aria-label="Workspace">
          {TABS.filter((item) => item.value !== "terminal" || data.terminal).map((item) => (
            <TabsTrigger key={item.value} value={item.value}>
              {item.label}
            </TabsTrigger>
          ))}
        </TabsList>
        <TabsContent value="overview">
          <WorkspaceOverview tenantSlug={tenantSlug} data={data} />
        </TabsContent>
        <TabsContent value="files">
          {ready ? <WorkspaceFiles tenantSlug={tenantSlug} workspaceId={workspaceId} /> : <NotReady />}
        </TabsContent>
        <TabsContent value="skills">
          {ready ? (
            <WorkspaceSkills
              tenantSlug={tenantSlug}
              workspaceId={workspaceId}
              agentId={data.agentId}
              agentName={data.agentName}
            />
          ) : (
            <NotReady />
          )}
        </TabsContent>
        <TabsContent value="mcp">
          {ready ? (
            <WorkspaceMcps tenantSlug={tenantSlug} workspaceId={workspaceId} agentId={data.agentId} />
          ) : (
            <NotReady />
          )}
        </TabsContent>
        <TabsContent value="terminal">
          {ready && data.terminal ? (
            <WorkspaceTerminal tenantSlug={tenantSlug} workspaceId={workspaceId} />
          ) : (
            <NotReady />
          )}
        </TabsContent>
        <TabsContent value="previews">
          <WorkspacePreviews tenantSlug={tenantSlug} workspaceId={workspaceId} />
        </TabsContent>
        <TabsContent value="events">
          <WorkspaceEvents
            tenantSlug={tenantSlug}
            workspaceId={workspaceId}
            live={TRANSITIONAL_STATES.includes(data.state)}
          />
        </TabsContent>
        <TabsContent value="operations">
          <WorkspaceOperations
            tenantSlug={tenantSlug}
            workspaceId={workspaceId}
            live={TRANSITIONAL_STATES.includes(data.state)}
          />
        </TabsContent>
        <TabsContent value="receipts">
          <PurgeReceipts
            tenantSlug={tenantSlug}
            workspaceId={workspaceId}
            waitForReceipt={purgeRequested || data.state === "PURGED"}
          />
        </TabsContent>
      </Tabs>
    </div>
  );
}
